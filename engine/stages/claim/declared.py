"""The claim stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.pipeline.checks import declare
from claimcheck.engine.stages.claim.run import PB_CLAIM, PB_LABEL, PB_REVIEW, PB_SCOPE

declare("claim.completeness", PB_CLAIM, shaped=False)
declare("claim.target_semantics", PB_LABEL, shaped=False)
declare(
    "claim.success_criterion",
    "Define task-specific go/no-go rules before a pilot, not after seeing its result.",
)
declare("claim.comparators", PB_SCOPE, shaped=False)
declare("claim.prior_sessions", PB_REVIEW)

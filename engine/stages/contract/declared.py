"""The contract stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.pipeline.checks import NO_JOB, SFT, TEXT_CLASSIFICATION, TRAINED, declare
from claimcheck.engine.stages.contract.checks import (
    PB_BATCH,
    PB_FEATURES,
    PB_HEAD,
    PB_MEMORY,
    PB_PIN,
    PB_PREP,
    PB_REQ,
    PB_SFT,
    PB_UNCERTAIN,
)
from claimcheck.engine.stages.contract.fit import PB_FIT, PB_GO, PB_MEM_MEASURED, PB_SCOPE

TIMING = "Performance timing and quality benchmarks are different experiments."

declare("contract.requested_vs_effective", PB_REQ)
declare("contract.candidate", PB_PIN, tasks=NO_JOB, shaped=False)
declare("contract.model_identity", PB_PIN, tasks=TRAINED, shaped=False)
declare("contract.data_identity", PB_PIN, shaped=False)
declare("contract.environment", PB_PIN)
declare("contract.effective", PB_PIN)
declare("contract.digest", "Give each deliberate operation a stable identity.")
# Verified on real inputs and fitted (a refused contract records the first five as not run).
declare("contract.prepared_lengths", PB_PREP, tasks=TRAINED)
declare("contract.prepared_columns", PB_FEATURES, tasks=TRAINED, shaped=False)
declare("contract.effective_batch", PB_BATCH, tasks=TRAINED, shaped=False)
declare("contract.memory", f"{PB_MEMORY} {PB_UNCERTAIN}", tasks=TRAINED)
declare("contract.fit_check", f"{PB_FIT} {PB_GO} {PB_SCOPE}", tasks=TRAINED, shaped=False)
declare("contract.prepared_supervision", PB_SFT, tasks=SFT, shaped=False, required=False)
declare("contract.prepared_eos", PB_SFT, tasks=SFT, shaped=False, required=False)
declare("contract.prepared_packing", PB_SFT, tasks=TRAINED, shaped=False, required=False)
declare("contract.prepared_samples", PB_SFT, tasks=TRAINED, required=False)
declare("contract.prepared_labels", PB_HEAD, tasks=TEXT_CLASSIFICATION, shaped=False, required=False)
declare(
    "contract.fit_adapters",
    f"LoRA targets must match modules; {PB_FIT}",
    tasks=TRAINED,
    shaped=False,
    required=False,
)
declare("contract.fit_timing", TIMING, tasks=TRAINED, shaped=False, required=False)
declare("contract.memory_measured", PB_MEM_MEASURED, tasks=TRAINED, required=False)
# A declared tuning search (engine/stages/contract/tuning.py): recorded only when the contract has one.
from claimcheck.engine.stages.contract.tuning import PB_CONCURRENCY, PB_KEEP, PB_SEARCH, PB_TIED  # noqa: E402

declare("contract.search_declaration", f"{PB_SEARCH} {PB_TIED}", tasks=TRAINED, required=False)
declare("contract.search_trials", PB_KEEP, tasks=TRAINED, required=False)
declare("contract.search_selection", PB_KEEP, tasks=TRAINED, required=False)
declare("contract.search_concurrency", PB_CONCURRENCY, tasks=TRAINED, required=False)

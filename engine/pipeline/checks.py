"""The check registry: every check id declared once, with its playbook line and when it applies.

A declaration is one line beside the code that owns the check's playbook lines:

    declare("split.prevalence", PB_PREVALENCE, targets=CATEGORICAL)

It gives the id (its stage is the part before the first dot), the playbook line the check cites,
the claim task kinds and target types it applies to (empty: every claim), whether a session of a
claim it applies to always records it (`required`: measured, or "not run" with the reason), and
whether code reads its measured values by field (`shaped=False`: they are recorded and shown, and
replay compares them, but no reader parses them). The shape itself is engine/shapes' (`shape_for`),
the one owner of shapes; tests/test_check_registry.py holds the two to each other.

`not_run` and `not_applicable` build a check's "not run" record from its declaration, so no stage
writes one by hand. Declarations live in the modules named in DECLARING_MODULES and are imported
by name when a lookup needs them (like the stage table in registry.py), so this module sits below
the stages and learners that declare and use it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.shapes import Shape, shape_for

# The module holding each stage's declarations (baseline and artifact checks are built by the
# learners' packages, which declare them there).
DECLARING_MODULES = {
    "claim": "claimcheck.engine.stages.claim.declared",
    "source": "claimcheck.engine.stages.source.declared",
    "split": "claimcheck.engine.stages.split.declared",
    "baseline": "claimcheck.engine.baseline.declared",
    "contract": "claimcheck.engine.stages.contract.declared",
    "dispatch": "claimcheck.engine.stages.dispatch.declared",
    "artifact": "claimcheck.engine.artifact.declared",
}

# The claim task kinds and target types declarations name (engine/stats/registry.py's TASK_KINDS and
# TARGET_TYPES, which sit above this module; tests/test_check_registry.py compares them).
TRAINED = ("text_classification", "causal_lm_sft")  # a training job is dispatched
LEARNED = ("text_classification", "tabular")  # class-based learners and their per-class figures
TABULAR = ("tabular",)  # a scikit-learn candidate, no job
SFT = ("causal_lm_sft",)
TEXT_CLASSIFICATION = ("text_classification",)
CATEGORICAL = ("categorical",)
NUMERIC = ("numeric",)
MULTI_LABEL = ("multi_label",)
RETRIEVAL = ("retrieval",)  # a query-document ranking claim (engine/retrieval)
NO_JOB = ("tabular", "retrieval")  # no training job: the candidate is fitted or loaded in the artifact stage
JOB = (*TRAINED, "retrieval")  # a training job is dispatched (a retrieval claim's with fine_tuning = true)


@dataclass(frozen=True)
class CheckSpec:
    """One check's declaration. An id ending in "*" declares a family (dispatch.alarms.*)."""

    id: str
    playbook: str
    tasks: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    required: bool = True
    shaped: bool = True
    # True / False: the check applies only to a claim with / without fine-tuning (a retrieval claim
    # runs a job only when claim.fine_tuning is true); None: either.
    fine_tuning: bool | None = None

    @property
    def stage(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def shape(self) -> type[Shape] | None:
        return shape_for(self.id.rstrip("*"))

    def applies(self, task_kind: str, target_type: str, fine_tuning: bool = True) -> bool:
        """Whether the check applies to a claim of this task kind, target type and fine-tuning."""
        return (
            (not self.tasks or task_kind in self.tasks)
            and (not self.targets or target_type in self.targets)
            and (self.fine_tuning is None or self.fine_tuning == fine_tuning)
        )


_DECLARED: dict[str, CheckSpec] = {}


def declare(check_id: str, playbook: str, **when: Any) -> CheckSpec:
    """Declare a check (keywords: the CheckSpec fields tasks, targets, required, shaped, fine_tuning)."""
    spec = CheckSpec(check_id, playbook, **when)
    old = _DECLARED.get(check_id)
    if old is not None and old != spec:
        raise RuntimeError(f"check {check_id} is declared twice, differently: {old} and {spec}")
    _DECLARED[check_id] = spec
    return spec


def declared() -> dict[str, CheckSpec]:
    """Every declared check, by id."""
    for name in DECLARING_MODULES.values():
        importlib.import_module(name)
    return dict(_DECLARED)


def _lookup(check_id: str) -> CheckSpec | None:
    if check_id in _DECLARED:
        return _DECLARED[check_id]
    return next(
        (s for cid, s in _DECLARED.items() if cid.endswith("*") and check_id.startswith(cid[:-1])), None
    )


def declaration(check_id: str) -> CheckSpec:
    """The declaration of a check id (a member of a declared family included)."""
    found = _lookup(check_id)
    module = DECLARING_MODULES.get(check_id.split(".", 1)[0])
    if found is None and module is not None:
        importlib.import_module(module)
        found = _lookup(check_id)
    if found is None:
        raise KeyError(f"check {check_id} is not declared: add a declare() line in its stage's declared.py")
    return found


def not_run(
    check_id: str,
    reason: str,
    *,
    why: str = "",
    coverage: str = "full",
    measured: dict[str, Any] | None = None,
) -> Check:
    """The record of a declared check that did not run, saying why (`reason` is its summary)."""
    return Check(
        id=check_id,
        status="not_run",
        basis="not_run",
        summary=reason,
        coverage=coverage,
        measured=measured or {},
        why=why,
        playbook=declaration(check_id).playbook,
    )


def not_applicable(check_id: str, reason: str, *, why: str = "") -> Check:
    """A declared check that does not apply to this claim (its task kind or target): "not run: <reason>"."""
    return not_run(check_id, f"not run: {reason}", why=why)

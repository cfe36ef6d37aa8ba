"""The metric registry (engine/stats/registry.py): every metric × task kind × target type is either
refused by the claim stage with a message or judged by the artifact stage — never "not decided"
because of the metric; AUROC / AUPRC equal scikit-learn's; the training job tracks what it can."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.stages.claim.inputs import Inputs as ClaimInputs
from claimcheck.engine.stats import registry
from tests.claim_answers import CLAIM

CLASSES = ["account", "billing", "returns", "security", "shipping", "technical"]
BINARY = ["other", "security"]


def _claim(metric: str, task: str, kind: str, classes: list[str], positive: str = "") -> dict:
    claim = {
        **CLAIM,
        "task_kind": task,
        "target_type": kind,
        "primary_metric": metric,
        "class_order": classes if kind in ("categorical", "multi_label") and task != "causal_lm_sft" else [],
        "positive_class": positive,
        "success": {"metric": metric, "op": ">=", "value": 0.0, "relative_to": "trivial_baseline"},
    }
    if task == "causal_lm_sft":
        claim["target_type"] = ""
    if task == "retrieval":  # the unchanged encoder against the arms a retrieval claim has
        claim.update(fine_tuning=False, comparators=["trivial_baseline", "bm25"])
    if kind == "multi_label":  # one-vs-rest learners (tabular) or a fine-tuned sigmoid head: no base_model
        claim.update(
            fine_tuning=task == "text_classification", comparators=["trivial_baseline", "best_baseline"]
        )
    return claim


CASES = [
    (metric, task, kind, classes)
    for metric in [*registry.names(), "f1_at_k", "dev_loss"]
    for task in registry.TASK_KINDS
    for kind in registry.TARGET_TYPES
    for classes in (CLASSES, BINARY)
    if not (kind == "numeric" and classes is BINARY)
]


def _judged(metric: str, task: str, claim: dict) -> str:
    """The artifact stage's judgement of a criterion in `metric` for this claim, from its own
    comparison code on predictions of two arms: met / not_met / not_run (with why)."""
    from claimcheck.engine.artifact import sft
    from claimcheck.engine.stages.artifact import run as artifact

    up = {"claim": StageRecord(stage="claim", inputs=claim)}
    if task == "causal_lm_sft":
        # The generation comparison scores every SFT metric of the registry for every arm.
        assert sft.primary_metric(up) == metric and metric in sft.SFT_METRICS
        return "judged"
    checks = _ranking_comparison(metric) if task == "retrieval" else _comparison(metric, claim, up)
    judged = artifact._criterion(up, {"checks": checks}, checks)
    assert judged.state in ("met", "not_met"), judged.why
    return judged.state


def _comparison(metric: str, claim: dict, up: dict) -> list:
    from claimcheck.engine.artifact import quality, sklearn_candidate
    from claimcheck.engine.stages.artifact.inputs import Inputs

    rng = np.random.default_rng(7)
    n = 240
    inputs = Inputs(bootstrap_resamples=100, seed=1, calibration="none")
    if registry.target_type(claim) == "numeric":
        y = rng.normal(size=n)
        preds = {
            "candidate": {
                "proba": (y + rng.normal(scale=0.3, size=n)).reshape(-1, 1),
                "ok": np.ones(n, bool),
            },
            "trivial_baseline": {"proba": np.zeros((n, 1)), "ok": np.ones(n, bool)},
        }
        sc = sklearn_candidate.RegressionScored(preds, y, None, "row", metric, 100, 1, "full")
        return [sklearn_candidate.regression_comparison(sc)]
    classes = claim["class_order"]
    if registry.target_type(claim) == "multi_label":
        return [_multilabel_comparison(metric, classes, rng, n)]
    y = rng.integers(0, len(classes), size=n)
    logits = rng.normal(size=(n, len(classes)))
    logits[np.arange(n), y] += 1.5
    cand = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    prior = np.full((n, len(classes)), 1 / len(classes))
    preds = {
        a: {"proba": p, "ok": np.ones(n, bool)} for a, p in (("candidate", cand), ("trivial_baseline", prior))
    }
    metric_name = artifact_metric(up)
    positive = registry.positive_index(claim, classes)
    sc = quality.Scored(inputs, preds, y, y, None, "row", classes, metric_name, None, "full", positive)
    return [c for c in quality.quality(sc) if c.id == "artifact.comparison"]


def _ranking_comparison(metric: str) -> list:
    """A retrieval claim's comparison from its own code (engine/retrieval/stages.py) on rankings of
    60 queries over 40 documents: an informed candidate against a random ranking."""
    from claimcheck.engine.retrieval import data as rdata
    from claimcheck.engine.retrieval import stages as retrieval
    from claimcheck.engine.stats.uncertainty import Bootstrap

    rng = np.random.default_rng(7)
    rel = (rng.random((60, 40)) < 0.05).astype(float)
    rel[np.arange(60), rng.integers(0, 40, 60)] = 1.0
    qs = rdata.Queries([f"q{i}" for i in range(60)], [""] * 60, rel)
    scores = {
        "candidate": rel + rng.normal(scale=0.5, size=rel.shape),
        "trivial_baseline": rng.random(rel.shape),
    }
    boot = Bootstrap(n=100, seed=1)
    values, intervals = retrieval._scored_arms(qs, scores, 5, boot)
    what = {"candidate": retrieval.WHAT["unchanged"], retrieval.TRIVIAL: retrieval.WHAT[retrieval.TRIVIAL]}
    return retrieval._compared((values, intervals, what), metric, qs, 40, 5, boot, "full")


def _multilabel_comparison(metric: str, classes: list[str], rng: np.random.Generator, n: int):
    from claimcheck.engine.stages.artifact import multilabel
    from claimcheck.engine.stages.artifact.inputs import Inputs

    y = (rng.random((n, len(classes))) < 0.3).astype(np.int8)
    cand = np.where(rng.random(y.shape) < 0.85, y, 1 - y)
    decided = {"candidate": cand, "trivial_baseline": np.zeros_like(y)}
    sc = multilabel._Scored(y, decided, None, "row", Inputs(bootstrap_resamples=100, seed=1))
    return multilabel.comparison(sc, metric)


def artifact_metric(up: dict) -> str:
    from claimcheck.engine.stages.artifact import run as artifact

    return artifact._primary_metric(up)


@pytest.mark.parametrize(("metric", "task", "kind", "classes"), CASES)
def test_every_metric_is_refused_at_the_claim_or_judged_at_the_artifact(
    metric: str, task: str, kind: str, classes: list[str]
) -> None:
    positive = "security" if classes is BINARY else ""
    claim = _claim(metric, task, kind, classes, positive)
    entry = registry.METRICS.get(metric)
    # A binary claim in a metric that reads no positive class leaves it empty.
    if entry is None or not entry.needs_positive_class:
        claim["positive_class"] = ""
    why = registry.refusal(claim, metric)
    if why:
        with pytest.raises(ValidationError) as info:
            ClaimInputs.model_validate(claim)
        assert why in str(info.value) and "primary_metric" in str(info.value)
        return
    assert entry is not None and not entry.refusal
    ClaimInputs.model_validate(claim)
    assert _judged(metric, task, claim) in ("met", "not_met", "judged")


def test_ranking_metrics_are_a_retrieval_claims_only() -> None:
    for metric in ("ndcg_at_k", "recall_at_k", "mrr"):
        with pytest.raises(ValidationError, match="is not computed for a text_classification claim"):
            ClaimInputs.model_validate(_claim(metric, "text_classification", "categorical", CLASSES))
        ClaimInputs.model_validate(_claim(metric, "retrieval", "categorical", ["0", "1"]))
    with pytest.raises(ValidationError, match="'macro_f1' is not computed for a retrieval claim"):
        ClaimInputs.model_validate(_claim("macro_f1", "retrieval", "categorical", ["0", "1"]))


def test_a_binary_auroc_claim_names_its_positive_class() -> None:
    for metric in ("auroc", "auprc"):
        with pytest.raises(ValidationError, match="names its positive class"):
            ClaimInputs.model_validate(_claim(metric, "tabular", "categorical", BINARY))
        with pytest.raises(ValidationError, match="'fraud' is not one of the class_order"):
            ClaimInputs.model_validate(_claim(metric, "tabular", "categorical", BINARY, "fraud"))
        with pytest.raises(ValidationError, match="macro one-vs-rest: leave positive_class empty"):
            ClaimInputs.model_validate(_claim(metric, "tabular", "categorical", CLASSES, "security"))
    with pytest.raises(ValidationError, match="positive_class is read by auroc, auprc only"):
        ClaimInputs.model_validate(_claim("macro_f1", "tabular", "categorical", BINARY, "security"))


def test_comparators_and_relative_to_are_the_claims_arms() -> None:
    claim = _claim("macro_f1", "text_classification", "categorical", CLASSES)
    with pytest.raises(ValidationError, match="'best_baseline' is not one of the claim's comparators"):
        ClaimInputs.model_validate(
            {
                **claim,
                "comparators": ["trivial_baseline", "base_model"],
                "success": {**claim["success"], "relative_to": "best_baseline"},
            }
        )
    with pytest.raises(ValidationError, match="oracle is not an arm the artifact stage scores"):
        ClaimInputs.model_validate({**claim, "comparators": ["trivial_baseline", "oracle"]})
    with pytest.raises(ValidationError, match="fine_tuning = false has none"):
        ClaimInputs.model_validate({**claim, "fine_tuning": False})


def test_frozen_probe_is_a_fine_tuned_text_classifiers_comparator() -> None:
    """The linear probe needs an encoder and a classification head: refused, with the reason, on an
    SFT claim (the unchanged base answers there), a tabular claim, and a claim without a fine-tune."""
    claim = _claim("macro_f1", "text_classification", "categorical", CLASSES)
    probe = {**claim, "comparators": [*claim["comparators"], "frozen_probe"]}
    relative = {**probe, "success": {**claim["success"], "relative_to": "frozen_probe"}}
    assert ClaimInputs.model_validate(relative).success.relative_to == "frozen_probe"
    sft = _claim("exact_match", "causal_lm_sft", "categorical", [])
    with pytest.raises(ValidationError, match="for causal-LM SFT the unchanged base model .* use base_model"):
        ClaimInputs.model_validate({**sft, "comparators": ["trivial_baseline", "frozen_probe"]})
    tab = _claim("macro_f1", "tabular", "categorical", CLASSES)
    with pytest.raises(ValidationError, match="no fine-tuned encoder: remove it"):
        ClaimInputs.model_validate(
            {**tab, "fine_tuning": False, "comparators": ["trivial_baseline", "frozen_probe"]}
        )
    with pytest.raises(ValidationError, match="no fine-tuned encoder: remove it"):
        ClaimInputs.model_validate(
            {**probe, "fine_tuning": False, "comparators": ["trivial_baseline", "frozen_probe"]}
        )


def test_the_artifact_arms_are_exactly_the_claims_comparators() -> None:
    from claimcheck.engine.artifact.arms import chosen_arms

    claimed = ["trivial_baseline", "best_baseline", "base_model"]
    assert chosen_arms([], claimed) == claimed
    assert chosen_arms(["candidate", "best_baseline"], claimed) == ["best_baseline"]
    with pytest.raises(ValueError, match="base_model is not a comparator of the claim"):
        chosen_arms(["base_model"], ["trivial_baseline"])


def _ranked_data(k: int, n: int = 400, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), y] += 1.0
    logits = np.round(logits, 1)  # ties, which both must rank alike
    return y, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


def test_auroc_and_auprc_equal_scikit_learn() -> None:
    from sklearn.metrics import average_precision_score, roc_auc_score

    y, p = _ranked_data(2)
    for pos in (0, 1):
        sc = registry.Scoring(("a", "b"), pos)
        assert registry.get("auroc").value(y, p, sc) == pytest.approx(
            roc_auc_score(y == pos, p[:, pos]), abs=1e-12
        )
        assert registry.get("auprc").value(y, p, sc) == pytest.approx(
            average_precision_score(y == pos, p[:, pos]), abs=1e-12
        )
    y, p = _ranked_data(4)
    sc = registry.Scoring(("a", "b", "c", "d"))
    onehot = np.eye(4)[y]
    assert registry.get("auroc").value(y, p, sc) == pytest.approx(
        roc_auc_score(y, p, multi_class="ovr", average="macro"), abs=1e-12
    )
    assert registry.get("auprc").value(y, p, sc) == pytest.approx(
        average_precision_score(onehot, p, average="macro"), abs=1e-12
    )


def test_paired_auroc_difference_resamples_the_units() -> None:
    from claimcheck.engine.stats import uncertainty

    y, p = _ranked_data(2, n=300)
    q = np.full_like(p, 0.5)
    units = np.arange(300) // 3  # families of three rows
    boot = uncertainty.Bootstrap(n=200, seed=0, classes=["a", "b"])
    d = registry.paired_difference(
        registry.get("auroc"), (y, p, q, units), boot, registry.Scoring(("a", "b"), 1)
    )
    assert d["units"] == 100 and d["unit"] == "group" and d["resamples"] == 200
    assert d["estimate_b"] == pytest.approx(0.5) and d["lo"] > 0


def test_the_job_tracks_auroc_on_dev_and_selects_by_it() -> None:
    from claimcheck.engine.training.evaluate import metric_value

    for name in ("auroc", "auprc", "macro_f1", "log_loss"):
        assert registry.dev_metric(name) == (name, "")
    assert registry.dev_metric("exact_match")[1] == "exact_match is not tracked during training; macro_f1 is"
    y, p = _ranked_data(2)
    assert metric_value("auroc", y.tolist(), p, ["a", "b"], "b") == pytest.approx(
        registry.get("auroc").value(y, p, registry.Scoring(("a", "b"), 1))
    )
    # checkpoint selection compares dev values in the metric's own direction
    assert registry.get("auroc").better(0.8, 0.7) and registry.get("log_loss").better(0.3, 0.4)
    assert registry.lower_is_better("dev_loss") and not registry.lower_is_better("macro_auroc")

"""What the artifact stage's parts share: the playbook lines its checks cite, the arm names and how a
paired difference's interval is written."""

PB_IDENTITY = "Verify saved model/adapter/head/tokenizer identity and reload behavior on retained inputs."
PB_PARITY = "Check training-serving parity. Weight reload is not proof of optimizer resume or exact stochastic reproducibility. Evaluate in the correct inference mode."
PB_ARMS = (
    "Inspect every arm's requested, scored, failed and missing counts. Provider errors are missing evidence, not zero "
    "quality. Paired metrics use shared valid examples; discuss coverage bias."
)
PB_COMPARE = "Evaluate the selected artifact against frozen comparators."
PB_REPORT = (
    "Report raw and calibrated results separately, including per-class/slice regressions, uncertainty appropriate to "
    "the independent unit, and latency as a separate axis."
)
PB_CAL = (
    "Scores on the data used to fit calibration are in-sample; calibrated final-test scores are distinct."
)
PB_LATENCY = "Performance timing and quality benchmarks are different experiments."
PB_OUTCOMES = (
    "Distinguish preparation, optimization, artifact verification, final comparison and serving readiness. Process "
    "success does not establish model improvement or production safety."
)
PB_BASE = "Match the requested unchanged-base comparator to the exact model identity and inference contract."
ARM_NAMES = ("candidate", "base_model", "frozen_probe", "best_baseline", "trivial_baseline", "bm25")


def band(d: dict) -> str:
    """'[lo, hi]' of a paired difference, or why it has none (the one interval rule's refusal)."""
    if "lo" in d and "hi" in d:
        return f"[{d['lo']:+.4f}, {d['hi']:+.4f}]"
    return f"(no interval: {'too few units' if d.get('refused') else 'too few defined resamples'})"

"""The baseline stage on a small hand-made session: upstream records and membership built in the fixture."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.data import splits
from claimcheck.engine.evidence import Check, StageRecord, dump_toml
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.baseline import run as baseline
from tests.training_fixtures import FAMILY_COUNTS

CLASSES = ["billing", "technical", "security"]
WORDS = {
    "billing": ["invoice", "charge", "refund", "payment", "card"],
    "technical": ["error", "crash", "login", "slow", "bug"],
    "security": ["phishing", "breach", "stolen", "suspicious", "hacked"],
}
FILLER = ["please", "help", "hello", "thanks", "account", "today", "issue", "again"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_session(
    tmp: Path, n: int = 900, seed: int = 0, *, folds: bool = False
) -> tuple[dict[str, StageRecord], StageContext]:
    rng = np.random.default_rng(seed)
    label = rng.choice(CLASSES, size=n, p=[0.6, 0.3, 0.1])
    cust = rng.integers(0, n // 3, size=n)
    texts = []
    for lab in label:
        words = list(rng.choice(FILLER, 4))
        # 75% of tickets carry a word of their class; the rest are ambiguous
        if rng.random() < 0.75:
            words.append(str(rng.choice(WORDS[lab])))
        else:
            words.append(str(rng.choice(WORDS[str(rng.choice(CLASSES))])))
        texts.append(" ".join(words))
    frame = pl.DataFrame({"ticket_id": np.arange(n), "body": texts, "customer_id": cust, "queue": label})
    frame.write_csv(tmp / "t.csv")
    data = tmp / "session" / "data"
    data.mkdir(parents=True)
    fam = pl.DataFrame({"row_id": np.arange(n, dtype=np.int64), "family_id": cust.astype(np.int64)})
    fam.write_parquet(data / "families.parquet")
    part = splits.assign_groups(
        cust.astype(np.int64), {"train": 0.6, "dev": 0.2, "calibration": 0.1, "test": 0.1}, seed
    )
    names = np.asarray(splits.SPLITS)[part]
    fold = splits.assign_folds(cust.astype(np.int64), 4, seed) if folds else np.full(n, -1)
    mem = pl.DataFrame(
        {"row_id": np.arange(n, dtype=np.int64), "split": names, "fold": fold.astype(np.int64)}
    )
    mem.write_parquet(data / "split.parquet")
    claim = StageRecord(
        stage="claim",
        inputs={
            "task_kind": "text_classification",
            "primary_metric": "macro_f1",
            "metric_averaging": "macro",
            "class_order": CLASSES,
        },
    )
    source = StageRecord(
        stage="source",
        inputs={
            "files": ["t.csv"],
            "label_column": "queue",
            "input_columns": ["body"],
            "text_columns": ["body"],
            "id_column": "ticket_id",
            "entity_columns": ["customer_id"],
        },
        checks=[
            Check(
                id="source.entity_families",
                status="info",
                summary="x",
                measured=FAMILY_COUNTS
                | {
                    "families_path": "data/families.parquet",
                    "families_sha256": _sha(data / "families.parquet"),
                },
            ),
            Check(
                id="source.conflicting_labels",
                status="info",
                summary="x",
                measured={
                    "columns": ["body"],
                    "groups": 1,
                    "rows": 2,
                    "noise_ceiling_accuracy": 0.97,
                    "rows_above_ceiling": 0,
                },
            ),
        ],
    )
    split = StageRecord(
        stage="split",
        inputs={"strategy": "group"},
        checks=[
            Check(
                id="split.membership",
                status="info",
                summary="x",
                measured={
                    "path": "data/split.parquet",
                    "sha256": _sha(data / "split.parquet"),
                    "rows": 0,
                    "sizes": {},
                    "excluded": {},
                },
            )
        ],
    )
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp, stage="baseline")
    return {"claim": claim, "source": source, "split": split}, ctx


@pytest.fixture
def session(tmp_path):
    return make_session(tmp_path)


def _inputs(**kw):
    base = dict(bootstrap_resamples=200, cv="off", min_df=1, max_features=2000)
    base.update(kw)
    return baseline.Inputs(**base)


def test_holdout_trivial_learnable_and_collapse(session):
    upstream, ctx = session
    rec = baseline.run(_inputs(), upstream, ctx)
    dump_toml(rec.model_dump(mode="python"))  # every measured value is TOML-able
    triv = rec.check("baseline.trivial")
    mf = triv.measured["learners"]["most_frequent"]
    # the trivial learner's accuracy is the dev majority rate (train and dev share the majority class)
    assert triv.measured["accuracy_equals_majority_rate"] and mf["accuracy"] == mf["majority_rate"]
    learn = rec.check("baseline.learnability")
    assert learn.status == "pass" and learn.measured["beats_trivial"]
    assert learn.measured["difference"]["lo"] > 0 and learn.measured["difference"]["unit"] == "family"
    assert learn.measured["mcnemar"]["p_value"] < 0.05
    assert learn.measured["ceiling_comparison"] == "below_ceiling"
    per = rec.check("baseline.per_class")
    assert set(per.measured["collapsed"]["most_frequent"]) == {"technical", "security"}
    assert "never recalls" in per.summary
    conv = rec.check("baseline.conventional").measured["learners"]["tfidf_logreg"]
    assert len(conv["confusion"]) == 3 and sum(map(sum, conv["confusion"])) == conv["n"]
    cal = rec.check("baseline.calibration")
    assert cal.measured["fitted_on"] == "calibration_split"
    assert cal.measured["evaluation"]["calibrated"]["sample"].startswith("out-of-sample")
    assert cal.measured["fitting_rows"]["calibrated"]["sample"].startswith("in-sample")
    assert rec.check("baseline.operating_point").status == "not_run"
    pred = rec.check("baseline.predictions")
    path = ctx.session_dir / pred.measured["path"]
    assert _sha(path) == pred.measured["sha256"]
    frame = pl.read_parquet(path)
    assert set(frame["learner"]) == {"most_frequent", "prior", "tfidf_logreg"}
    assert {"proba_billing", "proba_security"} <= set(frame.columns)


def test_deterministic_replay(session):
    upstream, ctx = session
    a = baseline.run(_inputs(), upstream, ctx)
    ctx.replay = True
    b = baseline.run(_inputs(), upstream, ctx)
    for ca, cb in zip(a.checks, b.checks, strict=True):
        if ca.replay == "compare":
            assert ca.measured == cb.measured, ca.id


def test_locked_test_cannot_be_read(session):
    upstream, ctx = session
    with pytest.raises(splits.LockedTestError, match="baseline"):
        splits.rows("test", upstream, ctx, caller="baseline")
    rec = baseline.run(_inputs(), upstream, ctx)
    lock = rec.check("baseline.locked_test")
    assert lock.status == "pass" and lock.measured["guard_refused"] and lock.measured["locked_reads"] == 0
    assert "baseline" in lock.measured["refusal"]
    # the stage's predictions hold no test row
    mem = pl.read_parquet(ctx.session_dir / "data" / "split.parquet")
    test_ids = set(mem.filter(pl.col("split") == "test")["row_id"])
    frame = pl.read_parquet(ctx.session_dir / "data" / baseline.PREDICTIONS_FILE)
    assert not (set(frame["row_id"]) & test_ids)


def test_locked_test_fails_when_guard_is_broken(session, monkeypatch):
    upstream, ctx = session
    real = splits.rows

    def leaky(split, up, c, *, caller, labels=True):
        return real(split, up, c, caller="artifact", labels=labels)

    monkeypatch.setattr(splits, "rows", leaky)
    rec = baseline.run(_inputs(), upstream, ctx)
    assert rec.check("baseline.locked_test").status == "fail"


def test_operating_point_and_isotonic(session):
    upstream, ctx = session
    op = baseline.OperatingPoint(constraint="min_precision", positive_class="security", target=0.8)
    rec = baseline.run(_inputs(operating_point=op, calibration="isotonic"), upstream, ctx)
    chk = rec.check("baseline.operating_point")
    assert chk.status in ("pass", "warn")
    assert chk.measured["choice"]["fit_sample"].startswith("in-sample")
    assert chk.measured["applied"]["sample"].startswith("out-of-sample")
    if chk.measured["choice"]["feasible"]:
        assert chk.measured["choice"]["fit"]["precision"] >= 0.8


def test_kfold_uses_split_folds_and_nested_selection(tmp_path):
    upstream, ctx = make_session(tmp_path, n=450, folds=True)
    rec = baseline.run(_inputs(cv="on", C_grid=[0.3, 3.0]), upstream, ctx)
    conv = rec.check("baseline.conventional")
    assert conv.measured["mode"] == "kfold" and "out-of-fold" in conv.coverage
    assert len(conv.measured["learners"]["tfidf_logreg"]["trials"]) == 2 * 4  # C grid × outer folds
    assert rec.check("baseline.calibration").measured["fitted_on"] == "out_of_fold"
    assert rec.check("baseline.learnability").status in ("pass", "warn")


def test_bad_inputs_are_clear(session):
    upstream, ctx = session
    with pytest.raises(StageInputError, match="hgb"):
        baseline.run(_inputs(learners=["most_frequent", "hgb"]), upstream, ctx)
    with pytest.raises(StageInputError, match="positive_class"):
        baseline.run(
            _inputs(operating_point=baseline.OperatingPoint(constraint="cost", positive_class="nope")),
            upstream,
            ctx,
        )
    bad_claim = upstream | {
        "claim": StageRecord(
            stage="claim", inputs={"primary_metric": "macro_f1", "class_order": ["billing", "technical"]}
        )
    }
    with pytest.raises(StageInputError, match="class_order"):
        baseline.run(_inputs(), bad_claim, ctx)
    with pytest.raises(StageInputError, match="split"):
        baseline.run(_inputs(), {"claim": upstream["claim"], "source": upstream["source"]}, ctx)


def _retarget(upstream, ctx, tmp: Path, frame: pl.DataFrame, claim: dict, source: dict):
    """Swap the data file and the claim/source inputs, keeping the membership and families files."""
    frame.write_csv(tmp / "t.csv")
    up = dict(upstream)
    up["claim"] = StageRecord(stage="claim", inputs=claim)
    up["source"] = upstream["source"].model_copy(update={"inputs": upstream["source"].inputs | source})
    return up


def test_tabular_classification(tmp_path):
    upstream, ctx = make_session(tmp_path, n=600)
    rng = np.random.default_rng(5)
    label = pl.read_csv(tmp_path / "t.csv")["queue"].to_numpy()
    x = np.where(label == "billing", 1.0, 0.0) + rng.normal(0, 0.5, 600)
    chan = np.where(rng.random(600) < 0.7, label, "web")
    frame = pl.read_csv(tmp_path / "t.csv").with_columns(pl.Series("amount", x), pl.Series("channel", chan))
    up = _retarget(
        upstream,
        ctx,
        tmp_path,
        frame,
        {"task_kind": "tabular", "primary_metric": "balanced_accuracy", "class_order": CLASSES},
        {"input_columns": ["amount", "channel"], "text_columns": []},
    )
    rec = baseline.run(_inputs(hgb_max_iter=20), up, ctx)
    learners = rec.check("baseline.conventional").measured["learners"]
    assert set(learners) == {"hgb", "logreg"}
    assert rec.check("baseline.learnability").measured["metric"] == "balanced_accuracy"
    assert rec.check("baseline.learnability").status == "pass"


def test_regression(tmp_path):
    upstream, ctx = make_session(tmp_path, n=600)
    rng = np.random.default_rng(6)
    x = rng.normal(size=600)
    frame = pl.read_csv(tmp_path / "t.csv").with_columns(
        pl.Series("x", x), pl.Series("queue", (3 * x + rng.normal(0, 0.3, 600)).round(3))
    )
    up = _retarget(
        upstream,
        ctx,
        tmp_path,
        frame,
        {"task_kind": "tabular", "primary_metric": "mae"},
        {"input_columns": ["x"], "text_columns": []},
    )
    rec = baseline.run(_inputs(hgb_max_iter=20), up, ctx)
    learn = rec.check("baseline.learnability")
    assert learn.status == "pass" and learn.measured["difference"]["hi"] < 0  # MAE: lower is better
    assert rec.check("baseline.calibration").status == "not_run"


def test_generation_most_frequent_answer(tmp_path):
    upstream, ctx = make_session(tmp_path, n=300)
    up = dict(upstream)
    up["claim"] = StageRecord(
        stage="claim", inputs={"task_kind": "causal_lm_sft", "primary_metric": "exact_match"}
    )
    rec = baseline.run(_inputs(), up, ctx)
    triv = rec.check("baseline.trivial")
    assert triv.measured["answer"] == "billing"
    assert 0.4 < triv.measured["exact_match"] < 0.8 and "lo" in triv.measured["interval"]
    assert rec.check("baseline.conventional").status == "not_run"


def test_auroc_primary_metric(session):
    upstream, ctx = session
    up = dict(upstream)
    up["claim"] = StageRecord(stage="claim", inputs={"primary_metric": "auroc", "class_order": CLASSES})
    rec = baseline.run(_inputs(bootstrap_resamples=100), up, ctx)
    learn = rec.check("baseline.learnability")
    assert learn.measured["metric"] == "macro_auroc" and learn.measured["difference"]["lo"] > 0


def test_time_ordered_folds_train_only_on_the_past(tmp_path):
    upstream, ctx = make_session(tmp_path, n=450)
    frame = pl.read_csv(tmp_path / "t.csv").with_columns(
        (pl.datetime(2024, 1, 1) + pl.duration(hours=pl.col("ticket_id")))
        .dt.strftime("%Y-%m-%dT%H:%M:%S")
        .alias("created_at")
    )
    up = _retarget(upstream, ctx, tmp_path, frame, upstream["claim"].inputs, {"time_column": "created_at"})
    up["split"] = upstream["split"].model_copy(update={"inputs": {"strategy": "time"}})
    rec = baseline.run(_inputs(cv="on", cv_folds=3), up, ctx)
    conv = rec.check("baseline.conventional")
    assert conv.measured["mode"] == "kfold-time"
    # the earliest fold has no past to train on, so it is never evaluated
    assert "out-of-fold (2 folds" in conv.coverage
    n_eval = conv.measured["learners"]["tfidf_logreg"]["n"]
    pooled = int(rec.check("baseline.timing").measured["eval_rows"])
    assert n_eval < pooled

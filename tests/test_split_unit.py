"""The split's grouping is the unit everywhere after it: on a data set with planted duplicate families,
split by duplicate families, the baseline's K-fold keeps every family in one fold and the baseline's
and the artifact's unit counts equal the family counts (a real tabular session, scikit-learn path).
Also: the group_time gap counts a row once, and when an arm fails on some locked-test rows,
artifact.coverage_bias compares the rows every arm scored with the rest."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-tabular.toml"
PLANTED = 70  # duplicate families of 2-5 identical rows
SINGLES = 400  # rows with an input of their own
INPUTS = ["x1", "x2", "channel"]


def _planted_csv(path: Path, customers: int = 0) -> None:
    """Rows whose queue follows x1 / x2; PLANTED families of identical inputs (and label), each a
    different customer per row, so only the duplicate grouping can keep a family together."""
    rng = np.random.default_rng(7)
    sizes = [1] * SINGLES + [int(k) for k in rng.integers(2, 6, PLANTED)]
    rows = []
    for fam, size in enumerate(sizes):
        x1, x2 = float(rng.normal()), float(rng.normal())
        channel = ("email", "chat", "phone")[fam % 3]
        queue = "a" if x1 + 0.5 * x2 > 0.3 else ("b" if x1 > -0.6 else "c")
        for _ in range(size):
            rows.append((round(x1, 9), round(x2, 9), channel, queue))
    order = rng.permutation(len(rows))
    pl.DataFrame(
        {
            "ticket_id": np.arange(len(rows)),
            "x1": [rows[i][0] for i in order],
            "x2": [rows[i][1] for i in order],
            "channel": [rows[i][2] for i in order],
            "customer_id": [f"C{i % (customers or len(rows))}" for i in range(len(rows))],
            "created_at": [f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00" for i in range(len(rows))],
            "queue": [rows[i][3] for i in order],
        }
    ).write_csv(path)


def _answers(
    ws: Path, split: str = 'strategy = "group"\ngrouping = "duplicates"\n', customers: int = 0
) -> Path:
    text = ANSWERS.read_text()
    swaps = {
        'workspace = ".."': 'workspace = "."',
        'inference_inputs = ["channel", "product"]': f"inference_inputs = {INPUTS}".replace("'", '"'),
        'class_order = ["account", "billing", "returns", "security", "shipping", "technical"]': (
            'class_order = ["a", "b", "c"]'
        ),
        'files = ["sample_data/tickets.csv"]': 'files = ["planted.csv"]',
        'input_columns = ["channel", "product"]': f"input_columns = {INPUTS}".replace("'", '"'),
        'entity_columns = ["customer_id", "thread_id", "case_id"]': 'entity_columns = ["customer_id"]',
        'unavailable_columns = ["resolution_code"]': "unavailable_columns = []",
        '[[source.filters]]\nreason = "CI-sized run: tickets created before 2024-06 (about a quarter of the sample)"\n'
        "where = \"created_at < '2024-06-01'\"\n": "",
        'channel = "yes"\nproduct = "yes"': 'channel = "yes"\nx1 = "yes"\nx2 = "yes"',
        'strategy = "group"\n': split,
        'cv = "off"               # holdout: fit on train, measure on dev': 'cv = "on"\ncv_folds = 4',
        "bootstrap_resamples = 1000": "bootstrap_resamples = 200",
        "latency_examples = 20": "latency_examples = 2",
    }
    for old, new in swaps.items():
        assert old in text, old
        text = text.replace(old, new)
    _planted_csv(ws / "planted.csv", customers)
    (ws / "answers.toml").write_text(text)
    return ws / "answers.toml"


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("planted")
    result = run_answers(_answers(ws), ws / "s")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    return ws


def _families(ws: Path) -> pl.DataFrame:
    """row_id → the planted family, recomputed from the CSV: rows with identical model inputs."""
    df = (
        pl.read_csv(ws / "planted.csv").with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    )
    return df.select("row_id", pl.struct(INPUTS).rank("dense").alias("planted"))


def test_the_split_reports_the_families_it_kept_together(planted: Path) -> None:
    recs = Session.open(planted / "s").records()
    check = recs["split"].check("split.membership")
    mem = parse(check, data_shapes.Membership)
    fams = _families(planted)
    assert mem.unit == "duplicate family"
    assert mem.kept_together["exact_duplicates"].multi_row_families == PLANTED
    assert mem.units == fams.get_column("planted").n_unique() == SINGLES + PLANTED
    assert f"{PLANTED} exact-duplicate families of 2+ rows" in check.summary
    assert "the unit of later folds and intervals: 470 duplicate families" in check.summary
    assert "entity families of 2+ rows" not in check.summary  # one customer per row: none planted
    cross = recs["split"].check("split.family_intersection")
    assert cross.status == "pass" and cross.summary.startswith("0 duplicate families (0 rows)")


def test_the_baseline_folds_and_resamples_the_split_families(planted: Path) -> None:
    recs = Session.open(planted / "s").records()
    fams = _families(planted)
    saved = pl.read_parquet(planted / "s" / "data" / "split.parquet").join(fams, on="row_id")
    pooled = saved.filter(pl.col("split").is_in(["train", "dev"]))
    conv = parse(recs["baseline"].check("baseline.conventional"), baseline_shapes.Conventional)
    assert conv.mode == "kfold" and conv.unit == "duplicate family"
    assert conv.units == pooled.get_column("planted").n_unique() < pooled.height
    assert conv.units_spanning_folds == 0
    preds = pl.read_parquet(planted / "s" / "data" / "baseline_dev_predictions.parquet").join(
        fams, on="row_id"
    )
    per_family = preds.group_by("planted").agg(pl.col("fold").n_unique().alias("k"))
    assert per_family.height == conv.units and per_family.get_column("k").max() == 1  # no family spans folds
    learn = parse(recs["baseline"].check("baseline.learnability"), baseline_shapes.Learnability)
    assert (
        learn.difference.units == conv.units
        and "duplicate family resamples" in recs["baseline"].check("baseline.learnability").summary
    )
    assert learn.mcnemar is not None and learn.mcnemar.units == conv.units


def test_the_baseline_refuses_row_units_over_a_duplicate_grouped_split(planted: Path, tmp_path: Path) -> None:
    from claimcheck.engine.pipeline import core
    from claimcheck.engine.pipeline.context import StageInputError

    recs = Session.open(planted / "s").records()
    upstream = {name: recs[name] for name in ("claim", "source", "split")}
    inputs = {**recs["baseline"].inputs, "unit": "row"}
    ctx = StageContext(session_dir=planted / "s", workspace=planted, stage="baseline")
    with pytest.raises(
        StageInputError, match=r'unit = "row" is refused: the split kept each duplicate family'
    ):
        core.compute("baseline", inputs, upstream, ctx)


def test_the_artifact_intervals_and_mcnemar_use_the_split_families(planted: Path) -> None:
    recs = Session.open(planted / "s").records()
    fams = _families(planted)
    test = pl.read_parquet(planted / "s" / "data" / "split.parquet").filter(pl.col("split") == "test")
    n_families = test.join(fams, on="row_id").get_column("planted").n_unique()
    assert n_families < test.height  # planted copies sit together in the locked test
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.unit == "duplicate family" and comp.shared_rows == test.height
    for d in comp.differences.values():
        assert d.units == n_families
    for arm, m in comp.mcnemar.items():
        assert m.units == n_families, arm
        discordant = m.a_only_correct + m.b_only_correct
        assert m.method.startswith("clustered") if discordant else m.method.startswith("none"), arm


def test_group_time_counts_a_row_left_out_once(tmp_path: Path) -> None:
    """A row left out for its family (dated after its family's split) is not counted again as inside
    the gap: the rows kept and the rows left out add up to the rows there are."""
    import datetime as dt

    lines = ["txt,num,cust,created_at,lab"]
    n = 240
    for i in range(n):  # one row a day; families of rows 10 days apart straddle each time cut
        date = (dt.date(2024, 1, 1) + dt.timedelta(days=i)).isoformat()
        lines.append(f"text {i} here,{i},c{i % 10}_{i // 30},{date},{'xy'[i % 2]}")
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    src = source.run(
        source.Inputs(
            files=["d.csv"],
            label_column="lab",
            input_columns=["txt", "num"],
            text_columns=["txt"],
            availability={"txt": "yes", "num": "yes"},
            entity_columns=["cust"],
            time_column="created_at",
            as_of="2030-01-01",
        ),
        {},
        ctx,
    )
    out = split.run(
        split.Inputs(
            strategy="group_time",
            fractions={"train": 0.6, "dev": 0.2, "test": 0.2},
            gap_days=20,
            rationale="next months, new customers",
        ),
        {"source": src},
        ctx,
    )
    mem = parse(out.check("split.membership"), data_shapes.Membership)
    family_out = mem.excluded["dated after their family's split"]
    gap = mem.excluded["inside the gap before a later split"]
    assert family_out > 0 and gap > 0
    assert mem.rows + sum(mem.excluded.values()) == n


def test_mcnemar_over_families_is_clustered_and_over_single_rows_unchanged() -> None:
    """Durkalski et al. (2003) by hand: units d_k = b_k − c_k = 2, −1, 1 (and a concordant unit):
    (Σ d)² / Σ d² = 4 / 6. With one row per unit the row-level test is unchanged."""
    from scipy import stats

    from claimcheck.engine.stats.uncertainty import mcnemar

    a = np.array([1, 1, 0, 1, 1, 1], dtype=bool)
    b = np.array([0, 0, 1, 0, 1, 1], dtype=bool)
    units = np.array([5, 5, 9, 2, 7, 7])
    r = mcnemar(a, b, units)
    assert r["units"] == 4 and r["method"].startswith("clustered over 4 units")
    assert r["statistic"] == pytest.approx(4 / 6)
    assert r["p_value"] == pytest.approx(float(stats.chi2.sf(4 / 6, 1)))
    assert mcnemar(a, b, np.arange(6)) == mcnemar(a, b)
    assert "units" not in mcnemar(a, b)


def test_coverage_bias_compares_the_rows_an_arm_failed_on(planted: Path, tmp_path: Path, monkeypatch) -> None:
    """The candidate fails on every phone-channel row (one row a batch, so only those): the
    comparison runs on the other rows, and artifact.coverage_bias says the unscored rows are all
    phone while the scored ones hold none. Without failures the check passes. (The candidate, not
    best_baseline: on this claim without fine-tuning the candidate is the best baseline learner, so
    best_baseline is not an arm.)"""
    import types

    from claimcheck.engine.artifact import sklearn_candidate
    from claimcheck.engine.stages.artifact import learner

    sess = Session.open(planted / "s")
    whole = parse(sess.records()["artifact"].check("artifact.coverage_bias"), artifact_shapes.CoverageBias)
    assert sess.records()["artifact"].check("artifact.coverage_bias").status == "pass"
    assert whole.unscored_rows == 0 and whole.scored_rows == whole.rows
    real = sklearn_candidate.predictor

    def failing_on_phone(*args):
        fn = real(*args)

        def predict(frame):
            if (frame["channel"] == "phone").any():
                raise RuntimeError("planted failure on a phone row")
            return fn(frame)

        predict.arm_batch = 1
        return predict

    # only the artifact stage's candidate arm fails (its parity check on dev keeps the real predictor)
    monkeypatch.setattr(
        learner,
        "sklearn_candidate",
        types.SimpleNamespace(**{**vars(sklearn_candidate), "predictor": failing_on_phone}),
    )
    copy = tmp_path / "s"
    shutil.copytree(planted / "s", copy, ignore=shutil.ignore_patterns(".lock"))
    shutil.copy(planted / "planted.csv", tmp_path / "planted.csv")
    sess = Session.open(copy)
    rec = sess.run_stage("artifact", sess.records()["artifact"].inputs, save=False)
    test = pl.read_parquet(copy / "data" / "split.parquet").filter(pl.col("split") == "test")
    channel = (
        pl.read_csv(planted / "planted.csv")
        .with_row_index("row_id")
        .with_columns(pl.col("row_id").cast(pl.Int64))
    )
    phone = test.join(channel, on="row_id").filter(pl.col("channel") == "phone").height
    assert 0 < phone < test.height
    check = rec.check("artifact.coverage_bias")
    bias = parse(check, artifact_shapes.CoverageBias)
    assert bias.unscored_rows == phone and bias.scored_rows == test.height - phone
    assert bias.unscored_by_arm == {"candidate": phone, "trivial_baseline": 0}
    assert bias.slices["channel"].unscored == {"phone": 1.0} and "phone" not in bias.slices["channel"].scored
    assert "slice channel" in bias.differs and check.status == "warn" and check.coverage == "full"
    assert bias.class_mix is not None and sum(bias.class_mix.unscored.values()) == pytest.approx(1.0)
    assert bias.input_length is None  # no free-text input in this data
    comp = parse(rec.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.shared_rows == bias.scored_rows  # paired figures on the shared rows only
    assert f"paired figures use the {bias.scored_rows} rows every arm scored" in check.summary


def test_time_ordered_folds_keep_each_family_whole(tmp_path: Path) -> None:
    """A time split's K-fold trains each fold on earlier ones; a customer whose tickets span the
    period sits whole in the fold of its earliest ticket (150 customers of 4-5 rows over a year)."""
    answers = _answers(tmp_path, 'strategy = "time"\n', customers=150)
    result = run_answers(answers, tmp_path / "s")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(tmp_path / "s").records()
    conv = parse(recs["baseline"].check("baseline.conventional"), baseline_shapes.Conventional)
    assert conv.mode == "kfold-time" and conv.unit == "family" and conv.units_spanning_folds == 0
    rows = pl.read_csv(tmp_path / "planted.csv").with_row_index("row_id")
    rows = rows.with_columns(pl.col("row_id").cast(pl.Int64)).select("row_id", "customer_id")
    preds = pl.read_parquet(tmp_path / "s" / "data" / "baseline_dev_predictions.parquet").join(
        rows, on="row_id"
    )
    per_customer = preds.group_by("customer_id").agg(pl.col("fold").n_unique().alias("k"))
    assert per_customer.height == conv.units and per_customer.get_column("k").max() == 1
    assert preds.get_column("fold").n_unique() == conv.folds > 1

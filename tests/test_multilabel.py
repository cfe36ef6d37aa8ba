"""Multi-label targets (claim target_type = "multi_label"): the label-list parse, the metrics against
scikit-learn, the refusals, and docs/answers-multilabel.toml run headless once to a verdict on
sample_data/tickets_tags.csv, replayed, its records read back (a label found only in test and a
malformed label value each run on a copy of the data)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import tomlkit
from pydantic import ValidationError

from claimcheck.engine.data import labelsets
from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.stats import multilabel as ml
from claimcheck.engine.stats import registry

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-multilabel.toml"
DATA = ROOT / "sample_data" / "tickets_tags.csv"


# ---------------------------------------------------------------- units


def test_label_lists_parse_to_canonical_sets_and_malformed_values_to_null() -> None:
    df = pl.DataFrame({"t": ['["b", " a", "a"]', "[]", "oops", None, "[1]", '["x|y"]']})
    out = df.select(labelsets.target_expr("t", "json_list", "", "target")).get_column("target")
    assert out.to_list() == ["a|b", "", None, None, None, None]
    df = pl.DataFrame({"t": ["b; a;a", ";", None]})
    out = df.select(labelsets.target_expr("t", "delimited", ";", "target")).get_column("target")
    assert out.to_list() == ["a|b", "", None]
    m = labelsets.indicator(["a|b", "", "b"], ["a", "b", "c"])
    assert m.tolist() == [[1, 1, 0], [0, 0, 0], [0, 1, 0]]
    assert labelsets.canonical(m, ["a", "b", "c"]) == ["a|b", "", "b"]


def test_multilabel_metrics_equal_scikit_learn() -> None:
    from sklearn.metrics import accuracy_score, f1_score

    rng = np.random.default_rng(3)
    y = (rng.random((300, 6)) < 0.3).astype(int)
    y[:, 5] = 0  # a label no row holds: its F1 is 0 (zero_division=0) in the macro mean
    scores = rng.random((300, 6))
    d = ml.decisions(scores)
    assert ml.value("micro_f1", y, scores) == pytest.approx(f1_score(y, d, average="micro", zero_division=0))
    assert ml.value("macro_f1", y, scores) == pytest.approx(f1_score(y, d, average="macro", zero_division=0))
    assert ml.value("subset_accuracy", y, scores) == pytest.approx(accuracy_score(y, d))
    # the registry computes the same for a 2-D target, and draws its interval from the same sums
    for name in ml.METRICS:
        assert registry.get(name).value(y, d) == pytest.approx(ml.value(name, y, d))
        assert "multi_label" in registry.get(name).target_types


def test_thresholds_are_chosen_per_label_and_default_without_positives() -> None:
    y = np.array([[1, 0], [1, 0], [0, 0], [0, 0]])
    s = np.array([[0.3, 0.9], [0.35, 0.1], [0.1, 0.2], [0.2, 0.4]])
    chosen, how = ml.choose_thresholds(y, s)
    # 0.25 and 0.3 both separate the label perfectly: the tie goes to the one nearer 0.5
    assert chosen[0] == pytest.approx(0.3) and chosen[1] == ml.DEFAULT_THRESHOLD
    assert "no calibration row" in how[1]


def _claim(**kw: object) -> dict:
    claim = tomllib.loads(ANSWERS.read_text())["claim"]
    claim.update(kw)
    return claim


def test_the_claim_refuses_tabular_fine_tuning_and_a_positive_class_for_multi_label() -> None:
    from claimcheck.engine.stages.claim.inputs import Inputs

    Inputs.model_validate(_claim())
    Inputs.model_validate(_claim(task_kind="text_classification", fine_tuning=True))  # the sigmoid head
    with pytest.raises(ValidationError, match="sigmoid / BCE head"):
        Inputs.model_validate(_claim(fine_tuning=True, comparators=["trivial_baseline"]))
    with pytest.raises(ValidationError, match="choose one of them"):
        Inputs.model_validate(_claim(task_kind="text_classification"))
    with pytest.raises(ValidationError, match="base_model is not an arm of a multi-label claim"):
        Inputs.model_validate(
            _claim(task_kind="text_classification", fine_tuning=True, comparators=["base_model"])
        )
    with pytest.raises(ValidationError, match="positive_class"):
        Inputs.model_validate(_claim(positive_class="billing"))
    with pytest.raises(ValidationError, match="not computed"):
        Inputs.model_validate(_claim(primary_metric="accuracy", success={"metric": "accuracy"}))


def test_the_source_refuses_a_delimiter_without_its_format_and_a_mapping_on_lists() -> None:
    from claimcheck.engine.stages.source.inputs import Inputs

    with pytest.raises(ValidationError, match="label_delimiter"):
        Inputs(label_format="delimited")
    with pytest.raises(ValidationError, match="label_delimiter"):
        Inputs(label_delimiter=";")
    with pytest.raises(ValidationError, match="label_mapping"):
        Inputs(label_format="json_list", label_mapping={"a": "b"})


def test_the_sample_data_is_what_make_tags_writes(tmp_path: Path) -> None:
    from claimcheck.sample_data import make_tags

    before = DATA.read_bytes()
    make_tags.HERE = tmp_path
    make_tags.main()
    assert (tmp_path / "tickets_tags.csv").read_bytes() == before


# ---------------------------------------------------------------- one real session


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    session_dir = tmp_path_factory.mktemp("multilabel") / "s"
    result = run_answers(ANSWERS, session_dir)
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    return session_dir


def test_the_documented_answers_reach_a_verdict_with_intervals(session: Path) -> None:
    recs = Session.open(session).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "micro_f1" and set(comp.values) == {"candidate", "trivial_baseline"}
    d = comp.differences["trivial_baseline"]
    assert d.lo is not None and d.lo <= d.estimate <= d.hi
    verdict = recs["artifact"].check("artifact.verdict")
    assert verdict.status == "pass" and "micro_f1" in verdict.summary
    eff = recs["contract"].check("contract.effective").measured["effective"]
    assert eff["sklearn"]["task"] == "multilabel" and eff["sklearn"]["estimator"].endswith(
        "OneVsRestClassifier"
    )


def test_the_session_records_every_declared_check(session: Path) -> None:
    from tests.test_check_registry import assert_session_declared

    written = assert_session_declared(session)
    assert {
        "source.label_lists",
        "split.label_support",
        "baseline.per_label",
        "artifact.label_thresholds",
        "artifact.per_label",
    } <= written


def test_source_and_split_describe_the_labels(session: Path) -> None:
    recs = Session.open(session).records()
    lists = recs["source"].check("source.label_lists").measured
    assert lists["labels"] == 6 and lists["malformed_rows"] == 0
    raw = pl.read_csv(DATA).get_column("tags").to_list()
    assert lists["empty_label_sets"] == raw.count("[]")
    assert recs["source"].check("source.class_coverage").status == "not_run"
    support = recs["split"].check("split.label_support")
    assert support.status == "pass" and "iterative stratification" in support.measured["placement"]
    assert 0 <= support.measured["max_prevalence_deviation"] < 0.02
    train_ids = set(
        pl.read_parquet(session / "data" / "split.parquet")
        .filter(pl.col("split") == "train")["row_id"]
        .to_list()
    )
    tags = pl.read_csv(DATA).with_row_index("row_id").filter(pl.col("row_id").is_in(list(train_ids)))
    billing = sum("billing" in t for t in tags.get_column("tags").to_list())
    assert support.measured["support"]["billing"]["train"] == billing


def test_baseline_figures_recompute_from_the_saved_predictions(session: Path) -> None:
    from sklearn.metrics import f1_score

    recs = Session.open(session).records()
    conv = recs["baseline"].check("baseline.conventional").measured["learners"]["tfidf_logreg"]
    preds = pl.read_parquet(session / "data" / "baseline_dev_predictions.parquet").filter(
        pl.col("learner") == "tfidf_logreg"
    )
    labels = ["billing", "bug", "feature_request", "login", "refund", "shipping"]
    mem = pl.read_parquet(session / "data" / "split.parquet")
    truth = (
        pl.read_csv(DATA)
        .with_row_index("row_id")
        .with_columns(pl.col("row_id").cast(pl.Int64))
        .join(mem, on="row_id")
        .select("row_id", labelsets.target_expr("tags", "json_list", "", "target"))
    )
    joined = preds.join(truth, on="row_id")
    y = labelsets.indicator(joined.get_column("target"), labels)
    d = labelsets.indicator(joined.get_column("predicted"), labels)
    assert conv["micro_f1"] == pytest.approx(f1_score(y, d, average="micro", zero_division=0))
    per = recs["baseline"].check("baseline.per_label").measured
    assert set(per["support"]) == set(labels)


def test_thresholds_come_from_calibration_and_per_label_names_its_figures(session: Path) -> None:
    recs = Session.open(session).records()
    th = recs["artifact"].check("artifact.label_thresholds").measured
    assert th["calibration_rows"] > 0 and set(th["thresholds"]["candidate"]) == set(
        recs["claim"].inputs["class_order"]
    )
    assert all(t in th["grid"] or t == ml.DEFAULT_THRESHOLD for t in th["thresholds"]["candidate"].values())
    per = recs["artifact"].check("artifact.per_label").measured
    assert set(per["arms"]) == {"candidate", "trivial_baseline"}
    assert set(per["differences"]["billing"]) == {"trivial_baseline"}


def test_replay_reproduces_the_session(session: Path) -> None:
    assert replay(session).exit_code == 0


# ---------------------------------------------------------------- variants on a copy of the data


def _variant(tmp_path: Path, edit_rows, **sections: dict) -> tuple[Path, object]:
    """A workspace copy: the data edited by `edit_rows(frame)`, the answers with `sections` merged
    (stopping at the first failing stage). Returns the session folder and the run's result."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "sample_data").mkdir()
    edit_rows(pl.read_csv(DATA)).write_csv(tmp_path / "sample_data" / "tickets_tags.csv")
    answers = tomlkit.parse(ANSWERS.read_text())
    answers["session"]["stop_on_fail"] = True
    for name, values in sections.items():
        for key, value in values.items():
            answers[name][key] = value
    path = tmp_path / "docs" / "answers.toml"
    path.write_text(tomlkit.dumps(answers))
    return tmp_path / "s", run_answers(path, tmp_path / "s")


def test_a_label_only_in_test_fails_the_split(tmp_path: Path) -> None:
    import json

    def late_label(frame: pl.DataFrame) -> pl.DataFrame:
        late = frame.get_column("created_at") >= "2025-12-20"
        tags = [
            json.dumps(sorted([*json.loads(t), "urgent"])) if is_late else t
            for t, is_late in zip(frame.get_column("tags").to_list(), late.to_list(), strict=True)
        ]
        return frame.with_columns(pl.Series("tags", tags))

    order = [*tomllib.loads(ANSWERS.read_text())["claim"]["class_order"], "urgent"]
    s, _ = _variant(tmp_path, late_label, claim={"class_order": order}, split={"strategy": "time"})
    check = Session.open(s).records()["split"].check("split.label_support")
    assert check.status == "fail"
    assert check.measured["labels_only_in_test"] == ["urgent"] and "urgent" in check.summary


def test_malformed_label_values_are_named_by_file_and_line(tmp_path: Path) -> None:
    def break_two(frame: pl.DataFrame) -> pl.DataFrame:
        tags = frame.get_column("tags").to_list()
        tags[4], tags[9] = "billing, refund", '["ok", 3]'
        return frame.with_columns(pl.Series("tags", tags))

    s, _ = _variant(tmp_path, break_two)
    recs = Session.open(s).records()
    check = recs["source"].check("source.label_lists")
    assert check.status == "fail" and check.measured["malformed_rows"] == 2
    # CSV line numbers count records from 1 (the header is not a record)
    assert [(m["line"], m["value"]) for m in check.measured["malformed_named"]] == [
        (5, "billing, refund"),
        (10, '["ok", 3]'),
    ]
    assert "split" not in recs  # stop_on_fail: nothing later runs on a failing source


def test_a_label_list_source_without_a_multi_label_claim_is_refused(tmp_path: Path) -> None:
    claim = {
        "target_type": "categorical",
        "primary_metric": "macro_f1",
        "success": {"metric": "macro_f1", "op": ">=", "value": 0.0, "relative_to": "trivial_baseline"},
    }
    s, result = _variant(tmp_path, lambda f: f, claim=claim)
    assert result.exit_code == 2
    assert "source" not in Session.open(s).records()
    assert "label_format" in result.error


def test_a_delimited_column_reads_as_the_json_lists_do(tmp_path: Path, session: Path) -> None:
    import json

    def delimited(frame: pl.DataFrame) -> pl.DataFrame:
        # an empty CSV cell reads as null: the empty set is the delimiter alone
        tags = [";".join(json.loads(t)) or ";" for t in frame.get_column("tags").to_list()]
        return frame.with_columns(pl.Series("tags", tags))

    source = {"label_format": "delimited", "label_delimiter": ";"}
    s, _ = _variant(tmp_path, delimited, source=source, split={"strategy": "group"})
    recs = Session.open(s).records()
    lists = recs["source"].check("source.label_lists").measured
    same = Session.open(session).records()["source"].check("source.label_lists").measured
    assert lists["rows_per_label"] == same["rows_per_label"]
    assert lists["empty_label_sets"] == same["empty_label_sets"]
    support = recs["split"].check("split.label_support").measured
    assert support["placement"] == "not stratified by labels (strategy 'group')"
    assert support["max_prevalence_deviation"] > 0

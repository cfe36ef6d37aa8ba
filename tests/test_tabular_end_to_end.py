"""A claim without fine-tuning (the tabular recipe, docs/answers-tabular.toml) reaches an artifact
verdict headless, and replay reproduces it; the scikit-learn candidate is pinned by the contract,
no job is dispatched, and every fit runs under the native-thread cap (engine/threads.py)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from claimcheck.engine.headless.answers import load_answers, run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-tabular.toml"


@pytest.fixture(scope="module")
def tabular(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    session_dir = tmp_path_factory.mktemp("tabular") / "s"
    result = run_answers(ANSWERS, session_dir)
    return session_dir, result


def test_the_documented_tabular_answers_parse_and_are_referenced() -> None:
    answers = load_answers(ANSWERS)
    assert list(answers.stages) == [
        "claim",
        "source",
        "split",
        "baseline",
        "contract",
        "dispatch",
        "artifact",
    ]
    assert tomllib.loads(ANSWERS.read_text())["claim"]["fine_tuning"] is False
    assert "docs/answers-tabular.toml" in (ROOT / "docs" / "answers-format.md").read_text()


@pytest.mark.slow
def test_tabular_claim_reaches_an_artifact_verdict(tabular) -> None:
    session_dir, result = tabular
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(session_dir).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    eff = recs["contract"].check("contract.effective").measured["effective"]
    spec = eff["sklearn"]
    assert eff["candidate_kind"] == "sklearn" and spec["learner"] in ("hgb", "logreg")
    assert spec["estimator"].startswith("sklearn.") and spec["params_sha256"].startswith("sha256:")
    assert {"scikit-learn", "numpy", "polars"} <= set(spec["versions"])
    assert eff["data"]["split_sha256"] and eff["data"]["source_files"]
    env = recs["contract"].check("contract.environment").measured["hardware"]
    assert env["native_thread_cap"] >= 1 and env["usable_cores"] >= env["native_thread_cap"]
    disp = recs["dispatch"]
    assert disp.check("dispatch.no_job").status == "pass" and disp.check("dispatch.identity") is None
    art = recs["artifact"]
    ident = parse(art.check("artifact.identity"), artifact_shapes.Identity)
    assert art.check("artifact.identity").status == "pass" and ident.params_sha256 == spec["params_sha256"]
    assert art.check("artifact.reload_parity").status == "pass"
    arms = parse(art.check("artifact.arms"), artifact_shapes.Arms).arms
    # the candidate is the best baseline learner: never compared with itself, and the record says why
    assert set(arms) == {"candidate", "trivial_baseline"}
    assert all(c.scored == c.requested > 0 for c in arms.values())
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "macro_f1" and set(comp.differences) == {"trivial_baseline"}
    assert "comparing a model with itself" in comp.excluded["best_baseline"]
    assert art.check("artifact.arms").status == "pass"
    assert all(d.bounded for d in comp.differences.values())
    # the candidate learned something the majority class does not: its interval is above zero
    assert comp.candidate_better["trivial_baseline"] and comp.differences["trivial_baseline"].lo > 0
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.job_finished and verdict.artifact_verified
    assert verdict.claim_state in ("met", "not_met") and "trivial_baseline" in verdict.criterion
    timing = recs["baseline"].check("baseline.timing").measured
    # imports already done by an earlier test in this process round to 0 s: only present and apart
    assert timing["imports_seconds"] >= 0 and timing["native_thread_cap"] >= 1
    # learner times are fit times only: the imports are counted once, apart
    assert timing["total_seconds"] >= timing["imports_seconds"] + sum(timing["learner_seconds"].values())


@pytest.mark.slow
def test_replay_reproduces_the_tabular_session(tabular, tmp_path: Path) -> None:
    session_dir, _ = tabular
    copy = tmp_path / "s"
    shutil.copytree(session_dir, copy)
    result = replay(copy)
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    assert any(r.stage == "artifact" for r in result.rows)


@pytest.mark.slow
def test_a_changed_library_version_fails_the_identity(tabular, monkeypatch: pytest.MonkeyPatch) -> None:
    from claimcheck.engine.artifact import sklearn_candidate
    from claimcheck.engine.baseline.learners import load
    from claimcheck.engine.stages.baseline import run as baseline
    from claimcheck.engine.training.schema import SklearnCandidate

    session_dir, _ = tabular
    sess = Session.open(session_dir)
    recs = sess.records()
    spec = SklearnCandidate.model_validate(
        recs["contract"].check("contract.effective").measured["effective"]["sklearn"]
    )
    settings = baseline.Inputs.model_validate(spec.baseline_settings)
    planned = sklearn_candidate.plan(
        spec.learner, spec.C, settings, load(settings, recs, sess.context("artifact"))
    )
    assert sklearn_candidate.identity(spec, planned).status == "pass"
    monkeypatch.setattr(sklearn_candidate, "versions", lambda: {**spec.versions, "scikit-learn": "0.0.1"})
    moved = sklearn_candidate.identity(spec, planned)
    assert moved.status == "fail" and "scikit-learn" in moved.summary
    other = spec.model_copy(update={"params_sha256": "sha256:" + "0" * 64})
    assert "parameters differ" in sklearn_candidate.identity(other, planned).summary


def _regression_answers(ws: Path) -> Path:
    """The documented tabular answers turned to a numeric target (minutes to first reply, made from
    the sample tickets' product and channel), with MAE as the primary metric."""
    import polars as pl

    df = pl.read_csv(ROOT / "sample_data" / "tickets.csv").filter(pl.col("created_at") < "2024-04-01")
    base = pl.col("product").str.len_chars() * 3.0 + pl.when(pl.col("channel") == "email").then(
        40.0
    ).otherwise(5.0)
    df = df.with_columns((base + (pl.col("ticket_id") % 17).cast(pl.Float64)).alias("reply_minutes"))
    df.drop("queue").write_csv(ws / "reply.csv")
    text = ANSWERS.read_text()
    swaps = {
        'workspace = ".."': 'workspace = "."',
        'files = ["sample_data/tickets.csv"]': 'files = ["reply.csv"]',
        'label_column = "queue"': 'label_column = "reply_minutes"',
        'primary_metric = "macro_f1"': 'primary_metric = "mae"',
        'class_order = ["account", "billing", "returns", "security", "shipping", "technical"]\n': "",
        'metric = "macro_f1"\nop = ">="\nvalue = 0.02': 'metric = "mae"\nop = "<="\nvalue = -1.0',
        'learners = ["most_frequent", "prior", "logreg", "hgb"]': 'learners = ["mean", "median", "hgb"]',
        'slice_columns = ["channel"]': "slice_columns = []",
    }
    for old, new in swaps.items():
        assert old in text, old
        text = text.replace(old, new)
    (ws / "answers.toml").write_text(text)
    return ws / "answers.toml"


@pytest.mark.slow
def test_a_numeric_target_is_compared_with_its_regression_metric(tmp_path: Path) -> None:
    """The same candidate path for a numeric target: MAE (lower is better) per arm, paired family
    intervals, the verdict; replay reproduces it. (The claim's numeric target_type and regression
    source / split checks come from another branch; today the baseline infers regression from MAE.)"""
    result = run_answers(_regression_answers(tmp_path), tmp_path / "s")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(tmp_path / "s").records()
    assert (
        recs["contract"].check("contract.effective").measured["effective"]["sklearn"]["task"] == "regression"
    )
    art = recs["artifact"]
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "mae" and set(comp.values) == {"candidate", "trivial_baseline"}
    assert "best_baseline" in comp.excluded  # the candidate is the best baseline learner
    assert comp.values["candidate"] < comp.values["trivial_baseline"]
    d = comp.differences["trivial_baseline"]
    assert d.hi < 0 and comp.candidate_better["trivial_baseline"]  # lower MAE is better
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.artifact_verified and verdict.claim_state == "met"
    assert replay(tmp_path / "s").exit_code == 0


def _metric_answers(ws: Path, metric: str, binary: bool) -> Path:
    """The documented tabular answers judged in AUROC / AUPRC; `binary`: the six queues mapped to
    security / other (a label mapping in the source stage) with `security` the claim's positive class."""
    text = ANSWERS.read_text()
    swaps = {
        'workspace = ".."': f'workspace = "{ROOT.as_posix()}"',
        'primary_metric = "macro_f1"': f'primary_metric = "{metric}"',
        'metric = "macro_f1"\nop': f'metric = "{metric}"\nop',
    }
    if binary:
        mapping = ", ".join(
            f'{q} = "{"security" if q == "security" else "other"}"'
            for q in ("account", "billing", "returns", "security", "shipping", "technical")
        )
        swaps |= {
            'class_order = ["account", "billing", "returns", "security", "shipping", "technical"]': (
                'class_order = ["other", "security"]\npositive_class = "security"'
            ),
            'metric_averaging = "macro over the six queues, each class weighted equally"': (
                'metric_averaging = "binary: security against every other queue"'
            ),
            'label_column = "queue"': f'label_column = "queue"\nlabel_mapping = {{ {mapping} }}',
        }
    for old, new in swaps.items():
        assert old in text, old
        text = text.replace(old, new)
    (ws / "answers.toml").write_text(text)
    return ws / "answers.toml"


def _candidate_test_proba(session_dir: Path) -> tuple[object, object]:
    """The contracted candidate refitted as the artifact stage fits it, and its locked-test
    probabilities with the test's class indices (to recompute the recorded figure independently)."""
    import numpy as np

    from claimcheck.engine.artifact import sklearn_candidate
    from claimcheck.engine.baseline.learners import load
    from claimcheck.engine.data import splits
    from claimcheck.engine.stages.baseline import run as baseline
    from claimcheck.engine.training.schema import SklearnCandidate

    sess = Session.open(session_dir)
    recs = sess.records()
    eff = recs["contract"].check("contract.effective").measured["effective"]
    spec = SklearnCandidate.model_validate(eff["sklearn"])
    settings = baseline.Inputs.model_validate(spec.baseline_settings)
    ctx = sess.context("artifact")
    data = load(settings, recs, ctx)
    model = sklearn_candidate.fit(
        sklearn_candidate.plan(spec.learner, spec.C, settings, data), spec.learner, spec.fit_rows
    )
    test = splits.rows("test", recs, ctx, caller="artifact")
    classes = [str(c) for c in eff["label_classes"]]
    y = np.asarray([classes.index(str(t)) for t in test["target"].to_list()])
    return y, sklearn_candidate.predictor(model, spec.learner, data)(test)


@pytest.mark.slow
@pytest.mark.parametrize(("metric", "binary"), [("auroc", False), ("auprc", True)])
def test_an_auroc_or_auprc_claim_ends_in_a_verdict(tmp_path: Path, metric: str, binary: bool) -> None:
    """AUROC (macro one-vs-rest over six queues) and AUPRC (binary, the named positive class) are
    compared for every arm with paired family intervals, equal scikit-learn's figure on the
    candidate's own predictions, and the claim is judged: met or not, never 'not decided'."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    result = run_answers(_metric_answers(tmp_path, metric, binary), tmp_path / "s")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(tmp_path / "s").records()
    art = recs["artifact"]
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == metric and set(comp.values) == {"candidate", "trivial_baseline"}
    assert comp.unit == "family" and all(d.bounded for d in comp.differences.values())
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.measured_value is not None
    summary = art.check("artifact.verdict").summary
    assert ("claim met: yes" in summary or "claim met: no" in summary) and "paired interval" in summary
    y, proba = _candidate_test_proba(tmp_path / "s")
    if binary:
        pos = 1  # "security" in class_order ["other", "security"]
        expected = average_precision_score(y == pos, proba[:, pos])
    else:
        expected = roc_auc_score(y, proba, multi_class="ovr", average="macro")
    assert comp.values["candidate"] == pytest.approx(expected, abs=1e-9)
    # the trivial arm scores train's class shares: no ranking at all
    if not binary:
        assert comp.values["trivial_baseline"] == pytest.approx(0.5)
    learn = recs["baseline"].check("baseline.learnability").measured
    assert learn["metric"] == (metric if binary else f"macro_{metric}")
    assert replay(tmp_path / "s").exit_code == 0


@pytest.mark.slow
def test_a_claim_metric_the_registry_cannot_compute_is_refused_before_the_session(tmp_path: Path) -> None:
    from claimcheck.tui.cli import main

    for metric, binary, said in (
        ("ndcg_at_k", False, "is not computed for a tabular claim"),
        ("mae", False, "is not computed for a tabular claim on a categorical target"),
        ("exact_match", False, "is not computed for a tabular claim"),
    ):
        answers = _metric_answers(tmp_path, metric, binary)
        # stated categorical: a tabular claim in a regression metric is otherwise taken as numeric
        text = answers.read_text().replace(
            'task_kind = "tabular"\n', 'task_kind = "tabular"\ntarget_type = "categorical"\n', 1
        )
        answers.write_text(text)
        code = main(["run", "--answers", str(answers), str(tmp_path / metric)])
        assert code == 2 and not (tmp_path / metric).exists()
        with pytest.raises(Exception, match=said):
            load_answers(answers)
    # a binary AUPRC claim without its positive class
    answers = _metric_answers(tmp_path, "auprc", True)
    answers.write_text(answers.read_text().replace('positive_class = "security"\n', ""))
    assert main(["run", "--answers", str(answers), str(tmp_path / "nopos")]) == 2
    assert not (tmp_path / "nopos").exists()


@pytest.mark.slow
def test_an_arm_of_the_claim_left_out_fails_artifact_arms(tabular, tmp_path: Path) -> None:
    session_dir, _ = tabular
    copy = tmp_path / "s"
    shutil.copytree(session_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    sess = Session.open(copy)
    arms = parse(sess.records()["artifact"].check("artifact.arms"), artifact_shapes.Arms)
    assert arms.claim_comparators == ["trivial_baseline", "best_baseline"] and arms.unscored == []
    assert arms.excluded.keys() == {"best_baseline"}  # the candidate itself: no arm, and not a failure
    inputs = {**sess.records()["artifact"].inputs, "comparators": ["best_baseline"]}
    rec = sess.run_stage("artifact", inputs, save=False)
    check = rec.check("artifact.arms")
    assert check.status == "fail" and "trivial_baseline not run" in check.summary
    assert parse(check, artifact_shapes.Arms).unscored == ["trivial_baseline"]
    comp = parse(rec.check("artifact.comparison"), artifact_shapes.Comparison)
    assert set(comp.values) == {"candidate"} and "best_baseline" in comp.excluded
    from claimcheck.engine.pipeline.core import InvalidInputs

    claim = {**sess.records()["claim"].inputs, "comparators": ["trivial_baseline"]}
    with pytest.raises(InvalidInputs, match="'best_baseline' is not one of the claim's comparators"):
        sess.run_stage("claim", {**claim, "success": {**claim["success"], "relative_to": "best_baseline"}})

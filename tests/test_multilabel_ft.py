"""A multi-label claim with fine-tuning (docs/answers-multilabel-ft.toml, sample_data/tickets_tags.csv):
a sigmoid head trained with BCEWithLogits on multi-hot label sets, run CI-sized through all seven
stages to a verdict with paired intervals, replayed with exit 0; the job's dev metric is micro-F1 at
0.5 on its own dev predictions, and the per-label thresholds are chosen on calibration."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-multilabel-ft.toml"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documented answers, CI-sized as the real session is (tests/real_session.py)."""
    import tomlkit
    import torch

    from claimcheck.engine.training.tiny import make_tiny_encoder
    from claimcheck.tui.cli import main
    from tests.real_session import ci_sized

    torch.set_num_threads(1)
    ws = tmp_path_factory.mktemp("multilabel_ft")
    (ws / "sample_data").mkdir()
    shutil.copy(ROOT / "sample_data" / "tickets_tags.csv", ws / "sample_data" / "tickets_tags.csv")
    answers = ci_sized(tomllib.loads(ANSWERS.read_text()), make_tiny_encoder(ws / "tiny-encoder"))
    answers["source"].pop("filters", None)  # 1,200 generated tickets: all of them
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    code = main(["run", "--answers", str(ws / "answers.toml"), str(ws / "session")])
    assert code == 0, "the multi-label fine-tuning answers did not build a session"
    return ws / "session"


def test_the_answers_parse_and_are_referenced() -> None:
    from claimcheck.engine.headless.answers import load_answers

    answers = load_answers(ANSWERS)
    claim = answers.stages["claim"]
    assert (claim["target_type"], claim["task_kind"], claim["fine_tuning"]) == (
        "multi_label",
        "text_classification",
        True,
    )
    assert "docs/answers-multilabel-ft.toml" in (ROOT / "docs" / "answers-format.md").read_text()


def test_multi_hot_targets_and_the_bce_head(tmp_path: Path) -> None:
    """The prepared labels are multi-hot over class_order and the model's loss is transformers'
    BCEWithLogits mean over every (row, label) — the same number computed by hand from its logits."""
    import torch

    from claimcheck.engine.training import models, prepare, tiny

    classes = ["billing", "bug", "refund"]
    eff = {
        "task_kind": "text_classification",
        "target_type": "multi_label",
        "model_path": str(tiny.make_tiny_encoder(tmp_path / "enc")),
        "adapter_mode": "head",
        "label_classes": classes,
        "max_length": 16,
    }
    model, tok, _ = models.build(eff, num_labels=3, workspace=tmp_path, device="cpu")
    assert model.config.problem_type == "multi_label_classification"
    p = prepare.encode(eff, tok, ["charged twice", "app crashes", "hello"], ["billing|refund", "bug", ""])
    assert p.labels == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    batch = p.collate([0, 1, 2])
    assert batch["labels"].dtype == torch.float32
    model.eval()
    with torch.no_grad():
        out = model(**batch)
        z, y = out.logits.double(), batch["labels"].double()
        hand = -(y * torch.log(torch.sigmoid(z)) + (1 - y) * torch.log(1 - torch.sigmoid(z))).mean()
    assert float(out.loss) == pytest.approx(float(hand), rel=1e-5)
    with pytest.raises(Exception, match="not in the contract's label_classes"):
        prepare.encode(eff, tok, ["x"], ["login"])


def test_the_session_reaches_a_verdict_with_intervals(session: Path) -> None:
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.shapes import artifact as artifact_shapes
    from claimcheck.engine.shapes import parse
    from claimcheck.engine.training.schema import effective

    recs = Session.open(session).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    eff = effective(recs["contract"].check("contract.effective").measured["effective"])
    assert eff.target_type == "multi_label" and eff.label_classes == recs["claim"].inputs["class_order"]
    labels = recs["contract"].check("contract.prepared_labels")
    assert labels.status == "pass" and "sigmoid head" in labels.summary
    assert labels.measured["head_sizes"] == [len(eff.label_classes)]
    th = recs["artifact"].check("artifact.label_thresholds")
    assert th.status == "pass" and set(th.measured["thresholds"]["candidate"]) == set(eff.label_classes)
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "micro_f1" and set(comp.values) == {
        "candidate",
        "trivial_baseline",
        "best_baseline",
    }
    assert all(d.bounded for d in comp.differences.values())
    assert recs["artifact"].check("artifact.per_label") is not None
    assert recs["artifact"].check("artifact.reload_parity").status == "pass"
    verdict = parse(recs["artifact"].check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.artifact_verified


def test_the_jobs_dev_metric_is_micro_f1_at_one_half(session: Path) -> None:
    """The job's final dev figure is scikit-learn's micro-F1 of its recorded dev predictions (each
    label at 0.5) against the dev label sets."""
    from sklearn.metrics import f1_score

    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.rowfiles import find_rows, read_rows
    from claimcheck.engine.training.schema import effective

    job = next(p.parent for p in (session / "jobs").rglob(jobfiles.CONTRACT))
    classes = effective(jobfiles.read_contract(job)).label_classes
    preds = read_rows(find_rows(job / jobfiles.FINAL, Path(jobfiles.DEV_PREDICTIONS).stem))

    def hot(s: str) -> list[int]:
        held = set(s.split("|")) if s else set()
        return [int(c in held) for c in classes]

    y = np.asarray([hot(t) for t in preds["target"].to_list()])
    p = np.asarray([hot(t) for t in preds["pred"].to_list()])
    assert np.array_equal(p, (np.asarray(preds["proba"].to_list()) >= 0.5).astype(int))
    final = [e for e in jobfiles.read_metrics(job) if getattr(e, "kind", "") in ("eval", "selected_eval")][-1]
    assert final.metric == "micro_f1"
    assert final.value == pytest.approx(f1_score(y, p, average="micro", zero_division=0), abs=1e-12)


def test_replay_reproduces_the_multi_label_fine_tuning_session(session: Path, tmp_path: Path) -> None:
    from claimcheck.engine.headless.replay import replay

    copy = tmp_path / "ws"
    shutil.copytree(session.parent, copy, ignore=shutil.ignore_patterns(".lock"))
    result = replay(copy / "session")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]


def test_the_report_shows_the_multi_label_head(session: Path) -> None:
    """The report carries the derived sigmoid head, the per-label thresholds and the verdict."""
    from claimcheck.engine.report.build import render

    md, _ = render(session)
    assert "multi_label_classification" in md and "BCEWithLogits" in md
    assert "artifact.label_thresholds" in md and "artifact.per_label" in md

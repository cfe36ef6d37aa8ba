"""The weighted fine-tuning loss: a real job on a tiny encoder whose logged step loss is the weighted
mean of per-example cross-entropy, sum(w * l) / sum(w) over the step's rows (computed here by hand
from the model's logits), whose gradients ignore a zero-weight row, and whose dev metric is the
claim's metric computed with the dev rows' weights."""

from __future__ import annotations

import math
import signal
from pathlib import Path

import numpy as np
import pytest

from tests import test_job_kit as kit


@pytest.fixture(autouse=True)
def _keep_signal_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    import torch

    torch.set_num_threads(1)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return kit.make_model(tmp_path_factory.mktemp("model"))


def _weights(n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    w = rng.choice([0.0, 0.5, 1.0, 2.0, 4.0], size=n).astype(float)
    return [float(x) for x in w]


def _weighted_job(root: Path, model_dir: Path, w_train: list[float], **over) -> Path:
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.training.jobfiles import WEIGHT_COLUMN, write_job_dir

    eff = kit.effective(
        model_dir,
        loss_weighting="sample_weight",
        metric_weighting="sample_weight",
        weight_column="w",
        **over,
    )
    train = kit.frame(len(w_train), 1).with_columns(**{WEIGHT_COLUMN: np.asarray(w_train)})
    dev = kit.frame(24, 2, start_id=1000).with_columns(**{WEIGHT_COLUMN: np.asarray(_weights(24, 5))})
    jd = root / "job"
    write_job_dir(
        jd,
        effective=eff,
        digest=digest_of(eff),
        op_id="0123456789abcdef-a1",
        attempt=1,
        train=train,
        dev=dev,
        workspace=root,
        runtime={"heartbeat_seconds": 0.2, "threads": 1},
    )
    return jd


def _one_step(jd: Path):
    """The job set up as it trains, in eval mode (no dropout: the forward is deterministic), one
    optimizer step taken; returns (job, run, the step's micro-batches, the logits before the step)."""
    import torch

    from claimcheck.engine.training.job import Job
    from claimcheck.engine.training.schema import effective

    job = Job(jd)
    run = job._setup(effective(job.doc))
    run.model.eval()
    c = run.contract
    micro = [run.batcher.micro_indices(k, c.micro_batch, run.train_b.n, c.seed) for k in range(run.accum)]
    with torch.no_grad():
        logits = [
            run.model(**{k: v for k, v in run.train_b.batch(i).items() if k != "labels"}).logits
            for i in micro
        ]
    job._step(run)
    return job, run, micro, logits


def test_the_step_loss_is_the_weighted_mean_of_per_example_cross_entropy(
    tmp_path: Path, model_dir: Path
) -> None:
    from claimcheck.engine.training import jobfiles

    w = _weights(48, 0)
    jd = _weighted_job(tmp_path, model_dir, w, micro_batch=4, grad_accum=3, max_steps=2)
    _, run, micro, logits = _one_step(jd)
    # by hand: log-softmax of the logits, each row's negative log-likelihood of its class
    nll, ws = [], []
    for idx, z in zip(micro, logits, strict=True):
        z = z.double().numpy()
        logp = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
        nll += [-logp[j, run.train_b.labels[i]] for j, i in enumerate(idx)]
        ws += [w[i] for i in idx]
    hand = float(np.dot(ws, nll) / np.sum(ws))
    plain = float(np.mean(nll))
    step = jobfiles.latest_steps(jobfiles.read_metrics(jd))[-1]
    assert step.step == 1
    assert step.loss == pytest.approx(hand, rel=1e-5, abs=1e-6)
    assert abs(hand - plain) > 1e-3  # the weights change the loss: the check above can fail


def test_a_zero_weight_row_moves_no_gradient(tmp_path: Path, model_dir: Path) -> None:
    """Two jobs that differ only in the label of a row whose weight is 0 take the same step."""
    import torch

    from claimcheck.engine.training import jobfiles

    w = [1.0] * 8
    w[3] = 0.0
    grads = []
    for name, flip in (("a", False), ("b", True)):
        jd = _weighted_job(tmp_path / name, model_dir, w, micro_batch=8, grad_accum=1, max_steps=1)
        if flip:  # rewrite row 3's label (and the data hash the job checks)
            rows = jobfiles.read_contract(jd)
            path = jd / rows["data"]["train"]
            from claimcheck.engine.training.rowfiles import read_rows, write_rows

            t = read_rows(path)
            i = t.columns.index("target")
            t.rows[3][i] = next(c for c in kit.CLASSES if c != t.rows[3][i])
            write_rows(path, t)
            from claimcheck.engine.data.rows import sha256_file

            doc = path.parent.parent / jobfiles.CONTRACT
            text = doc.read_text()
            doc.write_text(text.replace(rows["data"]["train_sha256"], sha256_file(path)))
        torch.manual_seed(0)
        _, run, _, _ = _one_step(jd)
        grads.append(
            torch.cat(
                [
                    p.grad.flatten()
                    for g in run.optimizer.param_groups
                    for p in g["params"]
                    if p.grad is not None
                ]
            )
        )
    assert torch.allclose(grads[0], grads[1], atol=1e-7)


def test_a_weighted_job_evaluates_dev_with_its_weights(tmp_path: Path, model_dir: Path) -> None:
    """The job runs to done; its final dev metric is macro-F1 with the dev rows' sample weights on
    the artifact's own dev predictions (scikit-learn's f1_score with sample_weight)."""
    from sklearn.metrics import f1_score

    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.job import Job
    from claimcheck.engine.training.rowfiles import read_rows

    jd = _weighted_job(tmp_path, model_dir, _weights(48, 0), max_steps=8, eval_every_steps=4)
    assert Job(jd).run() == 0
    recs = jobfiles.read_metrics(jd)
    final = jobfiles.dev_evals(recs)[-1]
    assert all(math.isfinite(s.loss) for s in jobfiles.latest_steps(recs))
    preds = read_rows(_dev_predictions(jd))
    dev = read_rows(jd / jobfiles.DEV_FILE)
    truth = dict(zip(dev["row_id"].to_list(), dev["target"].to_list(), strict=True))
    weight = dict(zip(dev["row_id"].to_list(), dev[jobfiles.WEIGHT_COLUMN].to_list(), strict=True))
    rows = list(preds.iter_rows(named=True))
    y = [truth[r["row_id"]] for r in rows]
    p = [r["pred"] for r in rows]
    sw = [weight[r["row_id"]] for r in rows]
    want = f1_score(y, p, average="macro", labels=sorted(set(y)), sample_weight=sw)
    assert final.value == pytest.approx(want, abs=1e-9)
    assert final.value != pytest.approx(f1_score(y, p, average="macro", labels=sorted(set(y))), abs=1e-6)


def _dev_predictions(jd: Path) -> Path:
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.rowfiles import find_rows

    return find_rows(jd / jobfiles.FINAL, Path(jobfiles.DEV_PREDICTIONS).stem)


# ---------------------------------------------------------------- a weighted fine-tuning session

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-weights-ft.toml"


@pytest.fixture(scope="module")
def weighted_ft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/answers-weights-ft.toml, CI-sized as the real session is (tests/real_session.py: a tiny
    encoder, a few steps), on one ticket in two, run by `claimcheck run --answers`."""
    import shutil
    import tomllib

    import tomlkit
    import torch

    from claimcheck.engine.training.tiny import make_tiny_encoder
    from claimcheck.tui.cli import main
    from tests.real_session import ci_sized

    torch.set_num_threads(1)
    ws = tmp_path_factory.mktemp("weights_ft")
    (ws / "sample_data").mkdir()
    for name in ("tickets_weighted_text.csv", "make_tickets.py"):
        shutil.copy(ROOT / "sample_data" / name, ws / "sample_data" / name)
    answers = ci_sized(tomllib.loads(ANSWERS.read_text()), make_tiny_encoder(ws / "tiny-encoder"))
    answers["source"]["filters"] = [{"reason": "CI: one ticket in two", "where": "ticket_id % 2 = 0"}]
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    code = main(["run", "--answers", str(ws / "answers.toml"), str(ws / "session")])
    assert code == 0, "the weighted fine-tuning answers did not build a session"
    return ws / "session"


def test_the_weighted_fine_tuning_answers_parse_and_are_referenced() -> None:
    from claimcheck.engine.headless.answers import load_answers

    answers = load_answers(ANSWERS)
    assert answers.stages["source"]["weight_column"] == "weight"
    assert answers.stages["claim"]["fine_tuning"] is True
    assert "docs/answers-weights-ft.toml" in (ROOT / "docs" / "answers-format.md").read_text()


def test_the_text_sample_file_is_regenerated_byte_for_byte(tmp_path: Path) -> None:
    import polars as pl

    from sample_data import make_weights

    path = ROOT / "sample_data" / "tickets_weighted_text.csv"
    assert path.stat().st_size < 1_000_000
    out = make_weights.build_text(pl.read_csv(ROOT / "sample_data" / "tickets.csv", infer_schema_length=0))
    out.write_csv(tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == path.read_bytes()


def test_a_weighted_fine_tuning_session_reaches_a_verdict(weighted_ft: Path) -> None:
    """The contract records the weighted loss, the job trained on weighted rows, the artifact's
    comparison is weighted with intervals, and the verdict is reached."""
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.shapes import artifact as artifact_shapes
    from claimcheck.engine.shapes import parse
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.rowfiles import read_rows
    from claimcheck.engine.training.schema import effective

    recs = Session.open(weighted_ft).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    eff = effective(recs["contract"].check("contract.effective").measured["effective"])
    assert (eff.loss_weighting, eff.metric_weighting, eff.weight_column) == (
        "sample_weight",
        "sample_weight",
        "weight",
    )
    table = recs["contract"].check("contract.requested_vs_effective").measured["table"]
    row = next(r for r in table if r["setting"] == "loss_weighting")
    assert row["effective"] == "sample_weight" and "sum(w * l) / sum(w)" in row["outcome"]
    jobs = [p for p in (weighted_ft / "jobs").rglob(jobfiles.CONTRACT)]
    assert jobs, "no job folder"
    train = read_rows(jobs[0].parent / jobfiles.TRAIN_FILE)
    assert jobfiles.WEIGHT_COLUMN in train.columns and 0.0 in train[jobfiles.WEIGHT_COLUMN].to_list()
    comp_check = recs["artifact"].check("artifact.comparison")
    assert "weighted by 'weight'" in comp_check.summary
    comp = parse(comp_check, artifact_shapes.Comparison)
    assert "candidate" in comp.values and all(d.bounded for d in comp.differences.values())
    verdict = parse(recs["artifact"].check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.artifact_verified


def test_replay_reproduces_the_weighted_fine_tuning_session(weighted_ft: Path, tmp_path: Path) -> None:
    import shutil

    from claimcheck.engine.headless.replay import replay

    copy = tmp_path / "ws"
    shutil.copytree(weighted_ft.parent, copy, ignore=shutil.ignore_patterns(".lock"))
    result = replay(copy / "session")
    assert result.exit_code == 0, [r for r in result.rows if r.failing]


@pytest.mark.parametrize(
    ("claim", "refused"),
    [
        ({"task_kind": "text_classification", "fine_tuning": True}, ""),
        ({"task_kind": "tabular", "fine_tuning": False}, ""),
        ({"task_kind": "causal_lm_sft", "fine_tuning": True}, "SFT job's token loss"),
        ({"task_kind": "tabular", "fine_tuning": True}, "fine-tuned tabular job's loss is unweighted"),
    ],
)
def test_which_claims_take_a_weight_column(claim: dict, refused: str) -> None:
    """A fine-tuned text classifier takes a weight column (its loss is weighted); SFT stays refused
    with the reason."""
    from claimcheck.engine.data.weights import refuse_unweightable
    from claimcheck.engine.pipeline.context import StageInputError

    if not refused:
        refuse_unweightable({"weight_column": "w"}, claim)
        return
    with pytest.raises(StageInputError, match=refused):
        refuse_unweightable({"weight_column": "w"}, claim)


def test_the_report_shows_the_weighted_loss(weighted_ft: Path) -> None:
    """The report carries the contract's derived loss weighting and the weighted comparison."""
    from claimcheck.engine.report.build import render

    md, _ = render(weighted_ft)
    assert "loss_weighting = sample_weight" in md and r"sum(w \* l) / sum(w)" in md  # Markdown-escaped
    assert "weighted by 'weight'" in md

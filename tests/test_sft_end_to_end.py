"""Causal-LM SFT with QLoRA, headless, through all seven stages to an artifact verdict: the
documented SFT answers file (docs/answers-sft.toml) CI-sized on the sample chat data (a tiny Llama,
one conversation in twenty, a few optimizer steps), then replay. Plus the answer metrics and the
decoding contract's stop / truncation rule on their own."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from claimcheck.engine.artifact.decoding import Decoding
from claimcheck.engine.artifact.generate import TorchGenerator, exact_match, normalise_answer, token_f1
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.textsafe import visible
from claimcheck.tui.cli import main
from tests import sft_session
from tests.training_fixtures import tiny_dirs_fixture  # noqa: F401 - the session-scoped tiny models


@pytest.fixture(scope="module")
def sft_ws(tmp_path_factory) -> Path:
    return sft_session.build(tmp_path_factory.mktemp("sft_ws"))


def test_squad_normalisation_exact_match_and_token_f1() -> None:
    assert normalise_answer("  The  Shipping-queue! ") == "shippingqueue"
    assert normalise_answer("an apple, a pear") == "apple pear"
    assert exact_match("Billing.", "billing") == 1.0 and exact_match("billing team", "billing") == 0.0
    assert token_f1("billing team", "billing") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("cat", "dog") == 0.0


def test_a_generation_without_a_stop_is_truncated_never_scored(tiny_dirs) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dirs["llama"])
    gen = TorchGenerator(_Untouched(), tok, {}, Decoding(max_new_tokens=4, stop_sequences=["##"]))
    word = tok("billing", add_special_tokens=False)["input_ids"]
    end = tok.convert_tokens_to_ids("<|end|>")
    assert gen.finish([*word, end, *word]).status == "scored"
    assert gen.finish([*word, end, *word]).text == "billing"
    truncated = gen.finish(word * 4)
    assert truncated.status == "truncated" and truncated.text  # counted apart, never scored
    stop = tok("##", add_special_tokens=False)["input_ids"]
    assert gen.finish([*word, *stop, *word]).status == "scored"
    assert gen.finish([*word, *stop, *word]).text == "billing"


class _Untouched:
    def eval(self) -> None:
        return None


@pytest.mark.slow
def test_sft_session_reaches_an_artifact_verdict(sft_ws: Path) -> None:
    session = Session.open(sft_ws / sft_session.SESSION)
    assert set(session.states().values()) == {"frozen"}
    art = session.record("artifact")
    assert art.inputs["decoding"] == {
        "strategy": "greedy",
        "max_new_tokens": 6,
        "stop_sequences": ["<|end|>"],
    }
    assert art.check("artifact.identity").status == "pass"
    parity = art.check("artifact.reload_parity")
    assert parity.status == "pass" and parity.measured["compared"] > 0
    arms = parse(art.check("artifact.arms"), artifact_shapes.Arms)
    assert set(arms.arms) == {"candidate", "base_model", "trivial_baseline"}
    for arm, c in arms.arms.items():
        assert c.scored + c.failed + (c.truncated or 0) + c.missing == c.requested > 0, arm
    gen = parse(art.check("artifact.generation"), artifact_shapes.Generation)
    assert gen.decoding.max_new_tokens == 6 and "articles" in gen.normalisation
    # The trivial arm answers the most frequent training reply, as the baseline stage does.
    train_replies = _train_replies(session)
    top = sorted(Counter(train_replies).items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    assert arms.arms["trivial_baseline"].what.startswith(f"always '{visible(top)}'")
    # The trained adapter makes the references likelier than the unchanged base does, beyond noise.
    nll = gen.differences["mean_nll"]["base_model"]
    assert nll.hi is not None and nll.hi < 0 and gen.candidate_better["mean_nll"]["base_model"]
    assert "mean_nll" not in {m for m, v in gen.values.items() if "trivial_baseline" in v}
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "exact_match" and 0.0 <= comp.values["trivial_baseline"] <= 1.0
    assert gen.samples and all(s["trivial_baseline"] == visible(top) for s in gen.samples)
    for c, d in comp.differences.items():
        assert d.rows <= arms.arms[c].scored and d.estimate == pytest.approx(d.estimate_a - d.estimate_b)
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.job_finished and verdict.artifact_verified
    assert verdict.claim_state in ("met", "not_met", "not_run") and verdict.criterion


def _train_replies(session: Session) -> list[str]:
    from claimcheck.engine.data import splits
    from claimcheck.engine.pipeline.context import StageContext

    records = session.records()
    ctx = StageContext(session_dir=session.path, workspace=session.workspace, stage="artifact")
    train = splits.rows("train", records, ctx, caller="test", labels=False)
    return [json.loads(m)[-1]["content"] for m in train["messages"].to_list()]


def test_the_sft_session_writes_only_declared_checks(sft_ws: Path) -> None:
    """The check registry's session test (tests/test_check_registry.py) on the SFT session."""
    from tests.test_check_registry import assert_session_declared

    written = assert_session_declared(sft_ws / sft_session.SESSION)
    assert {"contract.prepared_supervision", "artifact.generation"} <= written


@pytest.mark.slow
def test_sft_replay_reproduces(sft_ws: Path, capsys) -> None:
    assert main(["--replay", str(sft_ws / sft_session.SESSION)]) == 0, capsys.readouterr().out
    assert "reproduced" in capsys.readouterr().out


def test_the_documented_sft_answers_file_is_valid() -> None:
    answers = tomllib.loads(sft_session.EXAMPLE.read_text())
    from claimcheck.engine.stages.artifact.run import Inputs

    inputs = Inputs.model_validate(answers["artifact"])
    assert inputs.decoding.strategy == "greedy" and answers["contract"]["packing"] is False
    assert "answers-sft.toml" in (sft_session.ROOT / "docs" / "answers-format.md").read_text()


@pytest.mark.slow
def test_sft_reload_parity_catches_a_serving_skew(sft_ws: Path) -> None:
    """Serving with a shorter max_length than training cuts the references: parity must fail."""
    from claimcheck.engine.training.artifact_files import reload_parity

    job = next((sft_ws / sft_session.SESSION / "jobs").iterdir())
    same = reload_parity(job / "final", job, sft_ws, 1e-5)
    assert same["ok"] and same["compared"] == same["rows"] > 0
    skewed = reload_parity(job / "final", job, sft_ws, 1e-5, overrides={"max_length": 32})
    assert not skewed["ok"] and skewed["prediction_mismatches"] == skewed["compared"]

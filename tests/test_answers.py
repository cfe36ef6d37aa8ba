"""Answers-file runs: validation before anything is created, freezing, exit codes, the docs example."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from engine import stages as registry
from engine.answers import load_answers, run_answers
from engine.context import StageInputError
from engine.evidence import EvidenceError
from engine.replay import replay
from engine.session import Session
from tests.test_replay import answers_text, use_fakes, write_data

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "answers-example.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "answers.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t + "\n[trainer]\nx = 1\n", "trainer"),
        (lambda t: t.replace("[source]\n", "[source]\nlabel_colum = 'q'\n"), "source.label_colum"),
        (lambda t: t.replace('population = "tickets from 2023-2024"', "population = 3"), "claim.population"),
        (lambda t: t.replace("[session]\n", '[session]\nstop_on_fail = "maybe"\n'), "session.stop_on_fail"),
        (lambda t: t + '\n[[notes]]\nstage = "artifact"\ntag = "fact"\ntext = "x"\n', "notes[0].stage"),
        (lambda t: t + '\n[[notes]]\nstage = "claim"\ntag = "hunch"\ntext = "x"\n', "notes[0].tag"),
        (lambda t: t.replace("[split]", "[splits_gone]").replace("test_fraction = 0.5", ""), "splits_gone"),
    ],
)
def test_bad_answers_name_file_and_field_and_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutate, field: str
) -> None:
    use_fakes(monkeypatch)
    write_data(tmp_path)
    path = _write(tmp_path, mutate(answers_text()))
    with pytest.raises(EvidenceError) as err:
        run_answers(path, tmp_path / "s")
    assert err.value.field == field and str(path) in str(err.value)
    assert not (tmp_path / "s").exists()


def test_a_gap_in_the_stages_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakes(monkeypatch)
    text = answers_text().replace("[split]\ntest_fraction = 0.5\n", "")
    with pytest.raises(EvidenceError, match="'split'") as err:
        load_answers(_write(tmp_path, text))
    assert err.value.field == "baseline"


def test_syntax_error_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="not valid TOML"):
        load_answers(_write(tmp_path, "[claim\n"))


def test_run_freezes_each_stage_with_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakes(monkeypatch)
    write_data(tmp_path)
    text = answers_text('\n[[notes]]\nstage = "source"\ntag = "limitation"\ntext = "only 40 rows"\n')
    result = run_answers(_write(tmp_path, text), tmp_path / "s", workspace=tmp_path)
    assert result.exit_code == 0 and result.mode == "answers"
    session = Session.open(tmp_path / "s")
    states = session.states()
    assert [states[n] for n in ("claim", "source", "split", "baseline")] == ["frozen"] * 4
    assert session.meta.id == "fixture" and session.meta.title == "fixture session"
    assert [n.text for n in session.record("source").notes] == ["only 40 rows"]
    assert not (tmp_path / "s" / ".lock").exists()
    assert set(result.timing["per_stage_s"]) == {"claim", "source", "split", "baseline"}


def test_failing_check_still_freezes_but_exits_1_and_stop_on_fail_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fakes(monkeypatch)
    write_data(tmp_path)
    text = answers_text().replace('run_scope = "LoRA on a small encoder"', 'run_scope = ""')
    result = run_answers(_write(tmp_path, text), tmp_path / "a")
    assert result.exit_code == 1
    assert any(r.outcome == "failed" and r.check == "claim.completeness" for r in result.rows)
    assert Session.open(tmp_path / "a").states()["baseline"] == "frozen"
    assert replay(tmp_path / "a").exit_code == 0  # a reproduced failure is still reproduced
    result = run_answers(_write(tmp_path, text), tmp_path / "b", stop_on_fail=True)
    assert result.exit_code == 1
    assert [r.outcome for r in result.rows if r.stage == "split"] == ["not_run"]
    assert Session.open(tmp_path / "b").states()["source"] == "not_run"


def test_stage_input_error_names_answers_file_and_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fakes(monkeypatch)

    def boom(*_a, **_k):
        raise StageInputError("data.csv: no such file; check the path")

    monkeypatch.setattr(registry.StageSpec, "module", _wrap_source(boom))
    path = _write(tmp_path, answers_text())
    with pytest.raises(StageInputError, match=r"answers.toml: \[source\]: data.csv: no such file"):
        run_answers(path, tmp_path / "s")
    assert Session.open(tmp_path / "s").states()["claim"] == "frozen"


def _wrap_source(run):
    from types import SimpleNamespace

    from tests.test_replay import FAKES, REAL_MODULE

    def module(self):
        if self.name == "source":
            return SimpleNamespace(TITLE="Source", Inputs=FAKES["source"].Inputs, run=run)
        return FAKES.get(self.name) or REAL_MODULE(self)

    return module


def test_unbuilt_stage_is_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakes(monkeypatch, unbuilt=("split",))
    write_data(tmp_path)
    result = run_answers(_write(tmp_path, answers_text()), tmp_path / "s")
    got = {(r.stage, r.check): r for r in result.rows}
    assert got[("split", "(stage)")].outcome == "not_run"
    assert "not built" in got[("baseline", "(stage)")].detail
    assert result.exit_code == 0


def test_existing_session_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakes(monkeypatch)
    write_data(tmp_path)
    path = _write(tmp_path, answers_text())
    run_answers(path, tmp_path / "s")
    with pytest.raises(FileExistsError):
        run_answers(path, tmp_path / "s")


def test_docs_example_parses_and_names_only_real_fields() -> None:
    answers = load_answers(EXAMPLE)  # validates every built stage's table against its Inputs
    assert list(answers.stages)[:2] == ["claim", "source"]
    assert (EXAMPLE.parent / answers.session.workspace / "sample_data").is_dir()
    doc = (ROOT / "docs" / "answers-format.md").read_text()
    for key in tomllib.loads(EXAMPLE.read_text())["session"]:
        assert f"`{key}`" in doc


# The documented example is run end to end (CI-sized) and replayed in tests/test_end_to_end.py.

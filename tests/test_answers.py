"""Answers-file runs: validation before anything is created, freezing, exit codes, the docs example."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from claimcheck.engine.evidence import EvidenceError
from claimcheck.engine.headless.answers import load_answers, run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.context import StageInputError
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
    result = run_answers(path, tmp_path / "s")
    assert result.exit_code == 2
    assert re.search(r"answers.toml: \[source\]: data.csv: no such file", result.error)
    # the rows of the stage frozen before the refusal are kept, not lost with the error
    assert {r.stage for r in result.rows} == {"claim"} and "claim" in result.timing["per_stage_s"]
    assert Session.open(tmp_path / "s").states()["claim"] == "frozen"


def _wrap_source(run):
    from types import SimpleNamespace

    from tests.test_replay import FAKES, REAL_MODULE

    def module(self):
        if self.name == "source":
            return SimpleNamespace(TITLE="Source", Inputs=FAKES["source"].Inputs, run=run)
        return FAKES.get(self.name) or REAL_MODULE(self)

    return module


def _revisions(session_dir: Path) -> dict[str, int]:
    return {n: r.provenance.revision for n, r in Session.open(session_dir).records().items()}


def test_rerun_continues_a_session_keeping_what_did_not_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answers again: every stage kept, nothing rewritten. A changed split: claim and source
    kept, split a new revision, baseline (stale after it) run again; as in the app."""
    use_fakes(monkeypatch)
    write_data(tmp_path)
    path = _write(tmp_path, answers_text())
    run_answers(path, tmp_path / "s")
    before = _revisions(tmp_path / "s")
    digests = {n: r.provenance.digest for n, r in Session.open(tmp_path / "s").records().items()}
    again = run_answers(path, tmp_path / "s")
    assert again.exit_code == 0 and again.error == ""
    assert {r.stage for r in again.rows if r.check == "(stage)" and r.outcome == "kept"} == set(before)
    assert {r.outcome for r in again.rows} == {"kept"} and again.timing["per_stage_s"] == {}
    assert {n: r.provenance.digest for n, r in Session.open(tmp_path / "s").records().items()} == digests

    changed = _write(tmp_path, answers_text().replace("test_fraction = 0.5", "test_fraction = 0.4"))
    result = run_answers(changed, tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    after = _revisions(tmp_path / "s")
    assert (after["claim"], after["source"]) == (before["claim"], before["source"])
    assert (after["split"], after["baseline"]) == (before["split"] + 1, before["baseline"] + 1)
    assert set(result.timing["per_stage_s"]) == {"split", "baseline"}
    assert {Session.open(tmp_path / "s").states()[n] for n in before} == {"frozen"}
    assert replay(tmp_path / "s").exit_code == 0


def _source_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fake stages, with a source stage that refuses its data file (as the real one would)."""
    use_fakes(monkeypatch)
    write_data(tmp_path)

    def refuse(*_a, **_k):
        raise StageInputError("gone.csv: no such file; check the path")

    monkeypatch.setattr(registry.StageSpec, "module", _wrap_source(refuse))


def test_rerun_after_a_refusal_continues_from_the_stage_that_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _source_refuses(monkeypatch, tmp_path)
    path = _write(tmp_path, answers_text())
    first = run_answers(path, tmp_path / "s")
    assert first.exit_code == 2 and "gone.csv" in first.error
    use_fakes(monkeypatch)  # the person fixed the data file
    fixed = run_answers(path, tmp_path / "s")
    assert fixed.exit_code == 0, fixed.render_table()
    assert [r.stage for r in fixed.rows if r.outcome == "kept" and r.check == "(stage)"] == ["claim"]
    states = Session.open(tmp_path / "s").states()
    assert {states[n] for n in ("claim", "source", "split", "baseline")} == {"frozen"}


def test_continuing_refuses_another_sessions_id_and_a_folder_of_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fakes(monkeypatch)
    write_data(tmp_path)
    run_answers(_write(tmp_path, answers_text()), tmp_path / "s")
    other = _write(tmp_path, answers_text().replace('id = "fixture"', 'id = "other"'))
    with pytest.raises(EvidenceError, match="holds session 'fixture'") as err:
        run_answers(other, tmp_path / "s")
    assert err.value.field == "session.id"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="no session.toml"):
        run_answers(_write(tmp_path, answers_text()), tmp_path / "t")


def test_cli_json_is_printed_on_exit_2_with_the_error_and_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from claimcheck.tui.cli import main

    _source_refuses(monkeypatch, tmp_path)
    bad = _write(tmp_path, answers_text())
    assert main(["run", "--answers", str(bad), str(tmp_path / "s"), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "gone.csv" in doc["error"]
    assert [r["stage"] for r in doc["rows"]] and {r["stage"] for r in doc["rows"]} == {"claim"}
    assert "claim" in doc["timing"]["per_stage_s"]
    # an error before anything ran (a bad answers file) still prints the document
    assert main(["run", "--answers", str(tmp_path / "nope.toml"), str(tmp_path / "u"), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"] and doc["rows"] == []


def test_docs_example_parses_and_names_only_real_fields() -> None:
    answers = load_answers(EXAMPLE)  # validates every built stage's table against its Inputs
    assert list(answers.stages)[:2] == ["claim", "source"]
    assert (EXAMPLE.parent / answers.session.workspace / "sample_data").is_dir()
    doc = (ROOT / "docs" / "answers-format.md").read_text()
    for key in tomllib.loads(EXAMPLE.read_text())["session"]:
        assert f"`{key}`" in doc


# The documented example is run end to end (CI-sized) and replayed in tests/test_end_to_end.py.


def test_rerunning_the_documented_answers_on_the_real_session_keeps_every_stage(
    real_workspace: Path, tmp_path: Path
) -> None:
    """On records real stages wrote (the docs example, CI-sized): the same answers again keep all
    seven stages as they are — the kept test compares real inputs read through today's Inputs."""
    from tests import real_session as rs

    session = rs.copy_workspace(real_workspace, tmp_path)
    before = {n: r.provenance.digest for n, r in Session.open(session).records().items()}
    result = run_answers(session.parents[1] / "answers.toml", session)
    assert result.exit_code in (0, 1) and result.error == "", result.render_table()
    kept = [r.stage for r in result.rows if r.check == "(stage)" and r.outcome == "kept"]
    assert kept == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    assert result.timing["per_stage_s"] == {}
    assert {n: r.provenance.digest for n, r in Session.open(session).records().items()} == before


def test_an_alarm_step_past_max_steps_is_refused_before_the_session_exists(tmp_path: Path) -> None:
    """The documented example with worse_than_trivial_after_step 200 on its 120-step budget: exit 2,
    naming the field, the budget and what to choose; no session folder."""
    import shutil

    import tomlkit

    from claimcheck.tui.cli import main

    (tmp_path / "sample_data").mkdir()
    shutil.copy(ROOT / "sample_data" / "tickets.csv", tmp_path / "sample_data" / "tickets.csv")
    answers = tomllib.loads(EXAMPLE.read_text())
    answers["session"]["workspace"] = "."
    answers["contract"]["alarms"] = {"worse_than_trivial_after_step": 200}
    path = _write(tmp_path, tomlkit.dumps(answers))
    with pytest.raises(EvidenceError) as err:
        run_answers(path, tmp_path / "s")
    assert err.value.field == "contract.alarms.worse_than_trivial_after_step"
    assert "120-step budget" in str(err.value) and "-1 (from half-way)" in str(err.value)
    assert main(["run", "--answers", str(path), str(tmp_path / "s")]) == 2
    assert not (tmp_path / "s").exists()

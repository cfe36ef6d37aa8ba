"""Where the data and its labels came from: preprocessing scripts pinned by sha256 (imports found with
`ast`), rebuilt in a scratch folder, and replay failing when a byte of a declared script changes
(real `claimcheck` processes on a real generated data file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from claimcheck.engine.data import preprocessing as pre
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.data import Preprocessing
from claimcheck.engine.stages.source import run as source

HELPER = """WORDS = {"a": "alpha apple", "b": "bravo banana", "c": "charlie cherry"}
"""

SCRIPT = '''"""Write data/tickets.csv: 90 rows, three labels, deterministic."""
import csv
import random
from pathlib import Path

import polars  # noqa: F401  (an installed import the pin records with its version)

from words import WORDS

HERE = Path(__file__).resolve().parent
rng = random.Random(7)
out = HERE.parent / "data" / "tickets.csv"
out.parent.mkdir(parents=True, exist_ok=True)
with open(out, "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["ticket_id", "text", "customer", "created_at", "label"])
    for i in range(90):
        label = "abc"[i % 3]
        w.writerow([i, f"{WORDS[label]} {rng.randint(0, 999)}", f"c{i}", f"2024-01-{i % 28 + 1:02d}", label])
'''

CLAIM = {
    "task_kind": "text_classification",
    "prediction_unit": "one ticket at triage time",
    "target_meaning": "the queue a generator script assigned",
    "target_kind": "recorded_workflow_label",
    "inference_inputs": ["text"],
    "population": "generated tickets",
    "primary_metric": "macro_f1",
    "metric_averaging": "macro",
    "class_order": ["a", "b", "c"],
    "success": {"metric": "macro_f1", "op": ">=", "value": 0.02, "relative_to": "best_baseline"},
    "comparators": ["trivial_baseline", "best_baseline", "base_model"],
    "fine_tuning": True,
    "run_scope": "one LoRA fine-tune; no tuning sweep",
    "label_quality_limits": "generated labels",
}


def _workspace(root: Path) -> Path:
    """A workspace whose data file is the output of its own script (run here, as a person would)."""
    (root / "prep").mkdir(parents=True)
    (root / "prep" / "words.py").write_text(HELPER)
    (root / "prep" / "make_data.py").write_text(SCRIPT)
    subprocess.run([sys.executable, "prep/make_data.py"], cwd=root, check=True)
    return root


def _source(**kw) -> dict:
    base = {
        "files": ["data/tickets.csv"],
        "label_column": "label",
        "input_columns": ["text"],
        "text_columns": ["text"],
        "availability": {"text": "yes"},
        "id_column": "ticket_id",
        "entity_columns": ["customer"],
        "time_column": "created_at",
        "as_of": "2025-01-01",
        "license": "generated for the test",
        "provenance": "prep/make_data.py",
        "preprocessing": [{"script": "prep/make_data.py", "rebuild": True}],
    }
    base.update(kw)
    return base


def _run_source(ws: Path, **kw):
    ctx = StageContext(session_dir=ws / "s", workspace=ws)
    return source.run(source.Inputs(**_source(**kw)), {}, ctx)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _workspace(tmp_path_factory.mktemp("prov"))


def test_imports_are_found_with_ast_never_by_running() -> None:
    src = "import os, numpy.linalg\nfrom polars import col\nfrom . import sibling\nif 0:\n    import json\n"
    assert pre.imports_of(src, "x.py") == ["json", "numpy", "os", "polars"]
    with pytest.raises(pre.PreprocessingError, match=r"x\.py is not valid Python \(line 1"):
        pre.imports_of("def (:\n", "x.py")


def test_scripts_are_pinned_with_their_local_modules_and_rebuilt(ws: Path) -> None:
    rec = _run_source(ws)
    chk = rec.check("source.preprocessing")
    got = parse(chk, Preprocessing)
    pin = got.scripts["prep/make_data.py"]
    assert chk.status == "pass", chk.summary
    assert pin.sha256 == pre.sha256_bytes((ws / "prep" / "make_data.py").read_bytes())
    assert pin.imports == ["csv", "pathlib", "polars", "random", "words"]
    assert list(pin.local_modules) == ["prep/words.py"]
    assert pin.output == "data/tickets.csv"
    data_sha = rec.check("source.checksum").measured["files"][0]["sha256"]
    assert pin.rebuilt is not None and pin.rebuilt.matches and pin.rebuilt.sha256 == data_sha
    env = rec.check("source.preprocessing_environment")
    assert env.replay == "observation" and env.status == "info"
    assert env.measured["imports"]["polars"]["kind"] == "installed"
    assert env.measured["imports"]["words"]["kind"] == "local"
    assert env.measured["imports"]["csv"]["kind"] == "stdlib"


def test_a_rebuild_that_differs_fails(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with open(ws / "data" / "tickets.csv", "a") as fh:  # the data file is no longer the script's output
        fh.write("90,alpha apple 1,c90,2024-01-02,a\n")
    rec = _run_source(ws)
    chk = rec.check("source.preprocessing")
    assert chk.status == "fail"
    assert "prep/make_data.py did NOT rebuild data/tickets.csv (a different sha256)" in chk.summary
    # A script that fails says how, with its stderr (the scratch path hidden: replay compares it).
    (ws / "prep" / "words.py").write_text("raise SystemExit('no words today')\n")
    chk = _run_source(ws).check("source.preprocessing")
    rebuilt = chk.measured["scripts"]["prep/make_data.py"]["rebuilt"]
    assert chk.status == "fail" and rebuilt["returncode"] == 1
    assert "no words today" in rebuilt["stderr_tail"] and "claimcheck-rebuild-" not in rebuilt["stderr_tail"]


def test_without_preprocessing_the_checks_say_not_run(ws: Path) -> None:
    rec = _run_source(ws, preprocessing=[])
    assert rec.check("source.preprocessing").status == "not_run"
    assert "not retained" in rec.check("source.preprocessing").summary
    assert rec.check("source.preprocessing_environment").status == "not_run"


def test_bad_declarations_are_refused_naming_the_field(ws: Path) -> None:
    with pytest.raises(StageInputError, match=r"'preprocessing': script 'prep/nope\.py' not found"):
        _run_source(ws, preprocessing=[{"script": "prep/nope.py"}])
    with pytest.raises(StageInputError, match="lies outside the workspace"):
        _run_source(ws, preprocessing=[{"script": "../elsewhere.py"}])
    bad = [
        ({"script": "prep/make.sh"}, "not a .py file"),
        ({"script": "prep/make_data.py", "output": "other.csv"}, "is not one of 'files'"),
        ({"script": "prep/make_data.py", "zap": 1}, "zap"),
    ]
    for entry, msg in bad:
        with pytest.raises(ValueError, match=msg):
            source.Inputs(**_source(preprocessing=[entry]))
    with pytest.raises(ValueError, match="rebuild = true needs 'output'"):
        source.Inputs(**_source(files=["a.csv", "b.csv"]))
    with pytest.raises(ValueError, match="twice"):
        source.Inputs(**_source(preprocessing=[{"script": "p.py"}, {"script": "p.py"}]))


def _claimcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "250"}
    cmd = [sys.executable, "-m", "claimcheck", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def test_replay_exits_1_naming_a_script_whose_byte_changed(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    answers = {"session": {"workspace": "."}, "claim": CLAIM, "source": _source()}
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    ran = _claimcheck("run", "--answers", "answers.toml", "session", cwd=ws)
    assert ran.returncode in (0, 1), ran.stderr + ran.stdout  # 1: a source check may fail on tiny data
    assert (ws / "session" / "02-source.toml").is_file(), ran.stdout + ran.stderr
    first = _claimcheck("--replay", "session", cwd=ws)
    assert first.returncode == 0, first.stdout + first.stderr
    script = ws / "prep" / "make_data.py"
    raw = bytearray(script.read_bytes())
    raw[raw.index(b"90 rows")] = ord("8")  # one byte, in the docstring: the output is unchanged
    script.write_bytes(bytes(raw))
    second = _claimcheck("--replay", "session", cwd=ws)
    out = second.stdout + second.stderr
    assert second.returncode == 1, out
    assert "source.preprocessing" in out and "prep/make_data.py" in out
    # A helper module the script imports is pinned too.
    script.write_bytes(SCRIPT.encode())
    assert _claimcheck("--replay", "session", cwd=ws).returncode == 0
    (ws / "prep" / "words.py").write_text(HELPER + "\n")
    third = _claimcheck("--replay", "session", cwd=ws)
    assert third.returncode == 1 and "prep/words.py" in third.stdout + third.stderr
    # A declared script that is gone: the source cannot be re-run, and the row says which script.
    (ws / "prep" / "words.py").write_text(HELPER)
    script.unlink()
    gone = _claimcheck("--replay", "session", cwd=ws)
    assert gone.returncode == 1 and "script 'prep/make_data.py' not found" in gone.stdout + gone.stderr


def test_a_missing_script_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    src = _source(preprocessing=[{"script": "prep/gone.py"}])
    (ws / "answers.toml").write_text(
        tomlkit.dumps({"session": {"workspace": "."}, "claim": CLAIM, "source": src})
    )
    ran = _claimcheck("run", "--answers", "answers.toml", "session", cwd=ws)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "source.preprocessing[0].script" in ran.stderr and "prep/gone.py" in ran.stderr
    assert not (ws / "session").exists()


# ---------------------------------------------------------------- labels and selection


def _teacher(**kw) -> dict:
    return {"method": "teacher_model", "teacher_model": "org/labeller-7b", "teacher_revision": "a1b2c3", **kw}


def test_label_provenance_is_recorded_and_judged(ws: Path) -> None:
    from claimcheck.engine.evidence import StageRecord
    from claimcheck.engine.shapes.data import LabelProvenance

    rec = _run_source(ws, preprocessing=[])
    assert rec.check("source.label_provenance").status == "not_run"
    assert rec.check("source.selection").status == "not_run"
    human = {
        "method": "human",
        "annotators": "2 agents, adjudicated",
        "agreement": "Cohen kappa 0.81 on 300 rows",
    }
    rec = _run_source(ws, preprocessing=[], label_provenance=human, selection="every ticket of January 2024")
    chk = rec.check("source.label_provenance")
    assert (chk.status, chk.basis) == ("pass", "decided")
    assert parse(chk, LabelProvenance).annotators == "2 agents, adjudicated"
    assert rec.check("source.selection").measured == {"selection": "every ticket of January 2024"}
    rec = _run_source(ws, preprocessing=[], label_provenance=_teacher())
    chk = rec.check("source.label_provenance")
    assert chk.status == "warn" and "teacher model org/labeller-7b@a1b2c3" in chk.summary
    assert "annotation uncertainty not stated" in chk.summary
    # A claim of real-world correctness on a teacher's labels fails.
    claim = StageRecord(stage="claim", inputs={"target_kind": "real_world_decision"}, checks=[])
    ctx = StageContext(session_dir=ws / "s", workspace=ws)
    inp = source.Inputs(**_source(preprocessing=[], label_provenance=_teacher(agreement="not measured")))
    chk = source.run(inp, {"claim": claim}, ctx).check("source.label_provenance")
    assert chk.status == "fail" and "real-world decisions" in chk.summary


def test_a_label_script_is_pinned(ws: Path) -> None:
    lp = {"method": "rule", "script": "prep/words.py", "agreement": "not measured"}
    chk = _run_source(ws, preprocessing=[], label_provenance=lp).check("source.label_provenance")
    assert chk.measured["script_sha256"] == pre.sha256_bytes((ws / "prep" / "words.py").read_bytes())
    with pytest.raises(StageInputError, match="label_provenance.script"):
        _run_source(ws, preprocessing=[], label_provenance={**lp, "script": "prep/none.py"})


@pytest.mark.parametrize(
    ("lp", "msg"),
    [
        ({"method": "teacher_model", "teacher_model": "m"}, "needs 'teacher_model'"),
        ({"method": "human", "teacher_model": "m"}, "set method = 'teacher_model'"),
        ({"method": "rule"}, "needs 'script'"),
        ({"method": "unknown", "annotators": "x"}, "set method = 'human'"),
        ({"method": "human", "label_delay_days": -1}, "greater than or equal to 0"),
        ({"method": "crowd"}, "method"),
    ],
)
def test_inconsistent_label_provenance_is_refused(lp: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        source.Inputs(**_source(label_provenance=lp))


def test_label_maturity_counts_rows_whose_labels_were_not_final(ws: Path) -> None:
    # created_at runs 2024-01-01 .. 2024-01-28; as_of 2024-01-31 with a 7-day delay: rows after 01-24.
    lp = {"method": "human", "agreement": "not measured", "label_delay_days": 7}
    rec = _run_source(ws, preprocessing=[], label_provenance=lp, as_of="2024-01-31")
    chk = rec.check("source.label_maturity")
    import polars as pl

    df = pl.read_csv(ws / "data" / "tickets.csv", try_parse_dates=True)
    expected = df.filter(pl.col("created_at") > pl.datetime(2024, 1, 24)).height
    assert expected > 0 and chk.status == "warn"
    assert chk.measured["immature_rows"] == expected and chk.measured["dated_rows"] == 90
    assert chk.replay == "compare"
    at_once = _run_source(ws, preprocessing=[], label_provenance={**lp, "label_delay_days": 0})
    assert at_once.check("source.label_maturity").status == "pass"
    assert _run_source(ws, preprocessing=[]).check("source.label_maturity").status == "not_run"
    no_time = _run_source(ws, preprocessing=[], label_provenance=lp, time_column="")
    assert no_time.check("source.label_maturity").status == "not_run"


# ---------------------------------------------------------------- a real session through the baseline

SPLIT = {
    "strategy": "group",
    "seed": 0,
    "rationale": "new customers",
    "class_support_floor": 1,
    "fractions": {"train": 0.6, "dev": 0.1, "calibration": 0.1, "test": 0.2},
}


@pytest.fixture(scope="module")
def teacher_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Claim, source (teacher labels, a pinned and rebuilt script), split and baseline, headless."""
    ws = _workspace(tmp_path_factory.mktemp("teacher") / "ws")
    src = _source(label_provenance=_teacher(agreement="not measured"), selection="all generated rows")
    baseline = {"learners": ["most_frequent", "tfidf_logreg"], "bootstrap_resamples": 200}
    answers = {
        "session": {"workspace": "."},
        "claim": CLAIM,
        "source": src,
        "split": SPLIT,
        "baseline": baseline,
    }
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    ran = _claimcheck("run", "--answers", "answers.toml", "session", cwd=ws)
    assert (ws / "session" / "04-baseline.toml").is_file(), ran.stdout + ran.stderr
    return ws


def test_the_report_lists_the_scripts_and_qualifies_figures_on_teacher_labels(teacher_session: Path) -> None:
    ws = teacher_session
    assert _claimcheck("report", "session", cwd=ws).returncode == 0
    md = (ws / "session" / "report.md").read_text()
    assert "## Where the data and its labels came from" in md
    sha = pre.sha256_bytes((ws / "prep" / "make_data.py").read_bytes())
    assert f"| prep/make_data.py | {sha[:16]}… | data/tickets.csv | prep/words.py | byte-identical |" in md
    qualifier = "Labels written by teacher model org/labeller-7b\\@a1b2c3: this figure measures agreement"
    figures = md.count("*Figure: split.") + md.count("*Figure: baseline.")
    assert figures > 0 and md.count(qualifier) == figures
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("*Figure: split.", "*Figure: baseline.")):
            assert lines[i - 2].startswith(qualifier), line
    assert "every figure here measures agreement with that model" in md
    assert _claimcheck("--replay", "session", cwd=ws).returncode == 0


# ---------------------------------------------------------------- subgroups (the tabular claim, real records)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def subgroup_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/answers-tabular.toml run to its verdict with channel declared a subgroup column."""
    import tomllib

    from claimcheck.engine.headless.answers import run_answers

    answers = tomllib.loads((ROOT / "docs" / "answers-tabular.toml").read_text())
    answers["session"]["workspace"] = str(ROOT)
    answers["source"]["subgroup_columns"] = ["channel"]
    folder = tmp_path_factory.mktemp("subgroups")
    (folder / "answers.toml").write_text(tomlkit.dumps(answers))
    result = run_answers(folder / "answers.toml", folder / "s")
    assert result.exit_code == 0, result.error
    return folder / "s"


def _record(session: Path, stage: str):
    from claimcheck.engine.ledger.session import Session

    return Session.open(session).record(stage)


def test_subgroup_support_counts_each_value_per_split_and_class(subgroup_session: Path) -> None:
    import polars as pl

    chk = _record(subgroup_session, "split").check("split.subgroup_support")
    sup = chk.measured["support"]["channel"]
    # Recounted independently: the sample's rows (row_id = record order) joined to the membership file.
    rows = pl.read_csv(ROOT / "sample_data" / "tickets.csv", infer_schema_length=0).with_row_index("row_id")
    mem = pl.read_parquet(subgroup_session / "data" / "split.parquet")
    joined = mem.join(rows.with_columns(pl.col("row_id").cast(pl.Int64)), on="row_id")
    counts = joined.group_by(pl.col("channel").fill_null("(null)"), "split", "queue").len()
    assert counts.height > 0
    for channel, split, queue, n in counts.iter_rows():
        assert sup[channel][split]["classes"][queue] == n
    assert sum(c["rows"] for per in sup.values() for c in per.values()) == mem.height
    low = chk.measured["below_floor"]
    assert all(sup[x["value"]].get(x["split"], {"rows": 0})["rows"] < 5 for x in low)
    assert chk.status == ("fail" if any(x["split"] == "test" for x in low) else "warn" if low else "pass")


def test_artifact_subgroups_give_every_arm_an_interval_and_name_the_largest_regression(
    subgroup_session: Path,
) -> None:
    from claimcheck.engine.headless.replay import replay

    art = _record(subgroup_session, "artifact")
    chk = art.check("artifact.subgroups")
    shared = art.check("artifact.comparison").measured["shared_rows"]
    table = chk.measured["subgroups"]
    assert sum(e["rows"] for e in table.values()) + sum(x["rows"] for x in chk.measured["left_out"]) == shared
    arms = set(art.check("artifact.comparison").measured["values"])
    for entry in table.values():
        assert set(entry["arms"]) == arms
        for iv in entry["arms"].values():
            assert "estimate" in iv and ("refused" in iv or iv["lo"] <= iv["estimate"] <= iv["hi"])
    diffs = [(k, c, d["estimate"]) for k, e in table.items() for c, d in e["differences"].items()]
    worst = min(diffs, key=lambda x: x[2])
    lr = chk.measured["largest_regression"]
    if worst[2] < 0:
        assert (lr["subgroup"], lr["versus"]) == worst[:2] and "largest regression" in chk.summary
    else:
        assert lr == {} and "at least as good" in chk.summary
    assert replay(subgroup_session).exit_code == 0


def test_subgroups_are_refused_where_they_cannot_be_honoured(ws: Path) -> None:
    from claimcheck.engine.evidence import StageRecord

    with pytest.raises(ValueError, match="lists the label column"):
        source.Inputs(**_source(subgroup_columns=["label"]))
    with pytest.raises(StageInputError, match="'subgroup_columns'.*not in the data"):
        _run_source(ws, preprocessing=[], subgroup_columns=["region"])
    with pytest.raises(StageInputError, match=r"'customer' has 90 distinct values \(at most 50\)"):
        _run_source(ws, preprocessing=[], subgroup_columns=["customer"])
    ctx = StageContext(session_dir=ws / "s", workspace=ws)
    numeric = StageRecord(stage="claim", inputs={"target_type": "numeric"}, checks=[])
    inp = source.Inputs(**_source(preprocessing=[], subgroup_columns=["text"]))
    with pytest.raises(StageInputError, match="categorical target"):
        source.run(inp, {"claim": numeric}, ctx)

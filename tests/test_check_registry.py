"""The check registry (engine/pipeline/checks.py): each declared check has its measured-value shape
(or is declared unshaped), a row in docs/checks.md's index whose linked page defines it, and claim
task kinds / target types the metric registry knows; every check id the coverage map names is
declared; and every check a real session writes is declared, cites its declared playbook line, and
every check declared as always recorded for that claim is there. Sessions: the real text
classification session (tests/real_session.py), the documented tabular answers with a categorical and
with a numeric target (built here), and the SFT session (tests/test_sft_end_to_end.py calls
`assert_session_declared` on the one it builds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from claimcheck.engine.evidence import Check
from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import checks as registry_of_checks
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.checks import CheckSpec, declaration, declared, not_applicable, not_run
from claimcheck.engine.report import coverage
from claimcheck.engine.shapes import shape_for
from claimcheck.engine.stats import registry as metric_registry
from tests import test_tabular_end_to_end as tabular

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DECLARED = declared()
ROW = re.compile(
    r"^\| `(?P<id>[a-z_.*0-9]+)` \| (?P<applies>[^|]+) \| (?P<always>yes|no) \| (?P<doc>[^|]+) \|$"
)


def _index() -> dict[str, dict[str, str]]:
    rows = (ROW.match(line) for line in (DOCS / "checks.md").read_text().splitlines())
    return {m["id"]: m.groupdict() for m in rows if m}


def _applies(spec: CheckSpec) -> str:
    parts = [" / ".join(spec.tasks)] if spec.tasks else []
    parts += [" / ".join(spec.targets) + " target"] if spec.targets else []
    parts += [f"fine_tuning = {str(spec.fine_tuning).lower()}"] if spec.fine_tuning is not None else []
    return ", ".join(parts) or "every claim"


def _expected_row(spec: CheckSpec) -> str:
    return f"| `{spec.id}` | {_applies(spec)} | {'yes' if spec.required else 'no'} | <page that defines it> |"


def test_declarations_name_known_stages_task_kinds_and_target_types() -> None:
    assert set(registry_of_checks.DECLARING_MODULES) == set(registry.STAGE_NAMES)
    for spec in DECLARED.values():
        assert spec.stage in registry.STAGE_NAMES, spec.id
        assert set(spec.tasks) <= set(metric_registry.TASK_KINDS), spec.id
        assert set(spec.targets) <= set(metric_registry.TARGET_TYPES), spec.id
        assert spec.playbook.strip(), f"{spec.id} cites no playbook line"


@pytest.mark.parametrize("check_id", sorted(DECLARED))
def test_a_declared_check_has_its_shape_and_its_documentation(check_id: str) -> None:
    spec = DECLARED[check_id]
    shaped = shape_for(check_id.rstrip("*")) is not None
    assert spec.shaped == shaped, f"{check_id}: declared shaped={spec.shaped} but engine/shapes " + (
        "has a shape for it" if shaped else "has none (add one if anything reads its values)"
    )
    row = _index().get(check_id)
    assert row is not None, (
        f"docs/checks.md's 'Every check' table has no row for {check_id}: add {_expected_row(spec)}"
    )
    assert (row["applies"].strip(), row["always"]) == (_applies(spec), "yes" if spec.required else "no"), (
        f"docs/checks.md's row for {check_id} disagrees with its declaration: {_expected_row(spec)}"
    )
    doc = row["doc"].strip()
    page = "checks.md" if doc == "this page" else re.fullmatch(r"\[([a-z-]+\.md)\]\(\1\)", doc)[1]
    assert check_id.rstrip("*") in (DOCS / page).read_text(), f"docs/{page} does not describe {check_id}"


def test_the_index_lists_only_declared_checks() -> None:
    assert sorted(set(_index()) - set(DECLARED)) == []


def test_every_check_the_coverage_map_names_is_declared() -> None:
    named = [
        (checklist, item, cid)
        for checklist, item, ref in coverage.mapped_refs()
        if ref.startswith("check:")
        for cid in ref.removeprefix("check:").split("|")
    ]
    assert named, "the coverage map names no check"
    undeclared = []
    for entry in named:
        try:
            declaration(entry[2])
        except KeyError:
            undeclared.append(entry)
    assert undeclared == []


def test_not_run_builds_the_record_from_the_declaration() -> None:
    got = not_run(
        "split.chronology", "no time column: chronology not checked", why="w", coverage="sample: 1 of 2 rows"
    )
    assert isinstance(got, Check)
    assert (got.status, got.basis, got.summary, got.why, got.coverage) == (
        "not_run",
        "not_run",
        "no time column: chronology not checked",
        "w",
        "sample: 1 of 2 rows",
    )
    assert got.playbook == DECLARED["split.chronology"].playbook
    na = not_applicable("split.prevalence", "the claim's target is numeric — see split.target_distribution")
    assert na.summary == "not run: the claim's target is numeric — see split.target_distribution"
    assert na.playbook == DECLARED["split.prevalence"].playbook and not na.measured
    # A family member takes its family's declaration; an undeclared id is refused, naming what to do.
    assert declaration("dispatch.alarms.stall") is DECLARED["dispatch.alarms.*"]
    with pytest.raises(KeyError, match="split.no_such_check is not declared"):
        not_run("split.no_such_check", "x")
    with pytest.raises(RuntimeError, match="declared twice"):
        registry_of_checks.declare("split.chronology", "another line")


def assert_session_declared(session_dir: Path) -> set[str]:
    """Every check the session wrote is declared and cites its declared playbook line (a disabled,
    decided check cites the disclosure rule instead); every check declared as always recorded for
    the claim's task kind and target type is recorded by each stage the session ran. Returns the ids."""
    records = Session.open(session_dir).records()
    claim = records["claim"].inputs
    task, target = str(claim.get("task_kind") or "text_classification"), metric_registry.target_type(claim)
    tuned = claim.get("fine_tuning") is not False
    written: set[str] = set()
    for stage, rec in records.items():
        for chk in rec.checks:
            spec = declaration(chk.id)
            assert spec.stage == stage, f"{chk.id} is recorded by the {stage} stage"
            if chk.basis != "decided":
                assert chk.playbook == spec.playbook, (
                    f"{chk.id} cites another playbook line than its declaration"
                )
            if chk.status != "not_run":
                assert spec.applies(task, target, tuned), f"{chk.id} measured on a {task} / {target} claim"
            written.add(chk.id)
    for spec in DECLARED.values():
        if spec.required and spec.stage in records and spec.applies(task, target, tuned):
            prefix = spec.id.rstrip("*")
            present = (
                any(cid.startswith(prefix) for cid in written)
                if spec.id.endswith("*")
                else spec.id in written
            )
            assert present, f"{spec.id} is declared as always recorded for a {task} / {target} claim"
    return written


def test_the_real_session_writes_only_declared_checks(real_session: Path) -> None:
    written = assert_session_declared(real_session)
    assert {"split.prevalence", "artifact.verdict", "dispatch.alarms.divergence"} <= written


@pytest.fixture(scope="module")
def tabular_sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The documented tabular answers as written (a categorical target) and turned to a numeric one."""
    categorical = tmp_path_factory.mktemp("categorical")
    run_answers(tabular.ANSWERS, categorical / "s")
    numeric = tmp_path_factory.mktemp("numeric")
    run_answers(tabular._regression_answers(numeric), numeric / "s")
    return {"categorical": categorical / "s", "numeric": numeric / "s"}


@pytest.mark.parametrize("target", ["categorical", "numeric"])
def test_tabular_sessions_write_only_declared_checks(tabular_sessions: dict[str, Path], target: str) -> None:
    written = assert_session_declared(tabular_sessions[target])
    assert "dispatch.no_job" in written and "contract.candidate" in written
    numeric = {"source.target_distribution", "split.target_distribution", "split.target_range"}
    assert (numeric <= written) == (target == "numeric")
    if target == "numeric":
        # The class-based checks are recorded as not applying, citing their own playbook lines.
        records = Session.open(tabular_sessions[target]).records()
        prevalence = records["split"].check("split.prevalence")
        assert prevalence.status == "not_run" and prevalence.summary.startswith(
            "not run: the claim's target is numeric"
        )
        assert prevalence.playbook == DECLARED["split.prevalence"].playbook


def _hand_built_not_run(code: str) -> list[int]:
    """Lines of `Check(...)` calls whose `status=` can be the literal "not_run" (directly or in a
    conditional): such a record belongs to checks.not_run / not_applicable."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Check"):
            continue
        for kw in node.keywords:
            literals = [n.value for n in ast.walk(kw.value) if isinstance(n, ast.Constant)]
            if kw.arg == "status" and ("not_run" in literals or "not run" in literals):
                lines.append(node.lineno)
    return lines


def test_no_stage_or_learner_builds_a_not_run_record_by_hand() -> None:
    folders = ("engine/stages", "engine/baseline", "engine/artifact", "engine/audit", "engine/training")
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for folder in folders
        for p in sorted((ROOT / folder).rglob("*.py"))
        for line in _hand_built_not_run(p.read_text("utf-8"))
    ]
    assert not found, f"build these with claimcheck.engine.pipeline.checks.not_run: {found}"


def test_the_scan_finds_a_hand_built_not_run() -> None:
    code = 'x = 1\nCheck(id="a.b", status="info" if ok else "not_run", summary="")\nCheck(id="a.c", status="pass")\n'
    assert _hand_built_not_run(code) == [2]

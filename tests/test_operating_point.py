"""The baseline stage's operating point travels to the artifact stage: each arm's threshold is chosen
on its own calibration-split scores and applied unchanged to the locked test, beside arg-max
(docs/checks.md, artifact.operating_point). Tested on a real tabular session."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
import tomlkit

from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.stats import calibration

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-tabular.toml"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    doc = tomllib.loads(ANSWERS.read_text())
    doc["session"]["workspace"] = str(ROOT)
    doc["baseline"]["operating_point"] = {
        "constraint": "min_precision",
        "positive_class": "billing",
        "target": 0.8,
    }
    tmp = tmp_path_factory.mktemp("operating")
    answers = tmp / "answers.toml"
    answers.write_text(tomlkit.dumps(doc))
    result = run_answers(answers, tmp / "s")
    assert result.exit_code == 0, result.rows
    return Session.open(tmp / "s")


def test_every_arm_is_judged_under_the_declared_rule(session: Session) -> None:
    check = session.record("artifact").check("artifact.operating_point")
    assert check.status in ("info", "warn")
    shape = parse(check, artifact_shapes.OperatingPointShape)
    assert shape.scores == "raw" and set(shape.arms) == set(check.measured["arms"])
    m = check.measured
    assert (m["positive_class"], m["constraint"], m["scores"]) == ("billing", "min_precision", "raw")
    cal_rows = session.record("split").check("split.membership").measured["sizes"]["calibration"]
    assert {"candidate", "trivial_baseline"} <= set(m["arms"])
    for arm, e in m["arms"].items():
        # chosen on the arm's calibration rows only, never on the test rows
        assert e["chosen_on_rows"] == cal_rows, arm
        for key in ("test", "argmax"):
            c = e[key]
            assert c["tp"] + c["fp"] + c["fn"] + c["tn"] == m["test_rows"], (arm, key)
        if e["feasible"]:
            assert math.isfinite(e["threshold"]) and e["test"]["threshold"] == e["threshold"]
        else:
            assert "threshold" not in e and e["test"]["tp"] + e["test"]["fp"] == 0
    # the trivial arm predicts train's class shares for every row: a constant score, so its rule
    # either flags every row or none, and its arg-max never picks a minority class
    trivial = m["arms"]["trivial_baseline"]["test"]
    assert trivial["tp"] + trivial["fp"] in (0, m["test_rows"])


def test_the_rule_is_the_calibration_choice_not_a_test_choice() -> None:
    """The chooser the check uses picks on fitting rows; on rows where a later cut would meet the
    constraint better, the chosen threshold stays the fitting rows' one."""
    fit_pos = [True, True, False, True, False, False]
    fit_score = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1]
    choice = calibration.choose_threshold(fit_pos, fit_score, constraint="min_precision", target=0.9)
    assert choice["threshold"] == 0.8
    applied = calibration.binary_counts([False, True, True], [0.85, 0.7, 0.75], choice["threshold"])
    assert (applied["tp"], applied["fp"]) == (0, 1)


def test_no_declared_point_is_recorded_as_not_run(real_session: Path) -> None:
    s = Session.open(real_session)
    check = s.record("artifact").check("artifact.operating_point")
    assert check.status == "not_run"
    assert "declared no operating point" in check.summary

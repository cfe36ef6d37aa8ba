"""Engine side of a session on the person's own data: recipe template text is not a rationale."""

from __future__ import annotations

from claimcheck.engine.pipeline.recipes import load_recipe, template_texts
from claimcheck.engine.stages.split import checks
from claimcheck.engine.stages.split.inputs import Inputs


def test_a_recipes_template_rationale_does_not_count_as_the_persons() -> None:
    template = load_recipe("tabular-sklearn")["split"]["rationale"]
    assert template in template_texts("split", "rationale")
    unchanged = checks.rationale(Inputs(strategy="group", rationale=template), {})
    assert unchanged.status == "fail" and "template" in unchanged.summary
    assert unchanged.measured["from_recipe_template"] is True
    own = checks.rationale(
        Inputs(strategy="time", rationale=template + " Firms are seen again next year."), {}
    )
    assert own.status == "pass" and own.measured["from_recipe_template"] is False


def test_group_time_on_few_families_says_which_strategy_can_realise_the_fractions(tmp_path) -> None:
    from claimcheck.engine.ledger.session import Session
    from tests.test_tui_newdata import write_panel

    write_panel(tmp_path / "panel.csv")
    s = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    claim = {
        "task_kind": "tabular",
        "target_type": "numeric",
        "prediction_unit": "one firm-year",
        "target_meaning": "sales",
        "inference_inputs": ["employees"],
        "population": "11 firms",
        "primary_metric": "mae",
        "comparators": ["trivial_baseline"],
        "success": {"metric": "mae", "op": "<", "value": 0.0, "relative_to": "trivial_baseline"},
        "fine_tuning": False,
        "run_scope": "one fit",
    }
    s.run_stage("claim", claim)
    s.freeze("claim")
    source = {"files": ["panel.csv"], "label_column": "sales", "input_columns": ["employees"]}
    source |= {"entity_columns": ["firm"], "time_column": "year", "time_unit": "year"}
    s.run_stage("source", source)
    s.freeze("source")
    rec = s.run_stage("split", {"strategy": "group_time", "rationale": "next years of new firms"})
    membership = rec.check("split.membership")
    assert membership.measured["largest_fraction_shift"] > 0.05, membership.summary
    assert "'time' cuts rows" in membership.summary, membership.summary

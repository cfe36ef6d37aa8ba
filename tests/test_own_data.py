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

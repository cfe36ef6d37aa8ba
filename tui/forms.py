"""The stage form, generated from the stage's pydantic `Inputs` model (tui/form_fields.py).

One widget per field — a Select for a Literal / enum, a Switch for a bool, an input for text,
numbers, lists (comma-separated) and maps (key=value, …), a group for a nested model, a one-line
TOML value for anything else — each with its field's description as help and its own problem shown
under it as the person types (pydantic, worded by claimcheck.engine.errors.validation_problems). A field a
recipe pre-filled says so, and once changed shows the recipe's value beside it. The "TOML
(advanced)" tab holds the same inputs as TOML; the two stay in sync both ways.

The form computes nothing: the values go to `Session.run_stage`, which validates them again.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, SelectionList, Switch, TabbedContent, TabPane, TextArea
from textual.widgets.selection_list import Selection

from claimcheck.engine.errors import validation_problem, validation_problems
from claimcheck.engine.evidence import dump_toml
from claimcheck.engine.textsafe import has_hidden, is_hidden, stand_in
from claimcheck.tui.form_checks import FormCheck
from claimcheck.tui.form_fields import (
    MISSING,
    FieldSpec,
    field_specs,
    from_text,
    get_path,
    leaves,
    set_path,
    to_text,
)
from claimcheck.tui.safe import LiteralInput, TomlArea, clean, literal
from claimcheck.tui.widgets import TickList

RECIPE_MARK = "◆ recipe"
RECIPE_CHANGED = "◇ recipe value: "


def validation_message(exc: ValidationError) -> str:
    """The engine's one wording of a validation error (claimcheck.engine.errors.validation_problem)."""
    p = validation_problem(exc)
    return f"{p.text()} — {p.fix}"


def validate(model: type[BaseModel], data: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return None, validation_message(exc)
    return data, ""


def _owner(field: str, paths: list[str]) -> str | None:
    """The longest form path `field` ('a.b[0].c') falls under, or None."""
    for path in paths:  # longest first
        if field == path or field.startswith((path + ".", path + "[")):
            return path
    return None


class FormScroll(VerticalScroll, can_focus=True):
    """The fields: focusable itself, so landing on a form never puts the cursor in a field."""


@dataclass(frozen=True)
class FormSetup:
    """What a stage form is built from: the Inputs model, the values it opens with, and how the page
    presents them (the recipe's values, an unsaved draft, a notice, the stage's own rules, the fields
    that lead, the values a text field is chosen among, placeholders for a session on your own file)."""

    model: type[BaseModel]
    initial: dict[str, Any]
    recipe: dict[str, Any] = field(default_factory=dict)
    draft: str | None = None
    notice: str = ""
    check: FormCheck | None = None
    first: tuple[str, ...] = ()
    choices: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)

    def specs(self) -> tuple[FieldSpec, ...]:
        """The model's fields with their choices and placeholders, those named in `first` leading."""
        specs = tuple(_picked(s, self.choices.get(s.path)) for s in field_specs(self.model))
        specs = _placeholders(specs, self.placeholders)
        rank = {name: i for i, name in enumerate(self.first)}
        return tuple(sorted(specs, key=lambda s: rank.get(s.path, len(rank))))


class StageForm(Vertical):
    """A stage's inputs as fields and as TOML; `collect()` gives (inputs, problem)."""

    class Validity(Message):
        def __init__(self, problem: str) -> None:
            self.problem = problem
            super().__init__()

    class Edited(Message):
        """The person changed the inputs (the page keeps a draft of them)."""

    def __init__(self, setup: FormSetup, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = setup.model
        self.check = setup.check  # the stage's own rules over valid inputs (tui/form_checks.py)
        self.initial = copy.deepcopy(setup.initial)
        self.recipe = setup.recipe
        self.notice = setup.notice
        self.specs = setup.specs()
        self.leaves = leaves(self.specs)
        self._by_wid = {s.wid: s for s in self.leaves}
        self._paths = sorted((s.path for s in self._all(self.specs)), key=len, reverse=True)
        self.data: dict[str, Any] = copy.deepcopy(setup.initial)
        self.toml_text = dump_toml(self.data)
        self.toml_problem = ""
        if setup.draft is not None:
            self.toml_text = setup.draft
            try:
                parsed = tomllib.loads(setup.draft)
            except tomllib.TOMLDecodeError as exc:
                self.toml_problem = f"TOML syntax: {clean(exc)}"
            else:
                self.data = parsed
        self.local: dict[str, str] = {}  # path -> a problem found before pydantic (no value at all)
        self._shown: dict[str, Any] = {}
        self._by_id: dict[str, Any] = {}
        self._ready = False

    @staticmethod
    def _all(specs: tuple[FieldSpec, ...]) -> list[FieldSpec]:
        out: list[FieldSpec] = []
        for s in specs:
            out.append(s)
            out.extend(StageForm._all(s.children))
        return out

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        notice = Label(literal(self.notice), classes="form-notice")
        notice.display = bool(self.notice)
        yield notice
        start = "form-toml" if self.toml_problem else "form-fields"
        with TabbedContent(initial=start, classes="form-tabs"):
            with TabPane("Fields", id="form-fields"):
                with FormScroll(classes="form-scroll"):
                    yield from self._fields(self.specs)
            with TabPane("TOML (advanced)", id="form-toml"):
                # long values wrap: at 80 columns the pane is ~58 wide and a cut line hides its end
                area = TomlArea(self.toml_text, soft_wrap=True, tab_behavior="focus", id="toml-editor")
                area.cursor_blink = False
                area.show_line_numbers = True
                yield area
        yield Label("", classes="form-problem")

    def _fields(self, specs: tuple[FieldSpec, ...]) -> ComposeResult:
        for spec in specs:
            if spec.kind == "group":
                group = Vertical(classes="field-group", id="g-" + spec.wid)
                group.border_title = spec.title
                with group:
                    if spec.help:
                        yield Label(literal(spec.help), classes="field-help")
                    yield from self._fields(spec.children)
                    yield self._error_label(spec)
                continue
            with Vertical(classes="field"):
                yield Label(spec.title, classes="form-label", id="l-" + spec.wid)
                yield self._widget(spec, get_path(self.data, spec.path))
                if spec.help:
                    yield Label(literal(spec.help), classes="field-help")
                yield self._error_label(spec)

    def set_notice(self, text: str) -> None:
        """The line over the form (hidden when empty)."""
        self.notice = text
        for label in self.query(".form-notice"):
            label.update(literal(text))  # type: ignore[attr-defined]
            label.display = bool(text)

    @staticmethod
    def _error_label(spec: FieldSpec) -> Label:
        label = Label("", classes="field-error", id="e-" + spec.wid)
        label.display = False
        return label

    def _widget(self, spec: FieldSpec, value: Any) -> Any:
        if spec.kind == "select":
            return Select(
                self._options(spec, value),
                value=value if value is not MISSING else spec.options[0],
                allow_blank=False,
                compact=True,
                id=spec.wid,
            )
        if spec.kind == "switch":
            return Switch(value=value is True, animate=False, id=spec.wid)
        if spec.kind == "columns":
            return TickList(*self._column_options(spec, value), compact=True, id=spec.wid)
        w = LiteralInput(to_text(spec, value), placeholder=spec.placeholder, compact=True, id=spec.wid)
        w.cursor_blink = False
        return w

    @staticmethod
    def _options(spec: FieldSpec, value: Any) -> list[tuple[str, Any]]:
        values = list(spec.options)
        if value is not MISSING and value not in values:
            values.append(value)  # a recorded / typed value the model may refuse: shown, then explained
        if "" in values:  # "(none)" first, as a prompt would be
            values = ["", *(v for v in values if v != "")]
        return [(clean(v) if v != "" else "(none)", v) for v in values]

    @staticmethod
    def _column_options(spec: FieldSpec, value: Any) -> list[Selection[str]]:
        """The file's columns, those in `value` ticked; a named column the file lacks is listed after
        them, ticked (the form's check then says it is not in the file)."""
        chosen = [str(v) for v in value] if isinstance(value, list) else []
        names = [*spec.options, *(c for c in chosen if c not in spec.options)]
        return [Selection(literal(c, limit=60), c, c in chosen) for c in names]

    @staticmethod
    def _ticked(spec: FieldSpec, widget: Any) -> list[str]:
        """A column list's value: the ticked columns in the file's order (then the ones it lacks)."""
        picked = set(widget.selected)
        return [
            widget.get_option_at_index(i).value
            for i in range(widget.option_count)
            if widget.get_option_at_index(i).value in picked
        ]

    def _node(self, wid: str) -> Any:
        """A widget of this form by id, found once (a DOM query per field per keystroke is slow)."""
        node = self._by_id.get(wid)
        if node is None:
            node = self._by_id[wid] = self.query_one("#" + wid)
        return node

    def on_mount(self) -> None:
        self._by_id = {w.id: w for w in self.query("*") if w.id}
        self.toml_text = self.query_one("#toml-editor", TextArea).text  # as the editor holds it
        self._ready = True
        self._report()

    # ------------------------------------------------------------ edits: fields <-> TOML

    def _shows(self, spec: FieldSpec, widget: Any, current: Any) -> bool:
        """Does the widget already show `current` (an echo of a sync, not an edit)?"""
        if spec.kind in ("select", "switch"):
            return widget.value == current
        if spec.kind == "columns":
            return self._ticked(spec, widget) == (current if isinstance(current, list) else [])
        return widget.value == to_text(spec, current) or from_text(spec, widget.value)[0] == current

    # ------------------------------------------------------------ the focus marker

    @on(events.DescendantFocus)
    @on(events.DescendantBlur)
    def _focus_marker(self, event: events.DescendantFocus | events.DescendantBlur) -> None:
        """The focused field's label is drawn reversed: a class on its field, moved on every focus
        change (the :focus-within rule left the first field's label reversed when focus moved on)."""
        focused = event.widget if isinstance(event, events.DescendantFocus) else None
        field = None
        for node in focused.ancestors_with_self if focused is not None else ():
            if node is self:
                break
            if node.has_class("field"):
                field = node
                break
        for other in self.query(".field.-focused"):
            if other is not field:
                other.remove_class("-focused")
        if field is not None:
            field.add_class("-focused")

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Switch.Changed)
    @on(SelectionList.SelectedChanged)
    def _field_changed(self, event: Message) -> None:
        event.stop()
        widget = event.control  # type: ignore[attr-defined]
        spec = self._by_wid.get(widget.id or "")
        if not self._ready or spec is None:
            return
        current = get_path(self.data, spec.path)
        if self._shows(spec, widget, current) and spec.path not in self.local:
            return
        if spec.kind in ("select", "switch"):
            value, problem = widget.value, ""
        elif spec.kind == "columns":
            value, problem = self._ticked(spec, widget), ""
        else:
            value, problem = from_text(spec, widget.value)
        self.local.pop(spec.path, None)
        if problem:
            self.local[spec.path] = problem
        elif value != current:
            set_path(self.data, spec.path, value)
            self.toml_problem = ""
            self._sync_toml()
            self.post_message(self.Edited())
        self._report()

    def _sync_toml(self) -> None:
        area = self.query_one("#toml-editor", TextArea)
        area.load_text(dump_toml(self.data))
        self.toml_text = area.text  # as the editor holds it (hidden characters as TOML escapes)

    @on(TextArea.Changed)
    def _toml_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        if self._ready:
            self._pull_toml()

    def _pull_toml(self) -> None:
        """Take the editor's text as the inputs when it changed (also before `collect`: a change
        whose message is still queued counts)."""
        text = self.query_one("#toml-editor", TextArea).text
        if text == self.toml_text:
            return
        self.toml_text = text
        was = (self.toml_problem, self.data)
        try:
            parsed = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            self.toml_problem = f"TOML syntax: {clean(exc)}"
        else:
            self.toml_problem = ""
            if parsed != self.data:
                self.data = parsed
                self.local.clear()
                self._sync_fields()
        if (self.toml_problem, self.data) != was or self.toml_problem:
            self.post_message(self.Edited())
        self._report()

    def _sync_fields(self) -> None:
        for spec in self.leaves:
            widget = self._node(spec.wid)
            value = get_path(self.data, spec.path)
            if self._shows(spec, widget, value):
                continue
            if spec.kind == "select":
                widget.set_options(self._options(spec, value))  # type: ignore[attr-defined]
                if value is not MISSING:
                    widget.value = value  # type: ignore[attr-defined]
            elif spec.kind == "switch":
                widget.value = value is True  # type: ignore[attr-defined]
            elif spec.kind == "columns":
                widget.clear_options()  # type: ignore[attr-defined]
                widget.add_options(self._column_options(spec, value))  # type: ignore[attr-defined]
            else:
                widget.value = to_text(spec, value)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ problems, recipe marks

    def _problems(self) -> tuple[str, dict[str, str]]:
        """(the first problem, or "", and each field's own problem)."""
        if self.toml_problem:
            return self.toml_problem, {}
        per: dict[str, str] = dict(self.local)
        first = next((f"field '{p}': {m}" for p, m in self.local.items()), "")
        try:
            self.model.model_validate(self.data)
        except ValidationError as exc:
            first = first or validation_message(exc)
            for p in validation_problems(exc):
                owner = _owner(p.field, self._paths)
                if owner is not None and owner not in per:
                    where = "" if p.field == owner else f"{p.field[len(owner) :].lstrip('.')}: "
                    per[owner] = where + p.problem
        else:
            for path, message in self.check(self.data) if self.check is not None else []:
                first = first or f"field '{path}': {message}"
                owner = _owner(path, self._paths)
                if owner is not None and owner not in per:
                    per[owner] = message
        return first, per

    def _mark(self, spec: FieldSpec) -> Text:
        t = Text(spec.title, style="bold")
        if spec.kind == "switch":  # the state in words: a switch's colour alone says nothing under NO_COLOR
            t.append(": on" if get_path(self.data, spec.path) is True else ": off", style="bold")
        rv = get_path(self.recipe, spec.path)
        if rv is MISSING:
            return t
        if get_path(self.data, spec.path) == rv:
            t.append("  " + RECIPE_MARK, style="dim")
        else:
            t.append("  " + RECIPE_CHANGED, style="italic")
            t.append_text(literal(to_text(spec, rv) or '""', limit=40))
        return t

    def _update(self, key: str, label_id: str, content: Any, show: bool = True) -> None:
        if self._shown.get(key) == (content, show):
            return  # unchanged: no relayout on every keystroke
        self._shown[key] = (content, show)
        label = self._node(label_id)
        label.update(content)
        label.display = show

    def _report(self) -> None:
        problem, per = self._problems()
        for spec in self._all(self.specs):
            text = per.get(spec.path, "")
            self._update("e:" + spec.path, "e-" + spec.wid, literal("✖ " + text) if text else "", bool(text))
            if spec.kind != "group":
                mark = self._mark(spec)
                self._update("l:" + spec.path, "l-" + spec.wid, mark)
        note = self.hidden_note()
        if (problem, note) == self._shown.get("summary"):
            return
        self._shown["summary"] = (problem, note)
        label = self.query_one(".form-problem", Label)
        if problem:
            label.update(literal("✖ " + problem + note))
        else:
            label.update(literal("✔ inputs valid — ctrl+r runs the checks" + note))
        label.set_class(bool(problem), "-invalid")
        self.post_message(self.Validity(problem))

    def hidden_note(self) -> str:
        """Which field holds control / bidi / zero-width characters (shown as glyphs), or ""."""
        for spec in self.leaves:
            if spec.kind in ("select", "switch", "columns"):
                continue
            value = self._node(spec.wid).value
            if has_hidden(value):  # one regex scan per field: cheap on every keystroke
                # a line break or tab is ordinary in a template (the contract's text_template)
                chars = sorted({ch for ch in value if is_hidden(ch) and ch not in "\n\t"})
                if not chars:
                    continue
                shown = " ".join(stand_in(ch) for ch in chars[:6]) + (" …" if len(chars) > 6 else "")
                return f" · field '{spec.path}' holds {shown} (kept as entered)"
        return ""

    # ------------------------------------------------------------ what the page reads

    @property
    def dirty(self) -> bool:
        """Edits not in the record (or, before the first run, not the recipe's start)."""
        if self._ready:
            self._pull_toml()
        return bool(self.toml_problem) or self.data != self.initial

    def collect(self) -> tuple[dict[str, Any] | None, str]:
        if self._ready:
            self._pull_toml()
        problem, _ = self._problems()
        return (None, problem) if problem else (copy.deepcopy(self.data), "")

    def show_fields(self) -> None:
        self.query_one(".form-tabs", TabbedContent).active = "form-fields"

    def show_toml(self) -> None:
        self.query_one(".form-tabs", TabbedContent).active = "form-toml"


def _placeholders(specs: tuple[FieldSpec, ...], given: dict[str, str]) -> tuple[FieldSpec, ...]:
    """The specs with the given placeholders (by field path) in place of the model's examples."""
    out = []
    for s in specs:
        s = replace(s, children=_placeholders(s.children, given)) if s.children else s
        out.append(replace(s, placeholder=clean(given[s.path])) if s.path in given else s)
    return tuple(out)


def _picked(spec: FieldSpec, options: tuple[Any, ...] | None) -> FieldSpec:
    """A text field with given values becomes a choice among them; a list of text, a column list
    (ticked among them)."""
    if options is None:
        return spec
    if spec.kind == "text":
        return replace(spec, kind="select", options=options)
    if spec.kind == "list" and spec.item == "text":
        return replace(spec, kind="columns", options=tuple(o for o in options if o != ""))
    return spec


__all__ = ["FormScroll", "StageForm", "validate", "validation_message"]

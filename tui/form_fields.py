"""What a stage form shows, read from the stage's pydantic `Inputs` model: one `FieldSpec` per field.

No widget here: the kinds, the help text (the field's `description`), the choices, and the two-way
conversion between a field's value and the text an input shows. tui/forms.py builds the widgets.
"""

from __future__ import annotations

import enum
import json
import re
import tomllib
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

# kind: select | switch | int | float | text | list | map | group | toml (any other type: a TOML value)
SCALARS = {str: "text", int: "int", float: "float", bool: "switch"}
MISSING = object()


@dataclass(frozen=True)
class FieldSpec:
    path: str  # dotted, e.g. "success.value"
    title: str
    help: str
    kind: str
    options: tuple[Any, ...] = ()  # select: the allowed values
    item: str = "text"  # list / map: the kind of each item or value
    placeholder: str = ""
    children: tuple[FieldSpec, ...] = ()

    @property
    def wid(self) -> str:
        return "f-" + self.path.replace(".", "--")


def _title(name: str, info: Any) -> str:
    return info.title or name.replace("_", " ").capitalize()


def _literal_options(tp: Any) -> tuple[Any, ...] | None:
    if get_origin(tp) is Literal:
        return tuple(get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tuple(m.value for m in tp)
    return None


def _bare(tp: Any) -> Any:
    """`Annotated[float, Field(gt=0)]` -> float."""
    return get_args(tp)[0] if get_origin(tp) is typing.Annotated else tp


def _item_kind(tp: Any) -> str | None:
    tp = _bare(tp)
    if tp in SCALARS and tp is not bool:
        return SCALARS[tp]
    return "text" if _literal_options(tp) is not None else None


def _kind(tp: Any) -> tuple[str, tuple[Any, ...], str]:
    """(kind, options, item kind) of an annotation."""
    tp = _bare(tp)
    options = _literal_options(tp)
    if options is not None:
        return "select", options, "text"
    if tp in SCALARS:
        return SCALARS[tp], (), "text"
    origin, args = get_origin(tp), get_args(tp)
    if origin in (list, tuple) and len(args) == 1 and _item_kind(args[0]):
        return "list", (), _item_kind(args[0]) or "text"
    if origin is dict and len(args) == 2 and args[0] is str and _item_kind(args[1]):
        return "map", (), _item_kind(args[1]) or "text"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "group", (), "text"
    return "toml", (), "text"


def field_specs(model: type[BaseModel], prefix: str = "") -> tuple[FieldSpec, ...]:
    """One spec per field of `model`, nested models as groups; help from `Field(description=...)`."""
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        tp = info.annotation
        if isinstance(tp, types.UnionType) or get_origin(tp) is typing.Union:
            kind, options, item = "toml", (), "text"
        else:
            kind, options, item = _kind(tp)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        suggestions = tuple(extra.get("suggestions", ()))  # type: ignore[arg-type]
        if kind == "text" and suggestions:
            kind, options = "select", suggestions
        examples = info.examples or []
        children = field_specs(tp, path + ".") if kind == "group" else ()
        spec = FieldSpec(
            path,
            _title(name, info),
            info.description or "",
            kind,
            options,
            item,
            f"e.g. {examples[0]}" if examples else "",
            children,
        )
        out.append(replace(spec, help=field_help(spec, info)))
    return tuple(out)


def field_help(spec: FieldSpec, info: Any) -> str:
    """The field's description and its default, read from the model (so the help cannot drift from
    it): 'Seed of the bootstrap. Default: 0.' — 'Required.' when the model has no default."""
    text = spec.help
    if spec.kind == "group":
        return text
    if info.is_required():
        return f"{text} Required.".strip()
    default = info.get_default(call_default_factory=True)
    shown = to_text(spec, default)
    said = f"Default: {shown}." if shown else "Default: empty."
    return f"{text} {said}".strip()


def leaves(specs: tuple[FieldSpec, ...]) -> list[FieldSpec]:
    out: list[FieldSpec] = []
    for s in specs:
        out.extend(leaves(s.children) if s.kind == "group" else [s])
    return out


# ---------------------------------------------------------------- values <-> text


def get_path(data: Any, path: str) -> Any:
    cur = data
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = data
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    if value is MISSING:  # an emptied field: the key goes, and the model's default applies
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def inline_toml(value: Any) -> str:
    """A value as one line of TOML (strings as basic strings, tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(inline_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_key(str(k))} = {inline_toml(v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    return json.dumps(str(value))


def _scalar_text(value: Any) -> str:
    return "" if value is MISSING or value is None else str(value)


def to_text(spec: FieldSpec, value: Any) -> str:
    """What the field's input shows for `value`."""
    if spec.kind in ("list", "columns"):
        return ", ".join(_scalar_text(v) for v in value) if isinstance(value, list) else _scalar_text(value)
    if spec.kind == "map":
        if isinstance(value, dict):
            return ", ".join(f"{k}={_scalar_text(v)}" for k, v in value.items())
        return _scalar_text(value)
    if spec.kind == "toml":
        return "" if value is MISSING else inline_toml(value)
    if spec.kind == "switch":
        return "yes" if value is True else "no"
    return _scalar_text(value)


def _number(kind: str, text: str) -> Any:
    """`text` as the field's number, else the text itself (pydantic then says what is wrong)."""
    t = text.strip()
    try:
        return int(t) if kind == "int" else float(t)
    except ValueError:
        return text


def _item(kind: str, text: str) -> Any:
    return _number(kind, text) if kind in ("int", "float") else text


def from_text(spec: FieldSpec, text: str) -> tuple[Any, str]:
    """(value, problem) of an input's text; problem is "" unless the text has no value at all."""
    if spec.kind in ("int", "float"):
        return _number(spec.kind, text), ""
    if spec.kind == "list":
        return [_item(spec.item, p.strip()) for p in text.split(",") if p.strip()], ""
    if spec.kind == "map":
        out: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                return MISSING, f"'{part}' is not key=value: write pairs such as train=0.7, test=0.3"
            out[key.strip()] = _item(spec.item, val.strip())
        return out, ""
    if spec.kind == "toml":
        if not text.strip():
            return MISSING, ""  # emptied: the field's default
        try:
            return tomllib.loads("v = " + text)["v"], ""
        except tomllib.TOMLDecodeError as exc:
            return MISSING, f'not a TOML value ({exc}): e.g. ["a", "b"] or {{key = "value"}}'
    return text, ""


__all__ = [
    "MISSING",
    "FieldSpec",
    "field_specs",
    "from_text",
    "get_path",
    "inline_toml",
    "leaves",
    "set_path",
    "to_text",
]

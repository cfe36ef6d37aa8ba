"""The base of every evidence shape, the registry from check id to shape, and `parse`.

A shape is a pydantic model (extra="forbid") of one check's `measured` values. The stage that
writes the check builds the shape and stores its dump; every other reader calls `parse(check)`
and gets the model back (or a clear error), so nobody guesses a record's layout. The on-disk
layout of each shape is the one claimcheck 0.1 wrote (schema version 1), so older records are
read by the same models: version 2 only adds that writing and reading enforce them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

# What a shape's natural picture is (report SVG and terminal plot); "" when it has none.
FIGURES = (
    "confusion_matrix",
    "reliability",
    "forest",
    "length_histogram",
    "training_curves",
    "class_coverage",
    "bars",
    "",
)


class ShapeError(ValueError):
    """A check's measured values do not have the shape its id promises."""

    def __init__(self, check_id: str, field: str, problem: str):
        self.check_id, self.field, self.problem = check_id, field, problem
        super().__init__(f"check {check_id}: measured.{field}: {problem}")


class Part(BaseModel):
    """A nested part of a shape: strict like the shape itself."""

    model_config = ConfigDict(extra="forbid")


class Shape(Part):
    # The check id(s) this shape describes; a trailing "*" is a prefix (dispatch.alarms.*).
    check_ids: ClassVar[tuple[str, ...]] = ()
    figure: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for cid in cls.__dict__.get("check_ids", ()):
            if cid in _REGISTRY:
                raise RuntimeError(
                    f"two shapes claim check id {cid}: {_REGISTRY[cid].__name__}, {cls.__name__}"
                )
            _REGISTRY[cid] = cls

    def dump(self) -> dict[str, Any]:
        """The `measured` dict a record stores: optional parts left out (TOML has no null)."""
        return self.model_dump(mode="python", exclude_none=True, by_alias=True)


_REGISTRY: dict[str, type[Shape]] = {}
S = TypeVar("S", bound=Shape)


def shape_for(check_id: str) -> type[Shape] | None:
    if check_id in _REGISTRY:
        return _REGISTRY[check_id]
    for cid, cls in _REGISTRY.items():
        if cid.endswith("*") and check_id.startswith(cid[:-1]):
            return cls
    return None


def registered() -> dict[str, type[Shape]]:
    return dict(_REGISTRY)


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def validate_measured(check_id: str, measured: dict[str, Any]) -> Shape | None:
    """The shape of a check's measured values; None for an unshaped id or an empty (not run) dict."""
    cls = shape_for(check_id)
    if cls is None or not measured:
        return None
    try:
        return cls.model_validate(measured)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ShapeError(check_id, _field(tuple(err["loc"])), err["msg"]) from None


def parse(check: Any, expect: type[S]) -> S | None:
    """The typed measured values of `check` (None when it measured nothing), as `expect`.

    Raises ShapeError when the values do not fit, or when `expect` is not the shape of that id.
    """
    if check is None:
        return None
    cls = shape_for(check.id)
    if cls is not expect:
        raise ShapeError(
            check.id,
            "(shape)",
            f"is read as {expect.__name__} but its shape is {cls.__name__ if cls else 'not declared'}",
        )
    return validate_measured(check.id, check.measured)  # type: ignore[return-value]


_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def check_extra_keys(values: dict[str, Any], prefix: str) -> None:
    """For parts that allow computed keys (`calibrated_<metric>`): each must be `prefix<metric>`."""
    for key in values:
        if not (key.startswith(prefix) and _KEY.match(key[len(prefix) :] or "")):
            raise ValueError(f"unknown field {key!r}")

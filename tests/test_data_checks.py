"""Checks that were wrong on real data: time cuts inside one timestamp, numeric time columns, rows with
any null, independent rows as a recorded decision, duplicate-family grouping, class order at the source
stage, and the default text template."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.context import StageContext
from engine.stages import source, split


def _source(tmp_path: Path, text: str, upstream: dict | None = None, **kw):
    (tmp_path / "d.csv").write_text(text)
    base = {
        "files": ["d.csv"],
        "label_column": "lab",
        "input_columns": ["txt", "num"],
        "text_columns": ["txt"],
        "availability": {"txt": "yes", "num": "yes"},
        "entity_columns": ["cust"],
        "as_of": "2030-01-01",
    }
    base.update(kw)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    return source.run(source.Inputs(**base), upstream or {}, ctx), ctx


def test_missingness_counts_rows_with_any_null(tmp_path: Path) -> None:
    rows = "txt,num,cust,lab\na,1,c1,x\n,2,c2,y\nb,,c3,x\n,,c4,y\nc,5,c5,x\n"
    rec, _ = _source(tmp_path, rows)
    m = rec.check("source.missingness")
    # rows 2, 3 and 4 each have a null: 3 rows, not 2 + 2 = 4 null cells
    assert m.measured["rows_with_any_null"] == 3
    assert m.measured["rows_with_any_null_share"] == 0.6
    assert "3 row(s) (60.0%)" in m.summary

"""A training job's row files, readable with the standard library alone, so the job's process needs
no Polars (the GPU measurement, bench/gpu.sh, runs the job where Polars is not installed).

A row file is JSON lines: the first line the column names (a JSON array), each further line one
row's values in that order (a JSON array). The parent writes them (data/train.jsonl, data/dev.jsonl
from jobfiles.write_job_dir); the job writes its dev predictions (final/dev_predictions.jsonl).

Job folders recorded before that format hold data/*.parquet and final/dev_predictions.parquet:
`read_rows` reads those through Polars (in the parent, for replay and reload parity of an old
session). It is the one place that knows both formats; `find_rows` names whichever a folder holds.

A `RowTable` offers exactly the operations the job and its readers use on a Polars frame: `columns`,
`height`, a column's values (`table["col"].to_list()`), `iter_rows(named=...)` and `select(...)`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.errors import ClaimcheckError

SUFFIX = ".jsonl"
LEGACY_SUFFIX = ".parquet"


class RowFileError(ClaimcheckError, ValueError):
    """A row file that is not what its writer writes (names the file and line). A ValueError too:
    the job reports a data file it cannot use (a hash mismatch included) as one."""


class Column(list):
    """One column's values, in row order."""

    def to_list(self) -> list[Any]:
        return list(self)


@dataclass(frozen=True)
class RowTable:
    """Rows with named columns: the subset of a Polars frame's interface the job's code reads."""

    columns: list[str]
    rows: list[list[Any]]

    @property
    def height(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> Column:
        try:
            i = self.columns.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r} (columns: {', '.join(self.columns)})") from None
        return Column(r[i] for r in self.rows)

    def iter_rows(self, named: bool = False) -> Iterator[Any]:
        for r in self.rows:
            yield dict(zip(self.columns, r, strict=True)) if named else tuple(r)

    def select(self, *names: str) -> RowTable:
        idx = [self.columns.index(n) for n in names]
        return RowTable(list(names), [[r[i] for i in idx] for r in self.rows])

    @classmethod
    def from_columns(cls, data: dict[str, list[Any]]) -> RowTable:
        cols = list(data)
        return cls(cols, [list(v) for v in zip(*(data[c] for c in cols), strict=True)])


def write_rows(path: Path, frame: Any) -> None:
    """Write `frame` (a Polars frame or a RowTable) as a row file, atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(list(frame.columns), ensure_ascii=False) + "\n")
        for row in frame.iter_rows():
            fh.write(json.dumps(list(row), ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def read_rows(path: Path) -> RowTable:
    """A row file as a RowTable; a Parquet file from a job folder recorded before row files, through Polars."""
    path = Path(path)
    if path.suffix == LEGACY_SUFFIX:
        import polars as pl

        df = pl.read_parquet(path)
        return RowTable(list(df.columns), [list(r) for r in df.iter_rows()])
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise RowFileError(f"{path}: empty (a row file starts with its column names)")
    try:
        columns = json.loads(lines[0])
        rows = [json.loads(line) for line in lines[1:]]
    except ValueError as exc:
        raise RowFileError(f"{path}: not JSON lines ({exc})") from None
    bad = next((n for n, r in enumerate(rows, 2) if not isinstance(r, list) or len(r) != len(columns)), 0)
    if not isinstance(columns, list) or bad:
        raise RowFileError(f"{path}: line {bad or 1} does not match the column names {columns!r}")
    return RowTable([str(c) for c in columns], rows)


def find_rows(folder: Path, stem: str) -> Path:
    """The row file `stem` in `folder`: stem.jsonl, else stem.parquet (a folder recorded before row
    files); stem.jsonl when neither exists (the caller's read then names the missing file)."""
    new = Path(folder) / f"{stem}{SUFFIX}"
    old = Path(folder) / f"{stem}{LEGACY_SUFFIX}"
    return old if not new.exists() and old.exists() else new

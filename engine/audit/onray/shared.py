"""Tasks that read their texts from the spill file themselves (`audit_ray_texts = "shared"`, the package
docstring): what the driver sends them in place of the texts, and how they read them.

Where the bounded path leaves the text columns on disk (engine/audit/textstore.py) and the spill
file's folder is on a filesystem every node mounts at the same path, a task is sent a small TextStore
(the file's path, its schema and the row ids the task reads: 8 bytes a row) instead of the rows'
texts, and reads them with the same TextStore methods the driver would: the rows of a chunk of texts
(`rows_of`: the near-duplicate passes and verification blocks) or a slice of the file's row groups
(`slices`: the duplicate keys' shards). The rows read, and their order, are the driver's, so every
figure is the one the sent path gives (tests/test_audit_ray_shared.py).
"""

from __future__ import annotations

import os
import socket
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from claimcheck.engine.audit.onray import SHARED, Cluster, RayAuditError, remote
from claimcheck.engine.audit.textstore import TextStore


class FileSlice(NamedTuple):
    """A slice of the spill file's row groups, for a task to read: the frame's ids within it."""

    store: TextStore
    offset: int  # the slice's first row in the file
    rows: int  # the slice's rows in the file (the frame's are those of store.ids)


def wanted(cluster: Cluster, store: TextStore | None) -> bool:
    """Whether the tasks read their texts from the spill file (the texts are on disk and shared)."""
    return store is not None and cluster.texts == SHARED


def one_task(cluster: Cluster, store: TextStore | None) -> bool:
    """Whether a step runs as one task doing the local check's work: a cluster of one worker CPU (a
    shuffle can only add work there) whose task can reach every text itself, in the frame it is sent
    or in the shared spill file."""
    return cluster.workers == 1 and (store is None or wanted(cluster, store))


def whole(store: TextStore) -> TextStore:
    """What a task is sent to read every row of the frame (the file's path, schema and row ids)."""
    return TextStore(store.path, store.ids, store.schema)


def rows_of(store: TextStore, positions: np.ndarray) -> TextStore:
    """What a task is sent to read the frame's rows at `positions` (ascending, distinct): the file's
    path and schema and those rows' ids."""
    return TextStore(store.path, store.ids[np.asarray(positions, dtype=np.int64)], store.schema)


def slices(store: TextStore, slice_bytes: int) -> list[FileSlice]:
    """The file in slices of whole row groups up to `slice_bytes` decoded, each with the frame's ids that
    its row groups can hold (by the file's row-id statistics)."""
    out = []
    for offset, rows, lo, hi in store._id_slices(slice_bytes):
        a, b = np.searchsorted(store.ids, lo), np.searchsorted(store.ids, hi, side="right")
        if b > a:
            out.append(FileSlice(TextStore(store.path, store.ids[a:b], store.schema), offset, rows))
    return out


def frame_of(part: pl.DataFrame | TextStore | FileSlice, columns: list[str]) -> pl.DataFrame:
    """In a task: `columns` of the rows it was sent (a frame), or of those it reads (rows_of, slices)."""
    if isinstance(part, pl.DataFrame):
        return part
    if isinstance(part, FileSlice):
        s = part.store
        readable(s)
        return s._mine(s._scan(columns).slice(part.offset, part.rows).collect()).select(columns)
    readable(part)
    return part.rows(np.arange(part.ids.size, dtype=np.int64), columns)


def readable(store: TextStore) -> None:
    """In a task: stops naming the spill file where this worker cannot read it."""
    if not os.access(store.path, os.R_OK):
        raise RayAuditError(_unreachable(str(store.path), socket.gethostname()))


def _unreachable(path: str, host: str) -> str:
    return (
        f"source input audit_ray_texts = 'shared', but the Ray worker on {host} cannot read the spill "
        f"file {path}: set TMPDIR to a folder every node of the cluster mounts at the same path, or "
        "set audit_ray_texts = 'sent'"
    )


def _probe(path: str) -> tuple[bool, str]:
    return os.access(path, os.R_OK), socket.gethostname()


def check(ray: Any, store: TextStore) -> None:
    """Refuses the shared reads, naming the file, where a worker cannot read the spill file."""
    ok, host = ray.get(remote(ray, _probe).remote(str(store.path)))
    if not ok:
        raise RayAuditError(_unreachable(str(store.path), host))

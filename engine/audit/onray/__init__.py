"""The audit on a Ray cluster: which backend runs the source stage's costliest checks, and the cluster
they run on.

Setting (source inputs, engine/stages/source/inputs.py; one owner: `resolve` below):
- `audit_backend = "local"` (default): every check runs in this process (engine/audit/budget.py picks
  in memory or bounded);
- `audit_backend = "ray"`: the near-duplicate search (neardup.py), the duplicate / conflicting-label
  keys (duplicates.py) and the grouping of entity ids into families (families.py) run as Ray tasks over shards of the source, the shuffle by key done by Ray (tasks
  return one object per hash partition; the reducers take theirs). The other checks stay local.
  Where the bounded path leaves the text columns on disk (engine/audit/textstore.py: the same rule as
  the local backend), the driver never holds every text: it reads each task's texts from the store,
  a slice or a chunk at a time, and sends them (`ray.put`, released once the task has them).
- `audit_ray_texts` (where the text columns stay on disk): `sent` (default), the driver sends each
  task its texts as above — a cluster reached through `ray://` cannot read the driver's temporary
  folder; `shared`, the spill file's folder (tempfile's, TMPDIR) is on a filesystem every node
  mounts at the same path: the driver sends each task only the file's path and the row ids it reads
  (a slice of the file, or the rows of a chunk of texts) and the task reads them itself (shared.py).
  The driver checks on a worker that the file is there before the first task, and stops with its
  path otherwise. The coverage's Ray part says which way the tasks got their texts.
- `audit_ray_address`: what `ray.init(address=...)` takes — `ray://host:10001` (Ray Client: a laptop
  driving a remote cluster), `host:6379` (the cluster's GCS, from a node of the cluster) or `auto`.
  Empty: the environment's RAY_ADDRESS (Ray's own variable, as for the Ray provider's jobs). Ray's own
  authentication settings (RAY_AUTH_MODE / RAY_AUTH_TOKEN, TLS variables) are read by Ray from the
  environment, as they are for `ray` itself: nothing here stores a credential. A Ray Client
  connection is watched while the audit runs (watch.py): where its server on the head dies, the
  stage stops with RayAuditError naming the address within LOST_AFTER_S, never waits on.

The figures do not depend on the backend (tests/test_audit_ray.py: the same pairs file byte for byte, the
same measured values). The coverage line records where the check ran: the cluster's address, its
session (the cluster's identity: one per cluster start), its worker CPUs and nodes and Ray's version,
after the memory part, so replay (which compares coverage without it) can run locally. Replay runs
the local backend: the figures are the same, and a replay must not need the cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.audit.budget import RAY_MARK
from claimcheck.engine.pipeline.context import StageInputError

BACKENDS = ("local", "ray")
LOCAL = "local"
RAY = "ray"
ADDRESS_ENV = "RAY_ADDRESS"
# Partitions per worker CPU for the shuffles (more partitions: smaller reducers, better balance).
PARTITIONS_PER_WORKER = 2
# How the tasks got their texts (the end of the coverage's Ray part).
TEXTS_ON_DISK = "; texts sent from the driver's spill file a slice at a time"
TEXTS_IN_FRAME = "; texts sent from the driver's frame"
TEXTS_ON_SHARED_PATH = "; tasks read their texts from the spill file at a shared path"
# audit_ray_texts: how tasks get the texts left on disk (module docstring).
SENT = "sent"
SHARED = "shared"
TEXTS_MODES = (SENT, SHARED)
# The entity families' tasks are sent entity ids, never texts (entity columns stay in the frame).
ENTITY_IDS_IN_FRAME = "; entity ids sent from the driver's frame"
CONNECT_TRIES = 3  # ray.init attempts before the stage stops with the address in its message
CONNECT_PAUSE_S = 3.0  # the pause after the first failed attempt (then twice that)
# A Ray Client connection whose server has not answered the driver's probes for this long is lost: the
# audit stops with RayAuditError instead of waiting on (watch.py). Generous: a loaded head answers a
# probe within seconds. LOST_ENV (seconds) overrides it.
LOST_AFTER_S = 120.0
LOST_ENV = "CLAIMCHECK_RAY_LOST_S"
PROBE_EVERY_S = 5.0  # the pause between two probes of the connection's server


class RayAuditError(StageInputError):
    """The Ray backend was asked for and cannot run (Ray missing, the cluster unreachable)."""


@dataclass(frozen=True)
class Cluster:
    """The cluster an audit ran on: what the coverage line records."""

    address: str
    session: str  # Ray's session name: one per cluster start
    workers: int  # worker CPUs (Ray runs one task per CPU)
    nodes: int
    ray_version: str
    texts: str = SENT  # audit_ray_texts: how tasks get the texts left on disk (SENT or SHARED)

    def note(self) -> str:
        return (
            f"{RAY_MARK}{self.address}, cluster {self.session}, {self.workers} worker CPU(s) on "
            f"{self.nodes} node(s), ray {self.ray_version}"
        )

    def covered(self, coverage: str, on_disk: bool = False, sent: str = "") -> str:
        """`coverage` with the Ray part added (alone when the check has no other coverage); `on_disk`:
        the text columns stayed in the driver's spill file (engine/audit/textstore.py); `sent`: what
        the tasks were sent, where it is not the texts (ENTITY_IDS_IN_FRAME)."""
        on_disk_note = TEXTS_ON_SHARED_PATH if self.texts == SHARED else TEXTS_ON_DISK
        note = self.note() + (sent or (on_disk_note if on_disk else TEXTS_IN_FRAME))
        return coverage + note if coverage else note[len(" · ") :]

    @property
    def partitions(self) -> int:
        return max(2, self.workers * PARTITIONS_PER_WORKER)


def resolve(backend: str, address: str, *, replay: bool = False) -> tuple[str, str]:
    """(backend, address) in force. Replay runs locally; "ray" without an address takes RAY_ADDRESS and
    is refused up front when neither names a cluster."""
    if backend not in BACKENDS:
        raise RayAuditError(
            f"source input 'audit_backend' = {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    if backend == LOCAL or replay:
        return LOCAL, ""
    addr = str(address).strip() or os.environ.get(ADDRESS_ENV, "").strip()
    if not addr:
        raise RayAuditError(
            "source input audit_backend = 'ray' needs a cluster: set 'audit_ray_address' (ray://host:10001 "
            f"from a laptop, host:6379 on a cluster node) or the environment variable {ADDRESS_ENV}"
        )
    _import_ray()  # refused here, before any data is read, where Ray is not installed
    from claimcheck.engine.audit.onray.watch import lost_after

    lost_after()  # and a bad LOST_ENV
    return RAY, addr


@contextmanager
def session(backend: str, address: str, texts: str = SENT) -> Iterator[tuple[Any, Cluster] | None]:
    """connect(address, texts) for the Ray backend; None for the local one."""
    if backend != RAY:
        yield None
        return
    with connect(address, texts) as on:
        yield on


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayAuditError(
            "source input audit_backend = 'ray' needs the `ray` package: pip install -c constraints.txt "
            "'claimcheck[ray]' (or set audit_backend = 'local')"
        ) from None
    return ray


@contextmanager
def connect(address: str, texts: str = SENT) -> Iterator[tuple[Any, Cluster]]:
    """A driver connection to the cluster at `address` for one audit: (the ray module, its identity);
    `texts`: how its tasks get the texts left on disk (SENT or SHARED, module docstring).
    Disconnects afterwards (a connection made before is left as it was). A Ray Client connection this
    makes is watched (watch.py): lost, the audit stops with RayAuditError naming `address`."""
    if texts not in TEXTS_MODES:
        raise RayAuditError(
            f"source input 'audit_ray_texts' = {texts!r}; choose one of {', '.join(TEXTS_MODES)}"
        )
    from claimcheck.engine.audit.onray import watch as watching

    ray = _import_ray()
    bound_s = watching.lost_after()  # a bad override is refused before connecting
    ours = not ray.is_initialized()
    if ours:
        _init(ray, address)
    watch = watching.Watch.of(bound_s) if ours else None
    try:
        yield ray, identity(ray, address, texts)
    except Exception as exc:
        # Lost (the watch gave the connection up), or Ray Client gave its session up itself.
        if watch is not None and (watch.lost or isinstance(exc, ConnectionError)):
            why = watch.lost or f"Ray Client ended the session ({_first_line(exc)})"
            raise RayAuditError(watching.lost_message(address, why)) from None
        raise
    finally:
        if watch is not None:
            watch.stop()
        if ours:
            ray.shutdown()


def _lines(exc: BaseException) -> list[str]:
    """The error's message, its non-empty lines stripped."""
    return [ln.strip() for ln in str(exc).splitlines() if ln.strip()]


def _first_line(exc: BaseException) -> str:
    """The error's first line, without the gRPC call Ray Client appends ("Last exception: <…")."""
    lines = _lines(exc)
    return lines[0].split(" Last exception:")[0][:200] if lines else type(exc).__name__


def _init(ray: Any, address: str) -> None:
    """ray.init, tried CONNECT_TRIES times: a Ray Client server answers "Initialization failure" while
    the server it starts for this driver is still coming up (seen on a loaded machine)."""
    last = ""
    for attempt in range(CONNECT_TRIES):
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level="ERROR",
                include_dashboard=False,
                configure_logging=False,
            )
            return
        except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError…
            lines = _lines(exc)
            last = " … ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else type(exc).__name__
            if ray.is_initialized():
                ray.shutdown()
            if attempt + 1 < CONNECT_TRIES:
                time.sleep(CONNECT_PAUSE_S * (attempt + 1))
    raise RayAuditError(
        f"could not connect to the Ray cluster at {address!r} (source input 'audit_ray_address' or "
        f"{ADDRESS_ENV}) after {CONNECT_TRIES} tries: {last}"
    )


def identity(ray: Any, address: str, texts: str = SENT) -> Cluster:
    ctx = ray.get_runtime_context()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(ray.cluster_resources().get("CPU", 0))
    return Cluster(address, str(ctx.get_session_name() if hasattr(ctx, "get_session_name") else ""),
                   max(1, cpus), len(nodes), str(ray.__version__), texts)  # fmt: skip


def remote(ray: Any, fn: Any, **options: Any) -> Any:
    """`fn` as a Ray task (one CPU each unless `options` say otherwise)."""
    return ray.remote(**({"num_cpus": 1} | options))(fn)

"""The driver's watch on its Ray Client connection: an audit on a cluster reached through `ray://` stops
with the cluster's address in a clear error, never waits forever, when the connection's server dies.

Ray Client runs, for each driver, a "specific server" process on the head that holds the driver's
session; the driver reaches it through the head's proxy (the `ray://` port). The driver's calls wait
without a deadline (`ray.put`, a task's submission, `ray.get`): they return when the specific server
answers, or when Ray Client gives the session up. Where the specific server dies, the proxy still
answers the driver's reconnect pings, and the driver can wait on, for as long as the proxy keeps the
session (a known gap: ray-project/ray#60600). Measured with Ray 2.60 on the loopback head: a killed
server, a ConnectionError after about 30 s (the proxy drops the session after the driver's reconnect
grace period, RAY_CLIENT_RECONNECT_GRACE_PERIOD, 30 s by default; set to 100000, a `ray.put` still
waited in PutObject 150 s after the kill); a stopped (wedged) one, about 90 s; a suite run saw a
`PutObject` wait forever after the server crashed.

The watch: a thread that asks the specific server, through the proxy, every PROBE_EVERY_S whether Ray is
initialised there (ClusterInfo IS_INITIALIZED: the proxy answers only PING itself and passes every
other ClusterInfo on; each probe has a deadline). The connection is lost where no probe was answered
for the bound (LOST_AFTER_S, or LOST_ENV), or where the proxy says the session's server is gone
(NOT_FOUND). Then the watch marks the driver's connection shut and closes its gRPC channel: every
call the driver waits in ends, and `connect` (the package) stops the audit with RayAuditError.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from typing import Any

from claimcheck.engine.audit.onray import LOST_AFTER_S, LOST_ENV, PROBE_EVERY_S, RayAuditError


def lost_after() -> float:
    """The bound in force: LOST_ENV where set (seconds, finite and above 0), else LOST_AFTER_S."""
    raw = os.environ.get(LOST_ENV, "").strip()
    if not raw:
        return LOST_AFTER_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise RayAuditError(f"environment variable {LOST_ENV} = {raw!r}: give seconds, a number above 0")
    return value


class Watch:
    """The watch on one Ray Client connection (module docstring); `lost`: why it was given up, or ""."""

    def __init__(self, worker: Any, bound_s: float) -> None:
        self.worker = worker  # ray.util.client's worker of this connection
        self.bound_s = bound_s
        self.lost = ""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claimcheck-ray-watch", daemon=True)

    @classmethod
    def of(cls, bound_s: float) -> Watch | None:
        """A started watch on the driver's Ray Client connection; None where the driver is not a Ray
        Client (`host:6379`, `auto`: Ray's own driver, whose calls end when its node dies)."""
        from ray.util import client

        if not client.ray.is_connected():
            return None
        watch = cls(client.ray.get_context().client_worker, bound_s)
        watch._thread.start()
        return watch

    def stop(self) -> None:
        """Ends the watch (the thread leaves after its probe in flight, if any)."""
        self._done.set()

    def _run(self) -> None:
        answered = time.monotonic()
        while not self._done.wait(PROBE_EVERY_S):
            left = self.bound_s - (time.monotonic() - answered)
            why = self._probe(max(left, 1.0))
            if self._done.is_set():
                return
            if not why:
                answered = time.monotonic()
            elif why.startswith("gone") or time.monotonic() - answered >= self.bound_s:
                self.lost = why
                self._shut()
                return

    def _probe(self, timeout_s: float) -> str:
        """The empty string where the specific server answered within `timeout_s`; else what went
        wrong ("gone: …" where the proxy no longer has a server for this session)."""
        import grpc
        from ray.core.generated import ray_client_pb2

        try:
            self.worker.get_cluster_info(ray_client_pb2.ClusterInfoType.IS_INITIALIZED, timeout=timeout_s)
            return ""
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.NOT_FOUND:
                return "gone: the cluster's head no longer reaches the server of this connection"
            return f"no answer for {self.bound_s:.0f} s ({code.name if code else type(exc).__name__})"
        except Exception as exc:  # the channel closed under the probe (the driver disconnecting)
            return f"no answer for {self.bound_s:.0f} s ({type(exc).__name__})"

    def _shut(self) -> None:
        """Ends every call the driver waits in: the connection marked shut (Ray Client then neither
        retries nor reconnects), its channel closed (the calls in flight end with an error)."""
        self.worker._in_shutdown = True
        with contextlib.suppress(Exception):
            self.worker.data_client._in_shutdown = True
        channel = getattr(self.worker, "channel", None)
        if channel is not None:
            with contextlib.suppress(Exception):
                channel.close()
        with contextlib.suppress(Exception):
            with self.worker.data_client.cv:
                self.worker.data_client.cv.notify_all()


def lost_message(address: str, why: str) -> str:
    """The audit's error where the connection to the cluster at `address` was lost."""
    return (
        f"lost the connection to the Ray cluster at {address!r} during the audit: {why}. The source "
        "stage was not recorded (nothing of this run is kept as its result): run it again; if it "
        "happens again, check the cluster's logs (on the head node, ray_client_server*.err and .out "
        "in the session's logs folder, /tmp/ray/session_latest/logs by default) or set "
        "audit_backend = 'local'"
    )

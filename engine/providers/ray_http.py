"""Ray's Job Submission REST API over the standard library (no `ray` import in the app).

`POST /api/jobs/`, `GET /api/jobs/{id}`, `/logs`, `/stop`, `DELETE`. Errors say whether a request
can have reached the dashboard: RayUnreachable (never arrived: safe to retry), RayUncertain (no
reply: reconcile by id before sending again), RayHTTPError (answered with an error).
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

# Ray's words for a job whose process has ended.
RAY_TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")


class RayJobsError(RuntimeError):
    """A definite failure talking to Ray (the request was refused or answered with an error)."""


class RayUnreachable(RayJobsError):
    """The request never reached the dashboard (connection refused, bad host): safe to retry."""


class RayUncertain(RayJobsError):
    """The request may have reached the dashboard but no reply came (timeout, dropped connection)."""


class RayHTTPError(RayJobsError):
    def __init__(self, status: int, body: str, what: str):
        super().__init__(f"{what}: HTTP {status}: {_first_lines(body)}")
        self.status, self.body = status, body


def _first_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # Ray answers errors with a Python traceback: its last line is the message.
    return " | ".join(lines[-n:])[:500]


class RayJobsClient:
    """Ray's Job Submission REST API over urllib (no proxies: the address is used as given)."""

    def __init__(self, address: str, *, timeout: float = 30.0, retries: int = 3):
        parsed = urllib.parse.urlparse(address if "://" in address else f"http://{address}")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"Ray dashboard address {address!r} is not an http(s)://host:port URL")
        self.address = f"{parsed.scheme}://{parsed.netloc}"
        self.timeout = float(timeout)
        self.retries = max(1, int(retries))
        # An empty ProxyHandler: an http_proxy variable must not reroute the cluster's traffic.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """One HTTP exchange. Returns (status, body) for every HTTP answer, 4xx/5xx included."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.address + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except urllib.error.URLError as exc:
            # Raised while connecting / sending: refused means nothing arrived.
            reason = exc.reason
            if isinstance(reason, ConnectionRefusedError | socket.gaierror) or (
                isinstance(reason, OSError) and reason.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH)
            ):
                raise RayUnreachable(f"Ray dashboard {self.address} unreachable: {reason}") from None
            raise RayUncertain(
                f"{method} {path}: no complete exchange with {self.address}: {reason}"
            ) from None
        except (TimeoutError, http.client.HTTPException, ConnectionError, OSError) as exc:
            # Raised while waiting for the reply: the server may have acted on the request.
            raise RayUncertain(
                f"{method} {path}: no reply from {self.address}: {type(exc).__name__}: {exc}"
            ) from None

    def _get(self, path: str) -> tuple[int, bytes]:
        """GET with a bounded retry: reading is always safe to repeat."""
        last: RayJobsError | None = None
        for i in range(self.retries):
            try:
                return self._request("GET", path)
            except (RayUncertain, RayUnreachable) as exc:
                last = exc
                time.sleep(min(2.0, 0.25 * (2**i)))
        assert last is not None
        raise last

    @staticmethod
    def _json(status: int, raw: bytes, what: str) -> Any:
        text = raw.decode(errors="replace")
        if status != 200:
            raise RayHTTPError(status, text, what)
        try:
            return json.loads(text)
        except ValueError:
            raise RayHTTPError(status, text, f"{what} (reply is not JSON)") from None

    def version(self) -> dict[str, Any]:
        return self._json(*self._get("/api/version"), "GET /api/version")

    def submit(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST /api/jobs/ once (never retried here: the caller reconciles an uncertain reply)."""
        status, raw = self._request("POST", "/api/jobs/", payload)
        return self._json(status, raw, "POST /api/jobs/")

    def get(self, submission_id: str) -> dict[str, Any] | None:
        status, raw = self._get(f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}")
        if status == 404:
            return None
        return self._json(status, raw, f"GET /api/jobs/{submission_id}")

    def list(self) -> list[dict[str, Any]]:
        return self._json(*self._get("/api/jobs/"), "GET /api/jobs/")

    def logs(self, submission_id: str) -> str:
        status, raw = self._get(f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}/logs")
        return str(self._json(status, raw, f"GET /api/jobs/{submission_id}/logs").get("logs", ""))

    def stop(self, submission_id: str) -> bool:
        status, raw = self._request("POST", f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}/stop")
        if status == 404:
            return False
        return bool(self._json(status, raw, f"POST /api/jobs/{submission_id}/stop").get("stopped", False))

    def delete(self, submission_id: str) -> bool:
        status, raw = self._request("DELETE", f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}")
        if status == 404:
            return False
        return bool(self._json(status, raw, f"DELETE /api/jobs/{submission_id}").get("deleted", False))

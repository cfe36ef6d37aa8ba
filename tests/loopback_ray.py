"""The loopback Ray head the suite's Ray tests share (conftest.py's `ray_head`: one per worker process,
started by the first test that asks for it), and the serialised Ray Client connects it needs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from claimcheck.engine.providers.ray_testhead import LoopbackHead, _find_ray_cli, connecting


def serialise_connects() -> Callable[[], None]:
    """The audit's Ray Client connections made in this process each hold ray_testhead.connecting()
    until their server answers (its comment: two heads on one machine can otherwise hand two drivers
    the same port). Returns what puts the audit's own connect back; a second call changes nothing."""
    from claimcheck.engine.audit import onray

    init = onray._init
    if getattr(init, "serialised", False):
        return lambda: None

    def one_at_a_time(ray: Any, address: str) -> None:
        with connecting():
            init(ray, address)

    one_at_a_time.serialised = True  # type: ignore[attr-defined]
    onray._init = one_at_a_time
    return lambda: setattr(onray, "_init", init)


def started_head() -> Iterator[LoopbackHead]:
    """A started loopback head (two CPUs), stopped afterwards; the test skips with the reason where
    Ray is not installed or no head starts."""
    if not _find_ray_cli():
        pytest.skip(
            "Ray is not installed (the `ray` CLI is missing): pip install -c constraints.txt '.[ray]'"
        )
    errors = []
    for _ in range(2):  # one retry: a port picked free can be taken before Ray binds it
        head = LoopbackHead(num_cpus=2)
        try:
            head.start()
        except RuntimeError as exc:
            errors.append(str(exc)[-400:])
            continue
        undo = serialise_connects()
        try:
            yield head
        finally:
            undo()
            head.stop()
        return
    pytest.skip(f"a Ray head could not start on 127.0.0.1: {errors[-1]}")

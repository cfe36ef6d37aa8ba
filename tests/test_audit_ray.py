"""The audit on a Ray cluster (engine/audit/onray): on the loopback Ray head the tests start (two worker
CPUs: two worker processes), the near-duplicate search, the duplicate / conflict keys and the entity
families run as Ray tasks and give the local run's figures — the same pairs and families files byte for
byte, the same measured values — with the cluster named in the coverage line; a session audited on Ray
replays locally."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.audit import budget as B
from claimcheck.engine.audit import onray
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from tests.test_audit_memory import _bring_scripts, _planted

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "tickets.csv"
RAY_IDS = ("source.near_duplicates", "source.duplicate_inputs", "source.conflicting_labels")
FAMILIES_ID = "source.entity_families"  # its tasks are sent entity ids, not texts


def _source(ws: Path, tag: str, inputs: dict[str, Any]) -> tuple[Any, Path]:
    ctx = StageContext(session_dir=ws / f"s-{tag}", workspace=ws)
    return source.run(source.Inputs(**inputs), {}, ctx), ctx.session_dir


def _figures(rec: Any) -> str:
    return json.dumps(
        {c.id: [c.measured, c.status, c.summary, B.strip_note(c.coverage)] for c in rec.checks},
        sort_keys=True,
        default=str,
    )


def _same_on_ray(ws: Path, inputs: dict[str, Any], address: str, budgets: tuple[str, ...] = ("",)) -> Any:
    """The local in-memory run, then one Ray run per memory budget ("": the default, in memory; a
    small one: the bounded path, the text columns left on disk): every Ray run gives its figures and
    pairs bytes, and names the cluster and how its tasks got the texts."""
    here, here_dir = _source(ws, "local", inputs)
    assert "memory: bounded" not in here.check("source.near_duplicates").coverage
    for budget in budgets:
        ray_inputs = {**inputs, "audit_backend": "ray", "audit_ray_address": address}
        there, there_dir = _source(
            ws, f"ray{budget}", ray_inputs | ({"memory_budget": budget} if budget else {})
        )
        assert _figures(there) == _figures(here)
        for name in ("near_duplicates.parquet", "families.parquet"):
            assert (there_dir / "data" / name).read_bytes() == (here_dir / "data" / name).read_bytes()
        texts = onray.TEXTS_ON_DISK if budget else onray.TEXTS_IN_FRAME
        for cid in (*RAY_IDS, FAMILIES_ID):
            cov = there.check(cid).coverage
            assert f" · ray: {address}, cluster session_" in cov, cov
            assert "2 worker CPU(s) on 1 node(s), ray 2." in cov, cov
            assert cov.endswith(onray.ENTITY_IDS_IN_FRAME if cid == FAMILIES_ID else texts), cov
            assert " · ray: " not in here.check(cid).coverage
    return there


def test_planted_near_and_exact_copies_give_the_local_figures_on_ray(
    tmp_path: Path,
    ray_head: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted exact and near copies, nulls in an input, conflicting labels, normalisation on: every
    figure of the source stage equal, the pairs file identical, and there is something to find — with
    the texts in the driver's frame, and with them left on disk (a 1 MiB budget: the bounded path),
    where the driver's frame holds only stand-ins and every task's texts come from the spill file."""
    from claimcheck.engine.audit import textstore

    spilled: list[Any] = []
    spill = textstore.spill

    def recorded(lf: Any, text_columns: list[str]) -> Any:
        frame, store = spill(lf, text_columns)
        spilled.append((text_columns, frame.get_column("body").drop_nulls().unique().to_list()))
        return frame, store

    monkeypatch.setattr(textstore, "spill", recorded)
    import numpy as np
    import polars as pl

    # A second entity column: nulls, and the same strings as `cust` (case "17" must not link to
    # customer "17"), so the families join rows through both columns.
    case = np.random.default_rng(5).integers(0, 1500, size=4000).astype(str).astype(object)
    case[::3] = None
    frame = _planted(4000).with_columns(pl.Series("case", case.tolist(), dtype=pl.String))
    frame.write_csv(tmp_path / "d.csv")
    inputs = dict(
        files=["d.csv"],
        label_column="label",
        label_mapping={"x": "x", "y": "y", "z": "z"},
        input_columns=["body", "kind"],
        text_columns=["body"],
        near_dup_threshold=0.7,
        shingle_size=2,
        normalisation="lower_strip_ws",
        entity_columns=["cust", "case"],
    )
    there = _same_on_ray(tmp_path, inputs, ray_head.client_address, ("", "1M"))
    # Only the bounded Ray run spilled, and its frame held no text: the tasks had theirs from the store.
    assert spilled == [(["body"], [""])]
    near = there.check("source.near_duplicates").measured
    assert near["pairs"] > 0 and near["candidates"] >= near["text_pairs"] > 0
    assert there.check("source.duplicate_inputs").measured["exact"]["groups"] > 0
    assert there.check("source.conflicting_labels").measured["groups"] > 0
    fam = there.check(FAMILIES_ID).measured
    assert fam["multi_row_families"] > 0 and fam["families_linking_several_ids"]["case"] > 0
    assert fam["singleton_families"] > 0


def test_session_audited_on_ray_replays_locally(
    tmp_path: Path,
    ray_head: Any,
) -> None:
    """The documented tickets example through `run --answers` with audit_backend = "ray": its figures are
    the local run's, and `--replay` (local: no cluster needed) reproduces every check."""
    import tomlkit

    from claimcheck.engine.headless.answers import run_answers
    from claimcheck.engine.headless.replay import replay

    if not SAMPLE.exists():
        pytest.skip("sample_data/tickets.csv is not generated")
    (tmp_path / "sample_data").mkdir()
    (tmp_path / "sample_data" / "tickets.csv").write_bytes(SAMPLE.read_bytes())
    example = tomllib.loads((ROOT / "docs" / "answers-example.toml").read_text())
    answers = {k: example[k] for k in ("session", "claim", "source")}
    _bring_scripts(tmp_path, answers["source"])
    answers["session"]["workspace"] = "."
    (tmp_path / "local.toml").write_text(tomlkit.dumps(answers))
    answers["source"].update(audit_backend="ray", audit_ray_address=ray_head.client_address)
    (tmp_path / "ray.toml").write_text(tomlkit.dumps(answers))
    for tag in ("local", "ray"):
        made = run_answers(tmp_path / f"{tag}.toml", tmp_path / tag)
        assert made.exit_code == 0, made.render_table()
    rec = {t: tomllib.loads((tmp_path / t / "02-source.toml").read_text()) for t in ("local", "ray")}
    checks = {t: {c["id"]: c for c in rec[t]["checks"]} for t in rec}
    for cid in (*RAY_IDS, FAMILIES_ID):
        assert checks["ray"][cid]["measured"] == checks["local"][cid]["measured"], cid
        assert " · ray: " in checks["ray"][cid]["coverage"]
    for rel in ("data/near_duplicates.parquet", "data/families.parquet"):
        assert (tmp_path / "ray" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes()
    result = replay(tmp_path / "ray")
    assert result.exit_code == 0, result.render_table()
    rows = {(r.stage, r.check): r.outcome for r in result.rows}
    for cid in (*RAY_IDS, FAMILIES_ID):
        assert rows[("source", cid)] == "reproduced", cid


def test_ray_backend_without_a_cluster_is_refused_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(onray.ADDRESS_ENV, raising=False)
    with pytest.raises(onray.RayAuditError, match="audit_ray_address"):
        onray.resolve("ray", "")
    assert onray.resolve("ray", "", replay=True) == ("local", "")
    monkeypatch.setenv(onray.ADDRESS_ENV, "ray://cluster:10001")
    assert onray.resolve("ray", "") == ("ray", "ray://cluster:10001")
    assert onray.resolve("ray", "host:6379") == ("ray", "host:6379")
    assert onray.resolve("local", "host:6379") == ("local", "")
    # Without the `ray` package the setting is refused before any data is read, naming the extra.
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(onray.RayAuditError, match=r"claimcheck\[ray\]"):
        onray.resolve("ray", "host:6379")
    assert onray.resolve("local", "") == ("local", "")


def test_the_bound_on_a_lost_connection_is_the_default_or_a_number_of_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from claimcheck.engine.audit.onray.watch import lost_after

    monkeypatch.delenv(onray.LOST_ENV, raising=False)
    assert lost_after() == onray.LOST_AFTER_S
    monkeypatch.setenv(onray.LOST_ENV, " 600 ")
    assert lost_after() == 600.0
    for bad in ("0", "-5", "two minutes", "nan", "inf"):
        monkeypatch.setenv(onray.LOST_ENV, bad)
        with pytest.raises(onray.RayAuditError, match=f"{onray.LOST_ENV} = '{bad}': give seconds"):
            onray.resolve("ray", "host:6379")  # refused before any data is read
    assert onray.resolve("local", "") == ("local", "")


def test_replay_ignores_the_ray_part_of_coverage() -> None:
    note = onray.Cluster("ray://h:10001", "session_x", 8, 2, "2.60.0").note()
    assert B.strip_note("full" + note) == "full"
    assert B.strip_note("full · memory: bounded (budget 1.0 MiB, setting)" + note) == "full"
    assert B.strip_note(note[len(" · ") :]) == ""


LOST_S = 20  # the test's bound on a lost connection (onray.LOST_ENV); the default is onray.LOST_AFTER_S
STOPS_WITHIN_S = LOST_S + 60  # from the server's end to the audit's error, at the most (generous)
AUDIT_LIMIT_S = 240  # the audit's process, start to end, before the test calls it hung and ends it


def _audit_losing_its_server(ws: str, address: str, head_pid: int, how: str, out: Any) -> None:
    """In a process of its own (a hang cannot outlive the test): the source stage on Ray, whose
    connection's specific server gets `how` (SIGKILL: dead; SIGSTOP: wedged, neither answering nor
    closing its connections) just before the first shard is put. Reports ("server", pid), then
    ("raised", type, message, seconds from the signal to the error) or ("returned",)."""
    import os
    import signal
    import time

    from claimcheck.engine.audit.onray import duplicates as ray_dup
    from claimcheck.engine.providers.local import proc_state
    from claimcheck.engine.providers.ray_testhead import client_servers
    from tests.loopback_ray import serialise_connects

    os.environ[onray.LOST_ENV] = str(LOST_S)
    serialise_connects()
    before, put_shards, at = client_servers(head_pid), ray_dup.put_shards, []

    def losing(*args: Any) -> Any:
        if not at:
            (pid,) = client_servers(head_pid) - before  # this audit's connection's server
            out.put(("server", pid))
            os.kill(pid, getattr(signal, how))
            deadline = time.monotonic() + 60
            while proc_state(pid) not in ("T", "Z", "X", "") and time.monotonic() < deadline:
                time.sleep(0.05)
            at.append(time.monotonic())
        return put_shards(*args)

    ray_dup.put_shards = losing
    inputs = dict(
        files=["d.csv"], label_column="label", label_mapping={"x": "x", "y": "y", "z": "z"},
        input_columns=["body", "kind"], text_columns=["body"], near_dup_threshold=0.7, shingle_size=2,
        audit_backend="ray", audit_ray_address=address,
    )  # fmt: skip
    try:
        _source(Path(ws), "lost", inputs)
        out.put(("returned",))
    except Exception as exc:
        out.put(("raised", type(exc).__name__, str(exc), time.monotonic() - at[0] if at else -1.0))


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_lost_client_server_stops_the_audit_with_the_address_not_a_hang(
    tmp_path: Path,
    ray_head: Any,
    how: str,
) -> None:
    """The connection's Ray Client server killed (a crash) or stopped (wedged) during the audit: the
    source stage stops within the bound with RayAuditError naming the cluster's address and what to do,
    and writes none of its files; the cluster serves the next audit."""
    import multiprocessing
    import os
    import queue
    import signal

    from claimcheck.engine.providers.ray_testhead import _proc_alive

    _planted(1500).write_csv(tmp_path / "d.csv")
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    args = (str(tmp_path), ray_head.client_address, ray_head.proc.pid, how, out)
    child = spawn.Process(target=_audit_losing_its_server, args=args)
    child.start()
    got: list[Any] = []
    try:
        child.join(AUDIT_LIMIT_S)
        hung = child.is_alive()
        while not got or got[-1][0] == "server":  # the server's pid, then how the audit ended
            got.append(out.get(timeout=0.1 if hung else 60))
    except queue.Empty:
        pass
    finally:
        if child.is_alive():
            child.kill()
        for msg in got:  # the server, stopped or dead, ended for good (our head started it)
            if msg[0] == "server" and _proc_alive(msg[1]):
                os.kill(msg[1], signal.SIGKILL)
    assert not hung, f"the audit still waited {AUDIT_LIMIT_S} s after its server was lost: {got}"
    assert [m[0] for m in got] == ["server", "raised"] and got[1][1] == "RayAuditError", got
    message, seconds = got[1][2], got[1][3]
    assert f"lost the connection to the Ray cluster at {ray_head.client_address!r}" in message
    assert "run it again" in message and "cluster's logs" in message
    assert 0 <= seconds < STOPS_WITHIN_S, got
    assert not list((tmp_path / "s-lost").rglob("*.parquet"))  # none of the stage's files
    with onray.connect(ray_head.client_address) as (ray, cluster):
        assert ray.get(ray.put(41)) + 1 == 42 and cluster.workers == 2

"""One MLflow run in a tracking store for a session (mlflow-skinny 3.x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import REPORT_FILES, StageRecord
from claimcheck.engine.exports.common import verify_for_export
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.shapes import artifact as A
from claimcheck.engine.shapes import data as D
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as T
from claimcheck.engine.textsafe import visible

_JOB_FILES = ("contract.toml", "status.json", "metrics.jsonl", "log.txt", "pid.json")


def _ms(iso: str) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1000)
    except ValueError:
        return 0


def _flat(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += _flat(f"{prefix}.{k}", v)
        return out
    return [(prefix, visible(str(value))[:6000])]


def _metric_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in text)


def mlflow_export(session_dir: Path, tracking_uri: str | None = None) -> str:
    """Log the session as one MLflow run; return its run id. Extra [mlflow] (mlflow-skinny 3.x).

    Stage inputs of frozen stages are params; measured figures of frozen stages are metrics (the
    training loss and dev metric as metric history, one value per step); the records, session.toml,
    the report if written and the job's small files are artifacts; the source file is an MLflow
    dataset whose digest is its sha256; tags carry the stage digests and the verdict. Times are the
    records' own (frozen_at), never the clock. A session already logged with the same digests in the
    same store is not logged twice: its run id is returned.
    """
    import os

    session_dir = Path(session_dir)
    session = verify_for_export(session_dir)
    uri = tracking_uri or (session_dir / "exports" / "mlflow" / "mlruns").resolve().as_uri()
    if uri.startswith("file:"):
        # mlflow 3 keeps the file store in maintenance mode behind this switch; a folder needs no server.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient
    from mlflow.entities import Param, RunStatus

    records = session.records()
    states = dict(session.states())
    frozen = {n: r for n, r in records.items() if states.get(n) == "frozen"}
    digests = {n: r.provenance.digest for n, r in records.items()}
    session_tag = visible(session.meta.id)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("claimcheck")
    exp_id = exp.experiment_id if exp is not None else client.create_experiment("claimcheck")
    key = ",".join(f"{n}={d}" for n, d in sorted(digests.items()))
    for run in client.search_runs([exp_id], filter_string=f"tags.`claimcheck.session` = '{session_tag}'"):
        if run.data.tags.get("claimcheck.records") == key:
            return run.info.run_id
    times = [_ms(r.provenance.frozen_at) for r in frozen.values() if r.provenance.frozen_at]
    start, end = (min(times), max(times)) if times else (0, 0)
    art = frozen.get("artifact")
    verdict = art.check("artifact.verdict") if art else None
    tags = {
        "claimcheck.session": session_tag,
        "claimcheck.records": key,
        "claimcheck.verdict": visible(f"{verdict.status}: {verdict.summary}")[:5000]
        if verdict
        else "not established",
        **{f"claimcheck.state.{n}": s for n, s in states.items()},
        **{f"claimcheck.digest.{n}": d for n, d in digests.items()},
    }
    run = client.create_run(exp_id, start_time=start, tags=tags, run_name=f"claimcheck {session_tag}")
    rid = run.info.run_id
    params = [Param(k, v) for name, rec in frozen.items() for k, v in _flat(name, rec.inputs)]
    for i in range(0, len(params), 90):
        client.log_batch(rid, params=params[i : i + 90])
    metrics = _mlflow_metrics(frozen, end)
    for i in range(0, len(metrics), 900):
        client.log_batch(rid, metrics=metrics[i : i + 900])
    datasets = _mlflow_datasets(session, frozen)
    if datasets:
        client.log_inputs(rid, datasets=datasets)
    _mlflow_artifacts(client, rid, session_dir)
    client.set_terminated(rid, RunStatus.to_string(RunStatus.FINISHED), end_time=end)
    return rid


def _mlflow_metrics(frozen: dict[str, StageRecord], end: int) -> list[Any]:
    """The locked-test comparison (one value each) and the training curves (one value per step)."""
    from mlflow.entities import Metric

    art = frozen.get("artifact")
    metrics: list[Metric] = []
    comp = parse(art.check("artifact.comparison"), A.Comparison) if art else None
    if comp is not None:
        for arm, v in comp.values.items():
            metrics.append(Metric(_metric_name(f"test.{comp.metric}.{arm}"), float(v), end, 0))
        for versus, d in comp.differences.items():
            metrics.append(Metric(_metric_name(f"test.{comp.metric}.diff.{versus}"), d.estimate, end, 0))
            if d.lo is not None and d.hi is not None:
                metrics.append(Metric(_metric_name(f"test.{comp.metric}.diff.{versus}.lo"), d.lo, end, 0))
                metrics.append(Metric(_metric_name(f"test.{comp.metric}.diff.{versus}.hi"), d.hi, end, 0))
    disp = frozen.get("dispatch")
    curve = parse(disp.check("dispatch.loss_curve"), T.LossCurve) if disp else None
    if curve is not None:
        metrics += [
            Metric("train.loss", float(v), end, int(s)) for s, v in zip(curve.step, curve.loss, strict=False)
        ]
    dev = parse(disp.check("dispatch.dev_metric"), T.DevMetric) if disp else None
    if dev is not None:
        name = _metric_name(f"dev.{dev.metric}")
        metrics += [Metric(name, float(v), end, int(s)) for s, v in zip(dev.step, dev.value, strict=False)]
    return metrics


def _mlflow_datasets(session: Session, frozen: dict[str, StageRecord]) -> list[Any]:
    """The source files as MLflow datasets whose digest is the file's sha256."""
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    src = frozen.get("source")
    sums = parse(src.check("source.checksum"), D.Checksum) if src else None
    if sums is None:
        return []
    from mlflow.data.dataset_source_registry import resolve_dataset_source

    ws = session.workspace
    inputs = []
    for f in sums.files:
        path = Path(f.path) if Path(f.path).is_absolute() else ws / f.path
        ds = MetaDataset(
            source=resolve_dataset_source(path.resolve().as_uri()),
            name=Path(f.path).name,
            digest=f.sha256,
        )
        inputs.append(DatasetInput(ds._to_mlflow_entity(), [InputTag("mlflow.data.context", "source")]))
    return inputs


def _mlflow_artifacts(client: Any, rid: str, session_dir: Path) -> None:
    """The records and session.toml, the report if written, and each job's small files."""
    for spec in registry.STAGES:
        p = session_dir / spec.file_name
        if p.exists():
            client.log_artifact(rid, str(p), "records")
    client.log_artifact(rid, str(session_dir / "session.toml"), "records")
    for name in REPORT_FILES:
        if (session_dir / name).exists():
            client.log_artifact(rid, str(session_dir / name), "report")
    jobs = session_dir / "jobs"
    for job in sorted(jobs.iterdir()) if jobs.is_dir() else []:
        for name in _JOB_FILES:
            if (job / name).is_file():
                client.log_artifact(rid, str(job / name), f"jobs/{job.name}")

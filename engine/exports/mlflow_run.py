"""One MLflow run in a tracking store for a session (mlflow-skinny 3.x)."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import REPORT_FILES, StageRecord
from claimcheck.engine.exports.common import ExportRefused, library_warnings, verify_for_export
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as training_shapes
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
    return [(prefix, visible(str(value))[:MAX_PARAM_VALUE])]


@dataclass
class Names:
    """MLflow keys for claimcheck's names (stage inputs, column names, arms, metrics).

    MLflow takes letters, digits, `_ - . /`, space and colon, up to 250 characters, and no key that
    reads as a path (`..`). Keys here keep to letters, digits, `_ - .` and space: any other
    character becomes `_`, a key starting with `.` gets a leading `_`, a key over MAX_KEY is cut,
    and a key so changed gets a short hash of the original, so two names never share a key. The original of each mapped key is kept as the tag
    `claimcheck.original.<key>` (made visible)."""

    originals: dict[str, str] = field(default_factory=dict)  # key -> the name it stands for

    def key(self, name: str) -> str:
        mapped = _OUTSIDE.sub("_", name)
        if mapped.startswith(".") or not mapped:
            mapped = "_" + mapped
        if mapped != name or len(mapped) > MAX_KEY or self.originals.get(mapped, name) != name:
            digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            mapped = f"{mapped[: MAX_KEY - 9]}-{digest}"
        self.originals[mapped] = name
        return mapped

    def tags(self) -> dict[str, str]:
        return {
            f"claimcheck.original.{k}": visible(n)[:MAX_TAG_VALUE]
            for k, n in self.originals.items()
            if k != n
        }


_OUTSIDE = re.compile(r"[^A-Za-z0-9_\-. ]")
MAX_KEY = 200  # MLflow allows 250; the tag naming a mapped key's original adds 20
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 5000


@dataclass
class RunPlan:
    """Everything the run will hold, built and validated before the run is created."""

    tags: dict[str, str]
    params: list[Any]
    metrics: list[Any]
    datasets: list[Any]
    artifacts: list[tuple[str, str]]  # (local file, artifact folder)
    start: int
    end: int


def _plan(session: Session, session_dir: Path, key: str) -> RunPlan:
    from mlflow.entities import Param

    records = session.records()
    states = dict(session.states())
    frozen = {n: r for n, r in records.items() if states.get(n) == "frozen"}
    times = [_ms(r.provenance.frozen_at) for r in frozen.values() if r.provenance.frozen_at]
    start, end = (min(times), max(times)) if times else (0, 0)
    art = frozen.get("artifact")
    verdict = art.check("artifact.verdict") if art else None
    names = Names()
    params = [Param(names.key(k), v) for name, rec in frozen.items() for k, v in _flat(name, rec.inputs)]
    metrics = _mlflow_metrics(frozen, end, names)
    tags = {
        "claimcheck.session": visible(session.meta.id),
        "claimcheck.records": key,
        "claimcheck.verdict": visible(f"{verdict.status}: {verdict.summary}")[:MAX_TAG_VALUE]
        if verdict
        else "not established",
        **{f"claimcheck.state.{n}": s for n, s in states.items()},
        **{f"claimcheck.digest.{n}": r.provenance.digest for n, r in records.items()},
        **names.tags(),
    }
    datasets = _mlflow_datasets(session, frozen)
    return RunPlan(tags, params, metrics, datasets, _mlflow_artifacts(session_dir), start, end)


def _validate(plan: RunPlan) -> None:
    """MLflow's own checks of every key and value, run before the run exists."""
    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_batch_log_data

    try:
        _validate_batch_log_data(plan.metrics, plan.params, [RunTag(k, v) for k, v in plan.tags.items()])
    except MlflowException as exc:
        raise ExportRefused(
            f"MLflow would refuse this run, so none is created: {visible(exc.message)}"
        ) from None


def _log(client: Any, rid: str, plan: RunPlan) -> None:
    for i in range(0, len(plan.params), 90):
        client.log_batch(rid, params=plan.params[i : i + 90])
    for i in range(0, len(plan.metrics), 900):
        client.log_batch(rid, metrics=plan.metrics[i : i + 900])
    if plan.datasets:
        client.log_inputs(rid, datasets=plan.datasets)
    for local, folder in plan.artifacts:
        client.log_artifact(rid, local, folder)


def mlflow_export(
    session_dir: Path, tracking_uri: str | None = None, warn: Callable[[str], None] | None = None
) -> str:
    """Log the session as one MLflow run; return its run id. Extra [mlflow] (mlflow-skinny 3.x).

    Stage inputs of frozen stages are params; measured figures of frozen stages are metrics (the
    training loss and dev metric as metric history, one value per step); the records, session.toml,
    the report if written and the job's small files are artifacts; the source file is an MLflow
    dataset whose digest is its sha256; tags carry the stage digests, the verdict and the original
    of every name mapped to MLflow's alphabet (`Names`). Times are the records' own (frozen_at),
    never the clock. Everything is built and validated before the run is created; a run whose
    logging fails is marked FAILED and the export refused. A session already logged with the same
    digests in the same store, as a FINISHED run, is not logged twice: its run id is returned.
    `warn` gets each warning MLflow gave meanwhile (its logger and Python warnings), made visible.
    """
    caught: list[str] = []
    try:
        with library_warnings(caught, "mlflow"):
            return _export(Path(session_dir), tracking_uri)
    finally:
        for message in caught:
            (warn or (lambda _m: None))(message)


def _export(session_dir: Path, tracking_uri: str | None) -> str:
    import os

    session = verify_for_export(session_dir)
    uri = tracking_uri or (session_dir / "exports" / "mlflow" / "mlruns").resolve().as_uri()
    if uri.startswith("file:"):
        # mlflow 3 keeps the file store in maintenance mode behind this switch; a folder needs no server.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    digests = {n: r.provenance.digest for n, r in session.records().items()}
    key = ",".join(f"{n}={d}" for n, d in sorted(digests.items()))
    plan = _plan(session, session_dir, key)
    _validate(plan)
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("claimcheck")
        exp_id = exp.experiment_id if exp is not None else client.create_experiment("claimcheck")
        done = _finished_run(client, exp_id, plan.tags["claimcheck.session"], key)
        if done is not None:
            return done
        name = f"claimcheck {plan.tags['claimcheck.session']}"
        rid = client.create_run(exp_id, start_time=plan.start, tags=plan.tags, run_name=name).info.run_id
    except MlflowException as exc:
        raise ExportRefused(f"the MLflow tracking store {visible(uri)}: {visible(exc.message)}") from None
    _log_or_fail(client, rid, plan)
    return rid


def _finished_run(client: Any, exp_id: str, session_tag: str, key: str) -> str | None:
    """A FINISHED run of this session with these digests; a RUNNING, FAILED or KILLED one is no export."""
    quoted = session_tag.replace("\\", "\\\\").replace("'", "\\'")
    for run in client.search_runs([exp_id], filter_string=f"tags.`claimcheck.session` = '{quoted}'"):
        if run.data.tags.get("claimcheck.records") == key and run.info.status == "FINISHED":
            return run.info.run_id
    return None


def _log_or_fail(client: Any, rid: str, plan: RunPlan) -> None:
    """Log the plan into the run and mark it FINISHED; on any failure mark it FAILED (KILLED when
    interrupted) and refuse, so no incomplete run is ever reported as logged."""
    from mlflow.entities import RunStatus

    try:
        _log(client, rid, plan)
        client.set_terminated(rid, RunStatus.to_string(RunStatus.FINISHED), end_time=plan.end)
    except BaseException as exc:
        status = RunStatus.FAILED if isinstance(exc, Exception) else RunStatus.KILLED
        with contextlib.suppress(Exception):
            client.set_terminated(rid, RunStatus.to_string(status), end_time=plan.end)
        if not isinstance(exc, Exception):
            raise
        raise ExportRefused(
            f"logging MLflow run {rid} failed, so the run is marked FAILED (an incomplete run, not an export): "
            f"{type(exc).__name__}: {visible(exc)}"
        ) from None


def _mlflow_metrics(frozen: dict[str, StageRecord], end: int, names: Names) -> list[Any]:
    """The locked-test comparison (one value each) and the training curves (one value per step)."""
    from mlflow.entities import Metric

    art = frozen.get("artifact")
    metrics: list[Metric] = []
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison) if art else None
    if comp is not None:
        for arm, v in comp.values.items():
            metrics.append(Metric(names.key(f"test.{comp.metric}.{arm}"), float(v), end, 0))
        for versus, d in comp.differences.items():
            metrics.append(Metric(names.key(f"test.{comp.metric}.diff.{versus}"), d.estimate, end, 0))
            if d.lo is not None and d.hi is not None:
                metrics.append(Metric(names.key(f"test.{comp.metric}.diff.{versus}.lo"), d.lo, end, 0))
                metrics.append(Metric(names.key(f"test.{comp.metric}.diff.{versus}.hi"), d.hi, end, 0))
    disp = frozen.get("dispatch")
    curve = parse(disp.check("dispatch.loss_curve"), training_shapes.LossCurve) if disp else None
    if curve is not None:
        metrics += [
            Metric(names.key("train.loss"), float(v), end, int(s))
            for s, v in zip(curve.step, curve.loss, strict=False)
        ]
    dev = parse(disp.check("dispatch.dev_metric"), training_shapes.DevMetric) if disp else None
    if dev is not None:
        name = names.key(f"dev.{dev.metric}")
        metrics += [Metric(name, float(v), end, int(s)) for s, v in zip(dev.step, dev.value, strict=False)]
    return metrics


def _mlflow_datasets(session: Session, frozen: dict[str, StageRecord]) -> list[Any]:
    """The source files as MLflow datasets whose digest is the file's sha256."""
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    src = frozen.get("source")
    sums = parse(src.check("source.checksum"), data_shapes.Checksum) if src else None
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


def _mlflow_artifacts(session_dir: Path) -> list[tuple[str, str]]:
    """The records and session.toml, the report if written, and each job's small files."""
    out = [
        (str(session_dir / spec.file_name), "records")
        for spec in registry.STAGES
        if (session_dir / spec.file_name).exists()
    ]
    out.append((str(session_dir / "session.toml"), "records"))
    out += [(str(session_dir / n), "report") for n in REPORT_FILES if (session_dir / n).exists()]
    jobs = session_dir / "jobs"
    for job in sorted(jobs.iterdir()) if jobs.is_dir() else []:
        out += [(str(job / n), f"jobs/{job.name}") for n in _JOB_FILES if (job / n).is_file()]
    return out

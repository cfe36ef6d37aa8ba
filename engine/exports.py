"""Exports of a session to other tools' formats, each built and validated by that tool's own library.

    model_card(session_dir)   a Hugging Face model card (README.md with YAML front matter), built with
                              huggingface_hub's ModelCard / ModelCardData / EvalResult and read back
                              by the same library before it is written.
    croissant(session_dir)    Croissant 1.x JSON-LD of the source data with the Responsible-AI fields
                              the session can fill, built with mlcroissant and read back as an
                              mlcroissant.Dataset (extra [croissant]).
    mlflow_export(session_dir) one MLflow run in a tracking store (extra [mlflow], mlflow-skinny 3.x).

Every export first refuses a session that fails the integrity checks (`verify_for_export`, the one
place that decides it), shows only figures from frozen, non-stale stages, and is deterministic: the
same session gives the same bytes (nothing here reads the clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import coverage as CV
from engine import registry
from engine.errors import ClaimcheckError
from engine.evidence import REPORT_FILES, StageRecord, atomic_write_text
from engine.model_card import model_card_data
from engine.session import Session
from engine.shapes import artifact as A
from engine.shapes import data as D
from engine.shapes import parse
from engine.shapes import training as T
from engine.textsafe import visible


class ExportRefused(ClaimcheckError):
    """The session fails its integrity checks: nothing is exported from it."""


# ---------------------------------------------------------------- integrity


def verify_for_export(session_dir: Path) -> Session:
    """Open the session and refuse it when a record was edited, a pinned file changed, a write was
    half done or a signature does not verify (engine.integrity.verify, the checks replay and the
    report run). A stale chain is not refused: stale stages are shown as such and give no figures."""
    from engine import integrity

    session = Session.open(Path(session_dir))
    problems = [
        f"{r.stage} {r.check}: {r.detail}"
        for r in integrity.verify(session)
        if r.outcome in ("tampered", "incomplete", "missing")
    ]
    if problems:
        raise ExportRefused(
            "the session fails its integrity checks, so nothing is exported: "
            + "; ".join(problems)
            + ". Run `claimcheck --replay` on it for the full table."
        )
    return session


# ---------------------------------------------------------------- model card


def _md(text: Any) -> str:
    """Untrusted text for Markdown: hidden characters visible, table pipes and newlines neutralised."""
    return visible(str(text)).replace("|", "\\|").replace("\n", " ")


def _frozen(session: Session, records: dict[str, StageRecord], name: str) -> StageRecord | None:
    rec = records.get(name)
    return rec if rec is not None and session.states().get(name) == "frozen" else None


@dataclass
class _Card:
    """A session as the card reads it: records and states read once."""

    session: Session
    records: dict[str, StageRecord]
    states: dict[str, str]

    def frozen(self, name: str) -> StageRecord | None:
        rec = self.records.get(name)
        return rec if rec is not None and self.states.get(name) == "frozen" else None

    def state(self, name: str) -> str:
        return self.states.get(name, "not_run")

    def effective(self) -> dict[str, Any] | None:
        con = self.frozen("contract")
        eff = parse(con.check("contract.effective"), T.Effective) if con else None
        return eff.effective if eff else None


_MODEL_KEYS = ("model_path", "hub_revision", "model_sha256", "task_kind", "adapter_mode", "precision")
_CONTRACT_KEYS = (
    "objective",
    "max_length",
    "micro_batch",
    "grad_accum",
    "effective_batch",
    "max_steps",
    "optimizer_steps",
    "epochs",
    "seed",
    "checkpoint_selection",
    "stopping_rule",
)


def _settings(e: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [f"- {key.replace('_', ' ')}: {_md(e[key])}" for key in keys if e.get(key) not in (None, "")]


def _card_model(card: _Card) -> list[str]:
    lines = ["## Model details", ""]
    e = card.effective()
    if e is None:
        return lines + [f"No training contract is established (contract stage: {card.state('contract')})."]
    con = card.frozen("contract")
    dig = parse(con.check("contract.digest"), T.Digest)
    lines += _settings(e, _MODEL_KEYS)
    return lines + ([f"- contract digest: `{_md(dig.digest)}`"] if dig is not None else [])


def _card_data(card: _Card) -> list[str]:
    lines = ["", "## Training data", ""]
    src = card.frozen("source")
    sums = parse(src.check("source.checksum"), D.Checksum) if src else None
    if src is None or sums is None:
        lines.append(f"No source stage is established (source stage: {card.state('source')}).")
    else:
        for f in sums.files:
            lines.append(f"- file `{_md(Path(f.path).name)}`: sha256 `{f.sha256}`, {f.bytes:,} bytes")
        lines.append(f"- licence: {_md(src.inputs.get('license', '') or 'not recorded')}")
        lines.append(f"- provenance: {_md(src.inputs.get('provenance', '') or 'not recorded')}")
    split = card.frozen("split")
    if split is not None and split.check("split.membership") is not None:
        lines.append(f"- split: {_md(split.check('split.membership').summary)}")
    e = card.effective()
    return (
        lines
        + ["", "## Training contract", ""]
        + (["Not established."] if e is None else _settings(e, _CONTRACT_KEYS))
    )


def _card_evaluation(card: _Card) -> list[str]:
    lines = ["", "## Evaluation on the locked test", ""]
    art = card.frozen("artifact")
    comp = parse(art.check("artifact.comparison"), A.Comparison) if art else None
    if comp is None:
        return lines + [
            f"No figures: the artifact stage's locked-test comparison is not established "
            f"(artifact stage: {card.state('artifact')})."
        ]
    lines += [f"| arm | {_md(comp.metric)} |", "| --- | --- |"]
    lines += [f"| {_md(arm)} | {v:.4f} |" for arm, v in comp.values.items()]
    lines += ["", f"Paired differences over {comp.shared_rows} shared rows (unit: {_md(comp.unit)}):", ""]
    for versus, d in comp.differences.items():
        ci = (
            f" [{d.lo:+.4f}, {d.hi:+.4f}] ({d.level:.0%}, {d.resamples} resamples)"
            if d.lo is not None
            else ""
        )
        lines.append(f"- candidate − {_md(versus)}: {d.estimate:+.4f}{ci}")
    verdict = art.check("artifact.verdict")
    return lines + (
        ["", f"Verdict ({verdict.status}): {_md(verdict.summary)}"] if verdict is not None else []
    )


def _card_limitations(card: _Card) -> list[str]:
    lines = ["", "## Limitations", ""]
    claim = card.records.get("claim")
    limits = str(claim.inputs.get("label_quality_limits", "")).strip() if claim else ""
    lines.append(f"- label quality: {_md(limits) if limits else 'unknown; that remains a limitation'}")
    for name, rec in card.records.items():
        lines += [f"- {name}: {_md(n.text)}" for n in rec.notes if n.tag == "limitation"]
    unsettled = [f"{n} ({s})" for n, s in card.states.items() if s != "frozen"]
    return lines + (["- stages not established: " + ", ".join(unsettled)] if unsettled else [])


def _card_reforms(card: _Card) -> list[str]:
    cov = CV.compute(card.records, card.states)
    lines = ["", "## REFORMS coverage", ""]
    lines.append(
        "Computed from the records (claimcheck's reviewed map of REFORMS, Kapoor et al., Science Advances 2024)."
    )
    lines += [
        "",
        "| module | items | addressed | partly | not addressed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mid, title, c in cov.module_counts():
        lines.append(
            f"| {mid}. {title} | {sum(c.values())} | {c[CV.ADDRESSED]} | {c[CV.PARTLY]} | {c[CV.NOT_ADDRESSED]} |"
        )
    missing = [f"{it.id}" for it in cov.reforms if it.level == CV.NOT_ADDRESSED]
    return lines + ["", "Not addressed by this session: " + (", ".join(missing) or "none") + "."]


def _card_body(session: Session) -> str:
    card = _Card(session, session.records(), dict(session.states()))
    meta = session.meta
    lines = [f"# {_md(meta.title or meta.id)}", ""]
    lines += [
        f"Written by claimcheck from the frozen records of session `{_md(meta.id)}`. Every figure here comes "
        "from a frozen, non-stale stage; a section without one says why.",
        "",
    ]
    for section in (_card_model, _card_data, _card_evaluation, _card_limitations, _card_reforms):
        lines += section(card)
    return visible("\n".join(lines) + "\n", keep_newlines=True)


def model_card(session_dir: Path) -> str:
    """The model card's text (README.md): YAML front matter from `ModelCardData`, then the body.

    Read back with `huggingface_hub.ModelCard` (which validates the model-index) before it is returned.
    """
    from huggingface_hub import ModelCard

    session = verify_for_export(session_dir)
    data = model_card_data(session)
    content = f"---\n{data.to_yaml()}\n---\n\n{_card_body(session)}"
    card = ModelCard(content)  # parses the front matter; a malformed model-index raises here
    expected = data.eval_results or []
    got = card.data.eval_results or []
    if [(r.metric_type, r.metric_value) for r in got] != [(r.metric_type, r.metric_value) for r in expected]:
        raise ExportRefused("the model card's model-index did not read back as written")
    return str(card)


def write_model_card(session_dir: Path, out: Path | None = None) -> Path:
    session_dir = Path(session_dir)
    path = Path(out) if out is not None else session_dir / "exports" / "model-card" / "README.md"
    text = model_card(session_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


# ---------------------------------------------------------------- Croissant


def _croissant_type(mlc: Any, dtype: str) -> Any:
    d = dtype.split("(", 1)[0]
    if d in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"):
        return mlc.DataType.INTEGER
    if d in ("Float32", "Float64", "Decimal"):
        return mlc.DataType.FLOAT
    if d == "Boolean":
        return mlc.DataType.BOOL
    if d == "Date":
        return mlc.DataType.DATE
    if d == "Datetime":
        return mlc.DataType.DATETIME
    return mlc.DataType.TEXT


def _encoding(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {
        ".csv": "text/csv",
        ".jsonl": "application/jsonlines",
        ".json": "application/json",
        ".parquet": "application/x-parquet",
    }.get(suffix, "application/octet-stream")


def croissant(session_dir: Path) -> dict[str, Any]:
    """Croissant 1.x JSON-LD of the session's source data, built with mlcroissant and validated by
    reading it back as an `mlcroissant.Dataset` (which raises on any validation error)."""
    import mlcroissant as mlc

    session = verify_for_export(session_dir)
    records = session.records()
    states = dict(session.states())
    src = _frozen(session, records, "source")
    if src is None:
        raise ExportRefused(
            f"no Croissant description without a frozen source stage (source stage: {states.get('source', 'not_run')})"
        )
    sums = parse(src.check("source.checksum"), D.Checksum)
    schema = parse(src.check("source.schema"), D.Schema)
    if sums is None or schema is None:
        raise ExportRefused("the source record holds no checksum or schema check")
    used = set(src.inputs.get("input_columns", []) or []) | {str(src.inputs.get("label_column", ""))}
    distribution, record_sets = [], []
    for i, f in enumerate(sums.files):
        fid = f"file-{i}" if len(sums.files) > 1 else "source-file"
        distribution.append(
            mlc.FileObject(
                id=fid,
                name=visible(Path(f.path).name),
                content_url=visible(f.path),
                content_size=f"{f.bytes} B",
                encoding_formats=[_encoding(f.path)],
                sha256=f.sha256,
            )
        )
        fields = [
            mlc.Field(
                id=f"records/{col}" if i == 0 else f"records-{i}/{col}",
                name=visible(col),
                description=("a model input or the target" if col in used else "not a model input"),
                data_types=[_croissant_type(mlc, dtype)],
                source=mlc.Source(file_object=fid, extract=mlc.Extract(column=col)),
            )
            for col, dtype in schema.columns.items()
        ]
        record_sets.append(
            mlc.RecordSet(id="records" if i == 0 else f"records-{i}", name="records", fields=fields)
        )
    claim = records.get("claim")
    notes = [n.text for rec in records.values() for n in rec.notes if n.tag == "limitation"]
    warns = [
        f"{c.id}: {c.summary}" for c in src.checks if c.status in ("warn", "fail") and c.id != "source.schema"
    ]
    sensitive = src.check("source.sensitive_columns")
    transformations = src.check("source.transformations")
    meta = session.meta
    metadata = mlc.Metadata(
        name=visible(f"claimcheck-{meta.id}-source"),
        description=visible(
            f"Source data of claimcheck session {meta.id}: {meta.title}. Described from the frozen "
            "source record (sha256, column types, licence and provenance as recorded)."
        ),
        license=[visible(src.inputs.get("license", "") or "not recorded")],
        version=f"{src.provenance.revision}.0.0",
        distribution=distribution,
        record_sets=record_sets,
        data_collection=visible(src.inputs.get("provenance", "") or "not recorded"),
        data_preprocessing_protocol=[visible(transformations.summary)] if transformations else None,
        data_annotation_protocol=[visible(str(claim.inputs.get("target_meaning", "")))]
        if claim and claim.inputs.get("target_meaning")
        else None,
        data_biases=[visible(w) for w in warns] or None,
        data_limitations=[visible(n) for n in notes] or None,
        personal_sensitive_information=[visible(sensitive.summary)] if sensitive else None,
        data_use_cases=[visible(str(claim.inputs.get("run_scope", "")))]
        if claim and claim.inputs.get("run_scope")
        else None,
    )
    errors = list(metadata.ctx.issues.errors)
    if errors:
        raise ExportRefused("mlcroissant reports errors in the description: " + "; ".join(sorted(errors)))
    jsonld = metadata.to_json()
    mlc.Dataset(jsonld=jsonld)  # read back: raises mlcroissant's ValidationError on any error
    return jsonld


def write_croissant(session_dir: Path, out: Path | None = None) -> Path:
    import json

    session_dir = Path(session_dir)
    path = Path(out) if out is not None else session_dir / "exports" / "croissant" / "croissant.json"
    text = (
        json.dumps(croissant(session_dir), indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


# ---------------------------------------------------------------- MLflow

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

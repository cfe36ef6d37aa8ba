"""Croissant 1.x JSON-LD of a session's source data (mlcroissant, read back as a Dataset).

Column names are data: a field's `@id` is the name mapped to letters, digits, `_`, `-` and `.`
(mlcroissant refuses whitespace in an `@id`), made unique; its `name` is the column name made
visible; its `source.extract.column` the exact name, so the file is read as it is. What mlcroissant
warns about (its own logging and Python warnings) is captured, made visible and handed to the
caller, never printed raw.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import atomic_write_text
from claimcheck.engine.exports.common import ExportRefused, frozen_record, library_warnings, verify_for_export
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.textsafe import visible


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


def field_ids(columns: list[str], prefix: str) -> dict[str, str]:
    """Each column's Croissant `@id`: PREFIX/NAME with NAME mapped to [A-Za-z0-9_.-], unique."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for col in columns:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", col).strip(".") or "column"
        fid, n = f"{prefix}/{base}", 1
        while fid in taken:
            n += 1
            fid = f"{prefix}/{base}-{n}"
        taken.add(fid)
        out[col] = fid
    return out


@dataclass
class Croissant:
    """The JSON-LD and what mlcroissant warned about while building and reading it (made visible)."""

    jsonld: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def croissant(session_dir: Path) -> dict[str, Any]:
    """Croissant 1.x JSON-LD of the session's source data (see `build_croissant`)."""
    return build_croissant(session_dir).jsonld


def build_croissant(session_dir: Path) -> Croissant:
    """Croissant 1.x JSON-LD of the session's source data, built with mlcroissant and validated by
    reading it back as an `mlcroissant.Dataset`; a validation error is refused in one message."""
    import mlcroissant as mlc

    out = Croissant({})
    with library_warnings(out.warnings, "absl"):
        try:
            out.jsonld = _croissant(mlc, Path(session_dir))
        except mlc.ValidationError as exc:
            raise ExportRefused(f"mlcroissant refuses the description: {visible(exc)}") from None
    return out


def _croissant(mlc: Any, session_dir: Path) -> dict[str, Any]:
    session = verify_for_export(session_dir)
    records = session.records()
    states = dict(session.states())
    src = frozen_record(session, records, "source")
    if src is None:
        raise ExportRefused(
            f"no Croissant description without a frozen source stage (source stage: {states.get('source', 'not_run')})"
        )
    sums = parse(src.check("source.checksum"), data_shapes.Checksum)
    schema = parse(src.check("source.schema"), data_shapes.Schema)
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
        ids = field_ids(list(schema.columns), "records" if i == 0 else f"records-{i}")
        fields = [
            mlc.Field(
                id=ids[col],
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


def write_croissant(
    session_dir: Path, out: Path | None = None, warn: Callable[[str], None] | None = None
) -> Path:
    """Write croissant.json; `warn` gets each of mlcroissant's warnings (made visible)."""
    import json

    session_dir = Path(session_dir)
    path = Path(out) if out is not None else session_dir / "exports" / "croissant" / "croissant.json"
    built = build_croissant(session_dir)
    for message in built.warnings:
        (warn or (lambda _m: None))(message)
    text = json.dumps(built.jsonld, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path

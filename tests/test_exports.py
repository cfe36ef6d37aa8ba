"""Exports (engine/exports/): the Hugging Face model card, built and read back by huggingface_hub,
deterministic, refusing a session that fails its integrity checks, with no figure from a stage that
is not frozen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from claimcheck.engine.exports import ExportRefused, model_card, verify_for_export
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.tui.cli import main
from tests import real_session as rs

hub = pytest.importorskip("huggingface_hub")


def test_model_card_is_built_and_read_back_by_huggingface_hub(real_workspace: Path, tmp_path: Path) -> None:
    session = rs.copy_workspace(real_workspace, tmp_path)
    assert main(["export", "model-card", str(session)]) == 0
    path = session / "exports" / "model-card" / "README.md"
    card = hub.ModelCard.load(path)  # the library's own parser and model-index validation
    comp = parse(
        Session.open(session).record("artifact").check("artifact.comparison"), artifact_shapes.Comparison
    )
    (result,) = card.data.eval_results
    assert result.metric_value == comp.values["candidate"] and result.dataset_split == "test"
    text = path.read_text()
    for heading in ("## Training data", "## Training contract", "## Evaluation on the locked test"):
        assert heading in text
    assert "## Limitations" in text and "The data is synthetic" in text
    assert "## REFORMS coverage" in text and "| 6. Data leakage | 3 | 3 | 0 | 0 |" in text
    # Deterministic: the same session gives the same bytes.
    assert model_card(session) == text


def test_model_card_refuses_an_edited_session(real_workspace: Path, tmp_path: Path) -> None:
    session = rs.copy_workspace(real_workspace, tmp_path)
    rec = session / "03-split.toml"
    rec.write_text(rec.read_text().replace("group split", "random split", 1))
    verify = pytest.raises(ExportRefused, match="integrity")
    with verify:
        verify_for_export(session)
    assert main(["export", "model-card", str(session)]) == 2
    assert not (session / "exports").exists()


def test_model_card_without_a_frozen_artifact_has_no_figures(
    real_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = rs.copy_workspace(real_workspace, tmp_path)
    real_states = Session.states

    def states(self: Session) -> dict[str, str]:
        return {**real_states(self), "artifact": "stale"}

    monkeypatch.setattr(Session, "states", states)
    text = model_card(session)
    card = hub.ModelCard(text)
    assert not card.data.eval_results
    assert (
        "No figures: the artifact stage's locked-test comparison is not established (artifact stage: stale)"
        in text
    )


def test_croissant_is_built_validated_and_readable_by_mlcroissant(
    real_workspace: Path, tmp_path: Path
) -> None:
    mlc = pytest.importorskip("mlcroissant")
    import itertools
    import json

    from claimcheck.engine.exports import croissant
    from claimcheck.engine.shapes import data as data_shapes

    session = rs.copy_workspace(real_workspace, tmp_path)
    assert main(["export", "croissant", str(session)]) == 0
    path = session / "exports" / "croissant" / "croissant.json"
    doc = json.loads(path.read_text())
    rec = Session.open(session).record("source")
    sums = parse(rec.check("source.checksum"), data_shapes.Checksum)
    schema = parse(rec.check("source.schema"), data_shapes.Schema)
    (fobj,) = doc["distribution"]
    assert fobj["sha256"] == sums.files[0].sha256 and fobj["encodingFormat"] == "text/csv"
    assert doc["conformsTo"].startswith("http://mlcommons.org/croissant/1.")
    assert doc["license"] and doc["rai:dataCollection"] and doc["rai:dataLimitations"]
    assert [f["name"] for f in doc["recordSet"][0]["field"]] == list(schema.columns)
    # mlcroissant's own validation, then its own reader over the real file: records with our fields.
    data_file = session.parents[1] / sums.files[0].path
    ds = mlc.Dataset(jsonld=path, mapping={"source-file": str(data_file)})
    (first,) = list(itertools.islice(ds.records("records"), 1))
    assert set(first) == {f"records/{c}" for c in schema.columns}
    # Deterministic.
    assert json.dumps(
        croissant(session), indent=2, sort_keys=True, ensure_ascii=False, default=str
    ) + "\n" == (path.read_text())


def test_mlflow_run_is_logged_and_read_back_from_a_real_local_store(
    real_workspace: Path, tmp_path: Path
) -> None:
    mlflow = pytest.importorskip("mlflow")
    from claimcheck.engine.shapes import data as data_shapes
    from claimcheck.engine.shapes import training as training_shapes

    session = rs.copy_workspace(real_workspace, tmp_path)
    store = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(session), "--tracking-uri", store]) == 0
    records = Session.open(session).records()
    client = mlflow.MlflowClient(tracking_uri=store)
    mlflow.set_tracking_uri(store)
    (run,) = mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")
    comp = parse(records["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert run.data.metrics[f"test.{comp.metric}.candidate"] == pytest.approx(comp.values["candidate"])
    assert run.data.params["claim.primary_metric"] == records["claim"].inputs["primary_metric"]
    assert run.data.tags["claimcheck.digest.artifact"] == records["artifact"].provenance.digest
    assert run.data.tags["claimcheck.verdict"].startswith(
        records["artifact"].check("artifact.verdict").status
    )
    curve = parse(records["dispatch"].check("dispatch.loss_curve"), training_shapes.LossCurve)
    history = client.get_metric_history(run.info.run_id, "train.loss")
    assert [(m.step, m.value) for m in history] == pytest.approx(
        list(zip(curve.step, curve.loss, strict=True))
    )
    sums = parse(records["source"].check("source.checksum"), data_shapes.Checksum)
    (ds,) = run.inputs.dataset_inputs
    assert ds.dataset.digest == sums.files[0].sha256
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "records")}
    assert "records/07-artifact.toml" in paths and "records/session.toml" in paths
    # One run per session: exporting again adds none.
    assert main(["export", "mlflow", str(session), "--tracking-uri", store]) == 0
    assert len(mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")) == 1


# ---------------------------------------------------------------- ordinary and hostile column names

ESC = "\x1b"
# Columns of the sample data renamed: whitespace and symbols MLflow and mlcroissant refuse in names,
# and APC / PM / SOS strings (ESC _, ESC ^, ESC X ... ESC \) a terminal would swallow.
RENAMED = {
    "channel": "unit price ($)",
    "product": f"apc{ESC}_evil-apc{ESC}\\",
    "priority": f"pm{ESC}^evil-pm{ESC}\\",
    "case_id": f"sos{ESC}Xevil-sos{ESC}\\",
}


@pytest.fixture(scope="module")
def odd_columns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real session (claim, source, split, baseline by `run --answers`) whose data has the columns
    in RENAMED: `unit price ($)` an input column with an availability entry, `sos…` an entity column."""
    import csv
    import io

    from tests.test_crash import write_workspace

    ws = tmp_path_factory.mktemp("odd-columns")
    answers = write_workspace(ws)
    head, rest = (ws / "tiny.csv").read_text().split("\n", 1)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([RENAMED.get(c, c) for c in head.split(",")])
    (ws / "tiny.csv").write_text(buf.getvalue() + rest)
    text = answers.read_text().replace('"channel"', '"unit price ($)"')
    text = text.replace("\nchannel = ", '\n"unit price ($)" = ').replace(
        '"case_id"', '"sos\\u001bXevil-sos\\u001b\\\\"'
    )
    answers.write_text(text)
    assert main(["run", "--answers", str(answers), str(ws / "s")]) == 0
    return ws / "s"


def test_mlflow_maps_column_names_and_keeps_the_originals_as_tags(
    odd_columns: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlflow = pytest.importorskip("mlflow")
    from mlflow.utils.validation import validate_param_and_metric_name

    store = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(odd_columns), "--tracking-uri", store]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("logged MLflow run ") and ESC not in out + err
    mlflow.set_tracking_uri(store)
    (run,) = mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")
    assert run.info.status == "FINISHED"
    inputs = Session.open(odd_columns).record("source").inputs
    assert len(run.data.params) >= len(inputs["availability"])
    assert all(validate_param_and_metric_name(k) for k in run.data.params)
    (key,) = [k for k in run.data.params if k.startswith("source.availability.unit price")]
    assert key != "source.availability.unit price ($)"
    assert run.data.params[key] == inputs["availability"]["unit price ($)"]
    assert run.data.tags[f"claimcheck.original.{key}"] == "source.availability.unit price ($)"
    # The entity column with an SOS string: the list's text, no raw escape in it.
    entity = run.data.params["source.entity_columns"]
    assert "sos\\x1bXevil-sos" in entity and ESC not in entity
    assert main(["export", "mlflow", str(odd_columns), "--tracking-uri", store]) == 0
    assert len(mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")) == 1


def test_a_failed_mlflow_logging_marks_the_run_failed_and_is_never_reported_logged(
    odd_columns: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store whose artifact location cannot be written (a path under a plain file): the run is
    created, logging its artifacts fails; it is marked FAILED, and the second call does not report
    success on it either."""
    mlflow = pytest.importorskip("mlflow")
    (tmp_path / "plain-file").write_text("not a folder")
    store = (tmp_path / "mlruns").as_uri()
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = mlflow.MlflowClient(tracking_uri=store)
    client.create_experiment("claimcheck", artifact_location=str(tmp_path / "plain-file" / "artifacts"))
    for _ in range(2):
        assert main(["export", "mlflow", str(odd_columns), "--tracking-uri", store]) == 2
        out, err = capsys.readouterr()
        assert "logged MLflow run" not in out + err and "Traceback" not in err
        (line,) = err.strip().splitlines()[-1:]
        assert "marked FAILED" in line and "NotADirectoryError" in line
    mlflow.set_tracking_uri(store)
    runs = mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FAILED"}


def test_croissant_maps_field_ids_and_reads_the_real_file(
    odd_columns: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlc = pytest.importorskip("mlcroissant")
    import itertools
    import json

    assert main(["export", "croissant", str(odd_columns)]) == 0
    out, err = capsys.readouterr()
    assert ESC not in out + err and "Traceback" not in err
    assert "mlcroissant warns:" in err  # its recommendations, captured and shown visibly
    path = odd_columns / "exports" / "croissant" / "croissant.json"
    doc = json.loads(path.read_text())
    fields = {f["source"]["extract"]["column"]: f for f in doc["recordSet"][0]["field"]}
    assert fields["unit price ($)"]["@id"].startswith("records/unit_price") and " " not in "".join(
        f["@id"] for f in fields.values()
    )
    assert fields["unit price ($)"]["name"] == "unit price ($)"
    apc = RENAMED["product"]
    assert fields[apc]["name"] == "apc␛_evil-apc␛\\" and ESC not in fields[apc]["@id"]
    assert len({f["@id"] for f in fields.values()}) == len(fields)
    # mlcroissant's own reader over the real file finds every column by its exact name.
    ds = mlc.Dataset(jsonld=path, mapping={"source-file": str(odd_columns.parent / "tiny.csv")})
    (first,) = list(itertools.islice(ds.records("records"), 1))
    assert set(first) == {f["@id"] for f in fields.values()}
    assert first[fields["unit price ($)"]["@id"]] in (b"email", b"chat", b"phone", b"web")

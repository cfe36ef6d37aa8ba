"""Exports (engine/exports/): the Hugging Face model card, built and read back by huggingface_hub,
deterministic, refusing a session that fails its integrity checks, with no figure from a stage that
is not frozen."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.exports import ExportRefused, model_card, verify_for_export
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as A
from claimcheck.engine.shapes import parse
from claimcheck.tui.cli import main
from tests import real_session as rs

hub = pytest.importorskip("huggingface_hub")


def test_model_card_is_built_and_read_back_by_huggingface_hub(real_workspace: Path, tmp_path: Path) -> None:
    session = rs.copy_workspace(real_workspace, tmp_path)
    assert main(["export", "model-card", str(session)]) == 0
    path = session / "exports" / "model-card" / "README.md"
    card = hub.ModelCard.load(path)  # the library's own parser and model-index validation
    comp = parse(Session.open(session).record("artifact").check("artifact.comparison"), A.Comparison)
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
    from claimcheck.engine.shapes import data as D

    session = rs.copy_workspace(real_workspace, tmp_path)
    assert main(["export", "croissant", str(session)]) == 0
    path = session / "exports" / "croissant" / "croissant.json"
    doc = json.loads(path.read_text())
    rec = Session.open(session).record("source")
    sums = parse(rec.check("source.checksum"), D.Checksum)
    schema = parse(rec.check("source.schema"), D.Schema)
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
    from claimcheck.engine.shapes import data as D
    from claimcheck.engine.shapes import training as T

    session = rs.copy_workspace(real_workspace, tmp_path)
    store = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(session), "--tracking-uri", store]) == 0
    records = Session.open(session).records()
    client = mlflow.MlflowClient(tracking_uri=store)
    mlflow.set_tracking_uri(store)
    (run,) = mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")
    comp = parse(records["artifact"].check("artifact.comparison"), A.Comparison)
    assert run.data.metrics[f"test.{comp.metric}.candidate"] == pytest.approx(comp.values["candidate"])
    assert run.data.params["claim.primary_metric"] == records["claim"].inputs["primary_metric"]
    assert run.data.tags["claimcheck.digest.artifact"] == records["artifact"].provenance.digest
    assert run.data.tags["claimcheck.verdict"].startswith(
        records["artifact"].check("artifact.verdict").status
    )
    curve = parse(records["dispatch"].check("dispatch.loss_curve"), T.LossCurve)
    history = client.get_metric_history(run.info.run_id, "train.loss")
    assert [(m.step, m.value) for m in history] == pytest.approx(
        list(zip(curve.step, curve.loss, strict=True))
    )
    sums = parse(records["source"].check("source.checksum"), D.Checksum)
    (ds,) = run.inputs.dataset_inputs
    assert ds.dataset.digest == sums.files[0].sha256
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "records")}
    assert "records/07-artifact.toml" in paths and "records/session.toml" in paths
    # One run per session: exporting again adds none.
    assert main(["export", "mlflow", str(session), "--tracking-uri", store]) == 0
    assert len(mlflow.search_runs(experiment_names=["claimcheck"], output_format="list")) == 1

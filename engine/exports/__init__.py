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

One module per export: card.py, croissant_ld.py, mlflow_run.py; common.py holds the integrity gate.
"""

from __future__ import annotations

from claimcheck.engine.exports.card import model_card, write_model_card
from claimcheck.engine.exports.common import ExportRefused, verify_for_export
from claimcheck.engine.exports.croissant_ld import croissant, write_croissant
from claimcheck.engine.exports.mlflow_run import mlflow_export

__all__ = [
    "ExportRefused",
    "croissant",
    "mlflow_export",
    "model_card",
    "verify_for_export",
    "write_croissant",
    "write_model_card",
]

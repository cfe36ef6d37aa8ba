"""The Hugging Face model card of a session (huggingface_hub ModelCard, read back before it is written)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import StageRecord, atomic_write_text
from claimcheck.engine.exports.common import ExportRefused, verify_for_export
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.report import coverage
from claimcheck.engine.report.model_card import model_card_data
from claimcheck.engine.report.render import md_escape
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as training_shapes
from claimcheck.engine.textsafe import visible


def _md(text: Any) -> str:
    """Untrusted text for Markdown (report.render.md_escape): hidden characters visible, newlines
    folded, and the characters Markdown gives meaning to escaped, so data forms no link, image,
    HTML element or table cell."""
    return md_escape(str(text))


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
        eff = parse(con.check("contract.effective"), training_shapes.Effective) if con else None
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
    dig = parse(con.check("contract.digest"), training_shapes.Digest)
    lines += _settings(e, _MODEL_KEYS)
    return lines + ([f"- contract digest: `{_md(dig.digest)}`"] if dig is not None else [])


def _card_data(card: _Card) -> list[str]:
    lines = ["", "## Training data", ""]
    src = card.frozen("source")
    sums = parse(src.check("source.checksum"), data_shapes.Checksum) if src else None
    if src is None or sums is None:
        lines.append(f"No source stage is established (source stage: {card.state('source')}).")
    else:
        for f in sums.files:
            lines.append(f"- file {_md(Path(f.path).name)}: sha256 `{f.sha256}`, {f.bytes:,} bytes")
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
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison) if art else None
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
    cov = coverage.compute(card.records, card.states)
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
            f"| {mid}. {title} | {sum(c.values())} | {c[coverage.ADDRESSED]} | {c[coverage.PARTLY]} | {c[coverage.NOT_ADDRESSED]} |"
        )
    missing = [f"{it.id}" for it in cov.reforms if it.level == coverage.NOT_ADDRESSED]
    return lines + ["", "Not addressed by this session: " + (", ".join(missing) or "none") + "."]


def _card_body(session: Session) -> str:
    card = _Card(session, session.records(), dict(session.states()))
    meta = session.meta
    lines = [f"# {_md(meta.title or meta.id)}", ""]
    lines += [
        f"Written by claimcheck from the frozen records of session {_md(meta.id)}. Every figure here comes "
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

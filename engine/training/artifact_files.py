"""The saved artifact: writing it with a manifest, verifying it, reloading it, and checking that a
reload in a fresh process predicts what training recorded (reload parity)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.training.evaluate import (
    ADAPTER_DIR,
    EFFECTIVE,
    INFERENCE_MODE,
    MODEL_CONFIG,
    MULTI_LABEL_MODE,
    TOKENIZER_DIR,
    TRAINABLE,
    Batcher,
    Encoded,
    eval_batches,
    predict,
    predicted,
    target_names,
)
from claimcheck.engine.training.jobfiles import DEV_PREDICTIONS, MANIFEST, read_contract
from claimcheck.engine.training.prepare import IGNORE
from claimcheck.engine.training.rowfiles import RowTable, find_rows, read_rows, write_rows
from claimcheck.engine.training.schema import effective

# Fields peft holds as Python sets and writes as list(set): their order follows the
# process's string-hash seed, so two identical runs would write different bytes.
_SET_FIELDS = ("target_modules", "modules_to_save", "exclude_modules", "trainable_token_indices")


def _sort_set_fields(path: Path) -> None:
    """Rewrite peft's adapter_config.json with set-valued fields sorted, so its sha256 is stable."""
    doc = json.loads(path.read_text())
    for key in _SET_FIELDS:
        if isinstance(doc.get(key), list) and all(isinstance(v, str) for v in doc[key]):
            doc[key] = sorted(doc[key])
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))


@dataclass
class Trained:
    """What the artifact is written from: the trained model, its tokenizer and contract, the dev
    rows it predicts, and which state was selected."""

    model: Any
    tok: Any
    eff: dict[str, Any]
    batcher: Batcher
    dev_b: Encoded
    selected_step: int
    selection: str
    info: dict[str, Any]


def save_artifact(final: Path, trained: Trained) -> dict[str, Any]:
    """Write the artifact folder, then its manifest (sha256 of every file, tensors, LoRA B norms)."""
    import shutil

    from safetensors.torch import save_file

    from claimcheck.engine.training.checkpoint import trainable_state

    model, tok, eff, batcher, dev_b = trained.model, trained.tok, trained.eff, trained.batcher, trained.dev_b
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = trainable_state(model)
    save_file(state, str(tmp / TRAINABLE))
    if hasattr(model, "peft_config"):
        model.save_pretrained(str(tmp / ADAPTER_DIR))
        _sort_set_fields(tmp / ADAPTER_DIR / "adapter_config.json")
    tok.save_pretrained(str(tmp / TOKENIZER_DIR))
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "to_json_string"):
        (tmp / MODEL_CONFIG).write_text(cfg.to_json_string())
    (tmp / EFFECTIVE).write_text(json.dumps(eff, indent=1, sort_keys=True, default=str))
    if dev_b.classification:
        out = predict(model, dev_b)
        proba = out["proba"]
        table = RowTable.from_columns(
            {
                "row_id": dev_b.row_ids,
                "target": target_names(dev_b, batcher.classes),
                "pred": predicted(proba, batcher.classes, dev_b.multi_label),
                "proba": proba.tolist(),
            }
        )
        write_rows(tmp / DEV_PREDICTIONS, table)
    else:
        write_rows(tmp / DEV_PREDICTIONS, sft_dev_predictions(model, dev_b))
    manifest = {
        "files": file_hashes(tmp),
        "tensors": {k: list(v.shape) for k, v in sorted(state.items())},
        "tensor_count": len(state),
        "lora_b_norms": {k: float(v.float().norm()) for k, v in sorted(state.items()) if "lora_B" in k},
        "selected_step": trained.selected_step,
        "checkpoint_selection": trained.selection,
        "inference_mode": MULTI_LABEL_MODE if dev_b.multi_label else INFERENCE_MODE,
        "classes": batcher.classes,
        "model_info": trained.info,
        "written_at": time.time(),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return manifest


def file_hashes(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        p.relative_to(folder).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def verify_artifact(final: Path) -> dict[str, Any]:
    """Recompute identity: files vs manifest, tensors parse with recorded shapes, LoRA B norms > 0."""
    from safetensors import safe_open

    final = Path(final)
    try:
        manifest = json.loads((final / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return {"ok": False, "problems": [f"manifest unreadable: {exc}"], "files": 0}
    problems: list[str] = []
    now = file_hashes(final)
    recorded = manifest.get("files", {})
    for rel, meta in recorded.items():
        if rel not in now:
            problems.append(f"{rel} missing")
        elif now[rel]["sha256"] != meta["sha256"]:
            problems.append(
                f"{rel} sha256 {now[rel]['sha256'][:12]} ≠ recorded {meta['sha256'][:12]} "
                f"({now[rel]['bytes']} vs {meta['bytes']} bytes)"
            )
    extra = sorted(set(now) - set(recorded))
    if extra:
        problems.append(f"files not in the manifest: {extra[:5]}")
    shapes: dict[str, list[int]] = {}
    lora_b: dict[str, float] = {}
    try:
        with safe_open(str(final / TRAINABLE), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                t = fh.get_tensor(key)
                shapes[key] = list(t.shape)
                if "lora_B" in key:
                    lora_b[key] = float(t.float().norm())
    except Exception as exc:  # a truncated or corrupt file: identity fails, with the reason
        problems.append(f"{TRAINABLE} cannot be read: {type(exc).__name__}: {exc}")
    if shapes and shapes != manifest.get("tensors"):
        problems.append("tensor names/shapes differ from the manifest")
    zero_b = sorted(k for k, v in lora_b.items() if not v > 0)
    if zero_b:
        problems.append(f"{len(zero_b)} LoRA B matrices have norm 0 (adapter never trained): {zero_b[:3]}")
    return {
        "ok": not problems,
        "problems": problems,
        "files": len(recorded),
        "file_sha256": {k: v["sha256"] for k, v in recorded.items()},
        "tensor_count": len(shapes),
        "tensor_count_recorded": int(manifest.get("tensor_count", -1)),
        "lora_b_matrices": len(lora_b),
        "lora_b_min_norm": min(lora_b.values()) if lora_b else -1.0,
        "manifest": manifest,
    }


def load_artifact(
    final: Path, workspace: Path, device: str = "cpu"
) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """Rebuild the contracted model, load the trained tensors, use the saved tokenizer.

    Returns (model, tokenizer, effective, load report with missing / unexpected keys).
    """
    from transformers import AutoTokenizer

    from claimcheck.engine.training.checkpoint import load_trainable
    from claimcheck.engine.training.models import build

    final = Path(final)
    eff = json.loads((final / EFFECTIVE).read_text())
    classes, is_cls = list(effective(eff).label_classes), effective(eff).is_classification
    model, _, _ = build(eff, num_labels=len(classes) if is_cls else None, workspace=workspace, device=device)
    missing, unexpected = load_trainable(model, final / TRAINABLE)
    tok = AutoTokenizer.from_pretrained(
        str(final / TOKENIZER_DIR), local_files_only=True, trust_remote_code=False
    )
    model.eval()
    return model, tok, eff, {"missing": missing, "unexpected": unexpected}


def build_base(eff: dict[str, Any], workspace: Path, device: str = "cpu") -> tuple[Any, Any]:
    """The unchanged base model under the same contract: untouched weights, untrained adapter (LoRA B = 0)
    and, for a classification head, the seeded random initialisation — a chance-level head."""
    from claimcheck.engine.training.models import build

    classes, is_cls = list(effective(eff).label_classes), effective(eff).is_classification
    model, tok, _ = build(
        eff, num_labels=len(classes) if is_cls else None, workspace=workspace, device=device
    )
    model.eval()
    return model, tok


def recorded_mode(final: Path) -> str:
    """The inference mode the artifact's manifest names (the batching its dev predictions were made with)."""
    return str(json.loads((Path(final) / MANIFEST).read_text()).get("inference_mode") or INFERENCE_MODE)


def sft_dev_predictions(model: Any, enc: Encoded, mode: str = INFERENCE_MODE) -> RowTable:
    """Per SFT dev row, at every supervised position: the arg-max next token ("pred") and the
    probability the model gives the reference token ("proba") — what reload parity compares."""
    import torch

    model.eval()
    preds: list[Any] = [None] * enc.n
    probas: list[Any] = [None] * enc.n
    with torch.no_grad():
        for idx in eval_batches(enc, mode=mode):
            batch = enc.batch(idx, with_labels=True)
            labels = batch.pop("labels")
            logp = torch.log_softmax(model(**batch).logits.float(), dim=-1)
            for j, i in enumerate(idx):
                target = labels[j, 1:]
                keep = target != IGNORE
                lp = logp[j, :-1][keep]
                preds[i] = lp.argmax(dim=-1).tolist()
                probas[i] = lp.gather(1, target[keep].unsqueeze(1)).squeeze(1).exp().double().tolist()
    return RowTable.from_columns({"row_id": [int(r) for r in enc.row_ids], "pred": preds, "proba": probas})


def _sft_parity(model: Any, enc: Encoded, recorded: Any, mode: str) -> dict[str, Any]:
    """Reload parity for SFT: the same arg-max tokens and reference-token probabilities per dev row."""
    import numpy as np

    now = sft_dev_predictions(model, enc, mode)
    rec = {int(r): (p, q) for r, p, q in recorded.select("row_id", "pred", "proba").iter_rows()}
    missing, mismatched, max_diff = 0, [], 0.0
    for r, p, q in now.iter_rows():
        if r not in rec:
            missing += 1
            continue
        rp, rq = rec[r]
        if list(p) != list(rp):
            mismatched.append(r)
        if len(q) == len(rq) and q:
            max_diff = max(max_diff, float(np.abs(np.asarray(q) - np.asarray(rq)).max()))
    return {"rows": now.height, "missing": missing, "mismatched": mismatched, "max_diff": max_diff}


# ---------------------------------------------------------------- reload parity (run in a fresh process)


def reload_parity(
    final: Path, job_dir: Path, workspace: Path, tolerance: float, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Reload the artifact, predict the retained dev rows, compare with the predictions recorded
    at the end of training. `overrides` changes effective settings at serving time (a test uses
    it to plant a training-serving skew)."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    final, job_dir = Path(final), Path(job_dir)
    model, tok, eff, report = load_artifact(final, workspace)
    eff = {**eff, **(overrides or {})}
    mode = recorded_mode(final)
    recorded = read_rows(find_rows(final, Path(DEV_PREDICTIONS).stem))
    dev = read_rows(job_dir / read_contract(job_dir)["data"]["dev"])
    classes = list(effective(eff).label_classes)
    enc = Batcher(eff, tok, classes, "cpu").prepare(dev, rendered=True)
    if not enc.classification:
        sft = _sft_parity(model, enc, recorded, mode)
        return _parity_result(
            sft["rows"],
            sft["rows"] - sft["missing"],
            sft["missing"],
            sft["mismatched"],
            sft["max_diff"],
            tolerance,
            report,
            mode,
        )
    proba = predict(model, enc, mode=mode)["proba"]
    rec_by_row = {int(r): i for i, r in enumerate(recorded["row_id"].to_list())}
    order = [rec_by_row.get(r, -1) for r in enc.row_ids]
    missing = sum(1 for o in order if o < 0)
    keep = [i for i, o in enumerate(order) if o >= 0]
    rec_proba = np.asarray(recorded["proba"].to_list(), dtype=np.float64)[[order[i] for i in keep]]
    new_pred = predicted(proba[keep], classes, enc.multi_label)
    rec_pred = [recorded["pred"][order[i]] for i in keep]
    mismatched = [
        enc.row_ids[keep[i]] for i, (a, b) in enumerate(zip(new_pred, rec_pred, strict=True)) if a != b
    ]
    max_diff = float(np.abs(proba[keep] - rec_proba).max()) if keep else math.nan
    return _parity_result(len(enc.row_ids), len(keep), missing, mismatched, max_diff, tolerance, report, mode)


def _parity_result(
    rows: int,
    compared: int,
    missing: int,
    mismatched: list,
    max_diff: float,
    tolerance: float,
    report: dict,
    mode: str,
) -> dict[str, Any]:
    return {
        "rows": rows,
        "compared": compared,
        "missing_recorded": missing,
        "prediction_mismatches": len(mismatched),
        "mismatched_row_ids": [str(r) for r in mismatched[:20]],  # row ids may be ints or strings
        "max_abs_proba_diff": max_diff,
        "tolerance": tolerance,
        "ok": bool(compared) and not missing and not mismatched and max_diff <= tolerance,
        "missing_keys": report["missing"],
        "unexpected_keys": report["unexpected"],
        "inference_mode": mode,
    }


def _main(argv: list[str]) -> int:
    """python -m claimcheck.engine.training.artifact_files parity FINAL JOB_DIR WORKSPACE TOLERANCE OUT_JSON [OVERRIDES_JSON]"""
    if len(argv) < 6 or argv[0] != "parity":
        print(_main.__doc__)
        return 2
    overrides = json.loads(argv[6]) if len(argv) > 6 else None
    out = reload_parity(Path(argv[1]), Path(argv[2]), Path(argv[3]), float(argv[4]), overrides)
    Path(argv[5]).write_text(json.dumps(out))
    return 0


def parity_in_fresh_process(
    final: Path,
    job_dir: Path,
    workspace: Path,
    tolerance: float,
    overrides: dict[str, Any] | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """Run reload_parity in a new Python process: nothing from the training process is reused."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "parity.json"
        cmd = [
            sys.executable,
            "-m",
            "claimcheck.engine.training.artifact_files",
            "parity",
            str(final),
            str(job_dir),
            str(workspace),
            repr(float(tolerance)),
            str(out),
        ]
        if overrides:
            cmd.append(json.dumps(overrides))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout)[-400:]
            return {"ok": False, "error": f"reload process exited {proc.returncode}: {tail}"}
        return json.loads(out.read_text())


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))

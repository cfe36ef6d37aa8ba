"""Checkpoints a job can resume from: trainable weights, optimizer, scheduler, scaler, RNG, progress.

Layout of one checkpoint (written to a temporary folder, then renamed, so a killed job never
leaves a half checkpoint under its final name):

    checkpoints/step-000040/
        trainable.safetensors   adapter / head (every parameter with requires_grad)
        optimizer.pt scheduler.pt scaler.pt rng_state.pt
        trainer_state.json      written last: step, micro-batch position, best dev metric

Everything is read back with torch.load(weights_only=True): nothing from a session folder is
unpickled as arbitrary objects.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

TRAINABLE = "trainable.safetensors"
STATE = "trainer_state.json"
PREFIX = "step-"


def trainable_state(model: Any) -> dict[str, Any]:
    """Every trainable parameter by its name in the model (adapter, head, or all for full)."""
    return {n: p.detach().contiguous().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable(model: Any, path: Path) -> tuple[list[str], list[str]]:
    """Copy saved trainable tensors into the model. Returns (missing, unexpected) key lists."""
    import torch
    from safetensors.torch import load_file

    saved = load_file(str(path))
    params = dict(model.named_parameters())
    expected = {n for n, p in params.items() if p.requires_grad}
    missing = sorted(expected - set(saved))
    unexpected = sorted(set(saved) - set(params))
    with torch.no_grad():
        for name, tensor in saved.items():
            if name in params and params[name].shape == tensor.shape:
                params[name].copy_(tensor.to(params[name].device, params[name].dtype))
            elif name in params:
                unexpected.append(f"{name} (shape {tuple(tensor.shape)} vs {tuple(params[name].shape)})")
    return missing, unexpected


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype("uint32"), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(
    root: Path, step: int, model: Any, optimizer: Any, scheduler: Any, scaler: Any, progress: dict
) -> Path:
    import torch
    from safetensors.torch import save_file

    final = root / f"{PREFIX}{step:06d}"
    tmp = root / f".tmp-{PREFIX}{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(trainable_state(model), str(tmp / TRAINABLE))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(scaler.state_dict() if scaler is not None else {}, tmp / "scaler.pt")
    torch.save(rng_state(), tmp / "rng_state.pt")
    (tmp / STATE).write_text(json.dumps({**progress, "step": step}, indent=1))
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def complete(root: Path) -> list[Path]:
    """Complete checkpoints (trainer_state.json present), oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith(PREFIX) and (p / STATE).is_file()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) :]))


def load(path: Path, model: Any, optimizer: Any, scheduler: Any, scaler: Any) -> dict:
    """Restore a checkpoint into live objects; returns its trainer_state."""
    import torch

    missing, unexpected = load_trainable(model, path / TRAINABLE)
    if missing or unexpected:
        raise RuntimeError(
            f"checkpoint {path.name} does not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    if scaler is not None:
        scaler_state = torch.load(path / "scaler.pt", weights_only=True)
        if scaler_state:
            scaler.load_state_dict(scaler_state)
    set_rng_state(torch.load(path / "rng_state.pt", weights_only=True))
    return json.loads((path / STATE).read_text())

"""What this machine can do, as the contract's resolution asks it: a visible GPU, bf16 on it, a
working NF4 round trip per device. Probes are cached per process; tests pass a faked Capability.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass


@functools.lru_cache(maxsize=4)
def _bnb_usable(device: str) -> tuple[bool, str]:
    """Can bitsandbytes quantise to NF4 and back on this device? A real round trip, not an import."""
    try:
        import bitsandbytes.functional as bnbf
        import torch

        x = torch.randn(64, 64, dtype=torch.bfloat16, device=device)
        q, state = bnbf.quantize_4bit(x, quant_type="nf4")
        err = float((bnbf.dequantize_4bit(q, state) - x).abs().mean())
        if not math.isfinite(err) or err > 0.5:
            return False, f"bitsandbytes NF4 round trip on {device} is wrong (mean error {err:.3f})"
        return True, ""
    except Exception as exc:  # noqa: BLE001 - any failure means 4-bit is unusable here
        return False, f"bitsandbytes cannot quantise to 4-bit on {device}: {type(exc).__name__}: {exc}"


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _bf16_supported(device: str) -> bool:
    import torch

    return device == "cuda" and bool(torch.cuda.is_bf16_supported())


@dataclass(frozen=True)
class Capability:
    """What this machine can do, as resolve() asks it: a visible GPU, bf16 on it, a working NF4
    round trip per device. `probe()` asks the real hardware; tests pass a faked one."""

    cuda: bool
    bf16: bool  # bf16 autocast on the GPU
    name: str = ""  # the GPU's name, for the record

    def nf4(self, device: str) -> tuple[bool, str]:
        return _bnb_usable(device if device in ("cpu", "cuda") else "cpu")


def probe() -> Capability:
    has = cuda_available()
    name = ""
    if has:
        import torch

        name = str(torch.cuda.get_device_name(0))
    return Capability(cuda=has, bf16=_bf16_supported("cuda") if has else False, name=name)

"""The prepared GPU script (bench/gpu.sh -> bench/gpu_run.py) runs only when a device is lent, which is
rare: its contracts are checked here on every run, so that a change to the recipe or the contract schema
breaks this test and not the one short GPU run (twice it did: a recipe key removed, then a new optional
table written as None). Only the contracts are built and written; training is bench/gpu.sh --dry-run's."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

from claimcheck.engine.evidence import digest_of
from claimcheck.engine.training.jobfiles import read_contract, write_job_dir
from claimcheck.engine.training.schema import effective

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_run():
    spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "bench" / "gpu_run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_run"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_run", None)


def _args() -> argparse.Namespace:
    # gpu_run.main's --dry-run sizes
    return argparse.Namespace(
        steps=3, warmup=1, rows=32, dev_rows=8, threads=1, sft_batch=2, sft_length=384, encoder_full=False
    )


@pytest.mark.parametrize("which", ["text-cls-qlora", "sft-qlora-llama"])
def test_gpu_script_contracts_are_valid_job_contracts(gpu_run, which: str, tmp_path: Path) -> None:
    a = _args()
    if which == "text-cls-qlora":
        eff = gpu_run._recipe_effective("cuda", a)
        assert eff["text_template"] == "{subject}\n{body}"  # derived from the recipe's text columns
    else:
        eff = gpu_run._sft_effective(tmp_path / "llama", "cuda", a)
    assert (eff["adapter_mode"], eff["precision"], eff["attn_implementation"]) == ("qlora", "bf16", "sdpa")
    kind = eff["task_kind"]
    job = tmp_path / which
    write_job_dir(
        job,
        effective=eff,
        digest=digest_of(eff),
        op_id=which,
        attempt=1,
        train=gpu_run._frames(kind, a.rows),
        dev=gpu_run._frames(kind, a.dev_rows, offset=a.rows),
        workspace=ROOT,
        runtime={"heartbeat_seconds": 1.0, "threads": a.threads},
    )
    # What the job will read back is the contract the script asked for.
    assert effective(read_contract(job)).model_dump(exclude_none=True) == eff

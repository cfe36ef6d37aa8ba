"""The GPU run's package set is one list (bench/gpu_wheels.txt for what is shipped, bench/gpu_machine.txt
for what the GPU machine has): the download, the rehearsal and gpu.sh's dependency check all read it
through bench/gpu_deps.py, so they cannot name different packages. No network."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture(scope="module")
def deps():
    spec = importlib.util.spec_from_file_location("gpu_deps", BENCH / "gpu_deps.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_deps"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gpu_deps", None)


def test_the_lists_name_the_packages_the_gpu_run_needs(deps) -> None:
    shipped = {p.name: p for p in deps.pins("shipped")}
    machine = {p.name: p for p in deps.pins("machine")}
    assert {"bitsandbytes", "pydantic", "pydantic_core", "tomlkit"} <= set(shipped)
    assert set(machine) == {"torch", "transformers", "peft", "accelerate", "safetensors"}
    assert (machine["torch"].version, machine["transformers"].version) == ("2.11.0", "5.17.0")
    assert not set(shipped) & set(machine)
    assert not any("polars" in n for n in (*shipped, *machine))  # too big to ship; the job runs without it
    # the shipped versions are the project's pins
    pinned = dict(
        line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    norm = {k.lower().replace("-", "_"): v for k, v in pinned.items()}
    for p in shipped.values():
        assert norm[p.name.lower().replace("-", "_")] == p.version, p


def test_the_scripts_download_install_and_check_that_list() -> None:
    wheels = (BENCH / "gpu_wheels.sh").read_text()
    rehearsal = (BENCH / "gpu_rehearsal.sh").read_text()
    gpu = (BENCH / "gpu.sh").read_text()
    assert "gpu_deps.py requirements shipped" in wheels and "--no-deps" in wheels
    assert "--python-version 3.12" in wheels and "gpu_deps.py wheels" in wheels
    assert "gpu_deps.py requirements machine" in rehearsal and "bench/gpu_wheels.sh" in rehearsal
    assert '--no-index --no-deps --target "$WORK/site" "$WORK/wheels"/*.whl' in rehearsal
    assert "gpu.sh --dry-run" in rehearsal and 'GPU_SITE="$WORK/site"' in rehearsal
    assert "bench/gpu_deps.py check" in gpu and "pip install" not in gpu.replace(
        "`pip install --no-index", ""
    )
    readme = (BENCH / "README.md").read_text()
    assert "pip install --no-index --no-deps --target bench/.gpu_site bench/.gpu_wheels/*.whl" in readme


def test_a_wheel_folder_must_hold_exactly_the_shipped_wheels(deps, tmp_path: Path) -> None:
    for p in deps.pins("shipped"):
        (tmp_path / f"{p.name.replace('-', '_')}-{p.version}-py3-none-any.whl").write_bytes(b"w")
    assert deps.wheel_problems(tmp_path) == []
    assert deps.main(["wheels", str(tmp_path)]) == 0
    (tmp_path / "polars-2.1.0-py3-none-any.whl").write_bytes(b"w")
    assert deps.wheel_problems(tmp_path) == ["polars-2.1.0-py3-none-any.whl: not in bench/gpu_wheels.txt"]
    (tmp_path / "polars-2.1.0-py3-none-any.whl").unlink()
    (tmp_path / "tomlkit-0.15.2-py3-none-any.whl").unlink()
    assert deps.wheel_problems(tmp_path) == [f"tomlkit==0.15.2: 0 wheels in {tmp_path}"]
    big = tmp_path / "tomlkit-0.15.2-py3-none-any.whl"
    with big.open("wb") as fh:  # over the limit: a sparse file of 57 MiB
        fh.truncate(57 * 2**20)
    assert deps.main(["wheels", str(tmp_path)]) == 1


def test_the_dependency_check_names_what_is_missing(deps, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(deps.LISTS, "shipped", tmp_path / "w.txt")
    (tmp_path / "w.txt").write_text("no-such-package==1.0  # import no_such_package_xyz\n")
    assert deps.main(["check"]) == 1
    assert "missing: no-such-package: ModuleNotFoundError" in capsys.readouterr().err
    (tmp_path / "w.txt").write_text("tomlkit>=1\n")
    with pytest.raises(SystemExit, match="w.txt line 1: expected 'name==version  # import module'"):
        deps.pins("shipped")

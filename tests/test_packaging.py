"""claimcheck installs like a tool: the wheel built from this checkout, installed into a fresh virtual
environment outside it, carries one import name, its recipes, sample data and answers examples, and
runs the documented demo (CI-sized) to a verdict and replays it from an empty folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import tomlkit

from tests.real_session import ci_sized

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv*", "runs", "build", "dist", "__pycache__", "*.egg-info", "*.so", ".*_cache", ".hypothesis"
)

pytestmark = pytest.mark.slow  # builds a wheel and trains a tiny model (about two minutes)


def _run(cmd: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel (its dependencies seen through this test run's packages)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    _run([*build, "-w", str(tmp / "dist"), str(src)], tmp)
    wheel = next((tmp / "dist").glob("claimcheck-*.whl"))
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    site = next(venv.glob("lib/python3*/site-packages"))
    # the dependencies (torch, polars, ...) come from this run's environment; claimcheck does not:
    # a path added by a .pth file does not run that folder's own .pth files (the editable install's finder)
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp)
    return venv


def test_the_wheel_installs_one_import_name(installed: Path) -> None:
    files = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(installed / "bin" / "python"),
            "show",
            "-f",
            "claimcheck",
        ],
        installed,
    ).stdout
    listed = [line.strip() for line in files.split("Files:", 1)[1].splitlines() if line.strip()]
    tops = {f.split("/", 1)[0] for f in listed}
    assert "engine" not in tops and "tui" not in tops, sorted(tops)
    assert "claimcheck/engine/report/coverage_map.toml" in listed
    assert any(f.startswith("claimcheck/recipes/") and f.endswith(".toml") for f in listed)
    assert "claimcheck/sample_data/tickets.csv" in listed
    assert "claimcheck/examples/answers-example.toml" in listed
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = _run([str(installed / "bin" / "python"), "-m", "claimcheck", "--version"], installed)
    assert out.stdout.strip() == f"claimcheck {version}"  # no commit: not a checkout


def test_from_an_empty_folder_the_demo_reaches_a_verdict_and_replays(installed: Path, tmp_path: Path) -> None:
    from claimcheck.engine.training.tiny import make_tiny_encoder

    cc = str(installed / "bin" / "claimcheck")
    py = str(installed / "bin" / "python")
    code = "from claimcheck.engine.pipeline.recipes import list_recipes; print(len(list_recipes()))"
    assert int(_run([py, "-c", code], tmp_path).stdout) >= 4  # the start screen has recipes to offer
    _run([cc, "examples", "ex"], tmp_path)
    ex = tmp_path / "ex"
    assert (ex / "sample_data" / "tickets.csv").read_bytes() == (
        ROOT / "sample_data" / "tickets.csv"
    ).read_bytes()
    answers = tomllib.loads((ex / "answers-example.toml").read_text())
    assert answers["session"]["workspace"] == "."
    (ex / "answers-ci.toml").write_text(
        tomlkit.dumps(ci_sized(answers, make_tiny_encoder(ex / "tiny-encoder")))
    )
    run = _run([cc, "run", "--answers", "answers-ci.toml", "runs/demo"], ex)
    assert "claim met" in run.stdout + run.stderr
    replay = _run([cc, "--replay", "runs/demo"], ex)
    assert "reproduced" in replay.stdout

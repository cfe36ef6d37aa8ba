"""The evidence report: golden Markdown of a fixed session, escaping, stale marking, model-index,
and the HTML opened in a headless browser (screenshot + DOM) when chromium is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from engine import evidence
from engine import session as session_mod
from engine.report import model_index, render, write_report
from engine.session import Session
from tests.test_replay import answers_text, use_fakes, write_data

GOLDEN = Path(__file__).parent / "golden" / "report.md"
FULL = '\n[contract]\n[dispatch]\n[artifact]\n[[notes]]\nstage = "artifact"\ntag = "untested_remedy"\ntext = "try a larger LoRA rank"\n'


def fixed_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = FULL) -> Path:
    """A session built the same way every time: fixed id, fixed clock, synthetic stages."""
    from engine.answers import run_answers

    monkeypatch.setattr(evidence, "now_iso", lambda: "2025-01-02T03:04:05+00:00")
    monkeypatch.setattr(session_mod, "now_iso", lambda: "2025-01-02T03:04:05+00:00")
    use_fakes(monkeypatch)
    write_data(tmp_path)
    (tmp_path / "answers.toml").write_text(answers_text(extra))
    result = run_answers(tmp_path / "answers.toml", tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    return tmp_path / "s"


def test_report_markdown_matches_golden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = fixed_session(tmp_path, monkeypatch)
    md_path, html_path = write_report(session)
    md = md_path.read_text()
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(md)
    assert md == GOLDEN.read_text(), (
        "report.md changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"
    )
    assert html_path.exists() and (session / "model-index.yaml").exists()
    # Same session, same bytes: nothing in the report reads the clock.
    assert render(session)[0] == md


def test_report_sections_and_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    md, html = render(fixed_session(tmp_path, monkeypatch))
    for heading in (
        "## The claim",
        "## Final comparison on the locked test",
        "## Latency (a separate axis from quality)",
        "## Verdict against the success criterion",
        "## Limitations",
        "## What this evidence does not establish",
    ):
        assert heading in md
    assert "Process success is not model improvement" in md
    assert "MET: candidate macro\\_f1" in md or "MET: candidate macro_f1" in md
    assert "\\[untested remedy\\] try a larger LoRA rank" in md
    # Plots: class counts (bars), prevalence per split (grouped), loss curve, interval whiskers, reliability.
    assert html.count("<svg") >= 5
    for title in (
        "source.class_counts · counts",
        "split.prevalence · prevalence",
        "baseline.metrics · curve",
        "artifact.comparison · arms",
        "artifact.calibration · bins",
    ):
        assert f"<title>{title}</title>" in html
    assert "@page { size: A4" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "<script" not in html


def test_stale_and_draft_stages_are_never_shown_as_established(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = fixed_session(tmp_path, monkeypatch)
    s = Session.open(session)
    s.run_stage("split", {"test_fraction": 0.25})  # a new draft split: later stages go stale
    md, html = render(session)
    assert "## 3. Split — draft" in md and "DRAFT: computed but never frozen" in md
    assert "## 7. Artifact — stale" in md and "STALE: this record rests on" in md
    assert "PASS (stale, not established)" in md
    assert "No established verdict: the artifact stage is stale" in md
    assert model_index(s)["model-index"][0]["results"] == []
    assert 'class="banner stale"' in html


def test_data_strings_are_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = fixed_session(tmp_path, monkeypatch, extra="")
    Session.open(session).add_note(
        "source", "fact", "a | pipe, `code`, <script>alert(1)</script> & [link](x)"
    )
    md, html = render(session)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp;" in html
    line = next(x for x in md.splitlines() if "pipe" in x)
    assert "\\|" in line and "\\`code\\`" in line and "\\<script\\>" in line and "\\[link\\]" in line


def test_model_index_from_frozen_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = fixed_session(tmp_path, monkeypatch)
    block = model_index(Session.open(session))
    (result,) = block["model-index"][0]["results"]
    assert result["dataset"]["split"] == "test" and result["dataset"]["name"] == "data"
    assert result["dataset"]["revision"].startswith("sha256:")
    assert result["metrics"] == [
        {"type": "f1", "value": 0.71, "name": "macro_f1 on the locked test", "args": {"average": "macro"}}
    ]
    assert result["task"]["type"] == "text-classification"
    write_report(session)
    assert yaml.safe_load((session / "model-index.yaml").read_text()) == block


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_html_in_headless_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = fixed_session(tmp_path, monkeypatch)
    _, html_path = write_report(session)
    url = html_path.resolve().as_uri()
    common = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    png = tmp_path / "report.png"
    subprocess.run(
        [*common, f"--screenshot={png}", "--window-size=1240,1754", url],
        check=True,
        capture_output=True,
        timeout=120,
    )
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a rendered page, not a blank one
    dom = subprocess.run(
        [*common, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    assert dom.count("<svg") >= 5 and dom.count("<table") >= 5 and "<polyline" in dom
    assert "What this evidence does not establish" in dom

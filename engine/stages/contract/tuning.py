"""The contract stage's tuning step: a declared search run as Optuna ask-and-tell, one job per trial.

Layout in the session folder (search/r<revision>/):

    declaration.toml     the search as declared, its digest, the base contract's digest and the
                         time it was frozen — written before the first trial is asked for
    study.journal        Optuna's journal storage: the study survives a crash and resumes
    trials/t<NNN>.toml   the ledger: one file per trial (state, settings, digest, dev figure, reason)
    trials/t<NNN>-s<seed>.toml   a finalist's seed repeat
    resources.toml       how many trials run at once on this machine and why (cores, memory estimate),
                         rewritten each time the search runs
    jobs/<op_id>/        each trial's job, exported and launched like the final run's

Each trial's contract is the base effective contract with the trial's settings
(claimcheck.engine.training.search.trial_effective); its digest is the job's identity, so a trial
killed with the search process is found again by identity and adopted (or resumed from its last
checkpoint when its process is gone), never launched twice. A declaration changed after its trials
began is refused: the person declares the next revision, and the old one stays with its trials.

Replay never launches: it reads the ledger, re-derives every trial's digest from the declaration
and the base contract, and recomputes the selection (claimcheck.engine.stages.contract.selection).
"""

from __future__ import annotations

import datetime as dt
import math
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.evidence import Check, atomic_write_text, digest_of
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.shapes.tuning import TrialRecord
from claimcheck.engine.training import search as S
from claimcheck.engine.training.schema import Search

SEARCH_DIR = "search"
DECLARATION = "declaration.toml"
JOURNAL = "study.journal"
TRIALS = "trials"
JOBS = "jobs"
POLL_SECONDS = 0.5
# A trial whose process vanished is relaunched from its last checkpoint this many times, then failed.
RESUMES = 1


def now_iso() -> str:
    """A trial ledger's clock: microseconds, so the freeze is seen to come before the first trial."""
    return dt.datetime.now(dt.UTC).isoformat()


def revision_dir(session_dir: Path, revision: int) -> Path:
    return session_dir / SEARCH_DIR / f"r{revision}"


def trial_file(number: int, seed: int | None = None) -> str:
    return f"{TRIALS}/t{number:03d}" + (f"-s{seed}" if seed is not None else "") + ".toml"


# ---------------------------------------------------------------- the declaration, frozen


@dataclass
class Frozen:
    revision: int
    digest: str
    base_digest: str
    frozen_at: str
    earlier: list[dict[str, Any]] = field(default_factory=list)


def freeze(search: Search, base_digest: str, session_dir: Path, *, replay: bool) -> Frozen:
    """The declaration written (or found unchanged) before any trial; refused when it changed after
    its revision's trials began."""
    rdir = revision_dir(session_dir, search.revision)
    digest = S.declaration_digest(search)
    earlier = _earlier(session_dir, search.revision)
    path = rdir / DECLARATION
    if path.is_file():
        doc = tomllib.loads(path.read_text())
        if doc.get("digest") == digest and doc.get("base_digest") == base_digest:
            return Frozen(search.revision, digest, base_digest, str(doc["frozen_at"]), earlier)
        started = sorted((rdir / TRIALS).glob("t*.toml")) if (rdir / TRIALS).is_dir() else []
        if started or replay:
            what = "declaration" if doc.get("digest") != digest else "base contract"
            raise StageInputError(
                f"contract.search: revision {search.revision}'s {what} changed after {len(started)} of its "
                f"trial(s) began ({path}); declare revision {search.revision + 1} to search again — "
                f"revision {search.revision} and its trials stay in the ledger"
            )
    if replay:
        raise StageInputError(f"contract.search: {path} is missing: the search was never run in this session")
    frozen_at = now_iso()
    doc = {
        "revision": search.revision,
        "digest": digest,
        "base_digest": base_digest,
        "frozen_at": frozen_at,
        "search": search.model_dump(mode="json", exclude_none=True),
    }
    rdir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, tomlkit.dumps(doc))
    return Frozen(search.revision, digest, base_digest, frozen_at, earlier)


def _earlier(session_dir: Path, revision: int) -> list[dict[str, Any]]:
    out = []
    for r in range(1, revision):
        rdir = revision_dir(session_dir, r)
        if (rdir / DECLARATION).is_file():
            doc = tomllib.loads((rdir / DECLARATION).read_text())
            n = len(list((rdir / TRIALS).glob("t*.toml"))) if (rdir / TRIALS).is_dir() else 0
            out.append({"revision": r, "digest": str(doc.get("digest", "")), "trial_files": n})
    return out


# ---------------------------------------------------------------- the ledger


def write_trial(rdir: Path, rec: TrialRecord) -> None:
    path = rdir / trial_file(rec.number, rec.seed if rec.kind == "repeat" else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, tomlkit.dumps(rec.model_dump(mode="json", exclude_none=True)))


def read_ledger(rdir: Path) -> list[TrialRecord]:
    """Every trial file of a revision, in trial order (repeats after their trial)."""
    from claimcheck.engine.errors import ClaimcheckError

    out = []
    for path in sorted((rdir / TRIALS).glob("t*.toml")) if (rdir / TRIALS).is_dir() else []:
        try:
            out.append(TrialRecord.model_validate(tomllib.loads(path.read_text())))
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise ClaimcheckError(f"{path}: not a trial record: {exc}") from None
    return sorted(out, key=lambda r: (r.number, r.kind != "trial", r.seed))


# ---------------------------------------------------------------- running trials as jobs


@dataclass
class Pending:
    rec: TrialRecord
    handle: Any
    trial: Any = None  # the Optuna trial (None for a seed repeat, or a trial adopted after a crash)
    reported: int = -1  # the last dev-evaluation step told to the pruner
    resumes: int = 0


@dataclass
class Study:
    """What the search needs from the contract stage: the base contract, the rows and the context."""

    search: Search
    base: dict[str, Any]
    upstream: dict[str, Any]
    ctx: StageContext
    rdir: Path
    frozen: Frozen
    lower_is_better: bool
    metric: str
    meta: Any = None  # the model on the meta device (no weights): the trials' memory estimates
    bound: int = 0  # trials at once on this machine (resources.toml); 0 until the search runs
    threads: int | None = None  # each local trial job's threads (cores shared between the trials)
    estimates: dict[str, int | None] = field(default_factory=dict)  # memory estimate by resource key


def run_search(st: Study) -> list[TrialRecord]:
    """Run the declared trials and the finalists' seed repeats; the ledger as written."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(st.rdir / JOURNAL)))
    study = optuna.create_study(
        study_name=f"r{st.search.revision}",
        storage=storage,
        sampler=_sampler(st.search),
        pruner=_pruner(st.search),
        direction="minimize" if st.lower_is_better else "maximize",
        load_if_exists=True,
    )
    if st.search.sampler == "grid" and not study.trials:
        # the grid as enqueued trials, in the sampler seed's order (Optuna's GridSampler stops the study
        # from inside tell, which ask-and-tell cannot take)
        import random

        points = S.grid_points(st.search)
        random.Random(st.search.sampler_seed).shuffle(points)
        for point in points[: st.search.n_trials]:
            study.enqueue_trial(point)
    provider = _provider(st)
    write_resources(st)
    pending: dict[str, Pending] = {}
    ledger = {(r.number, r.seed, r.kind): r for r in read_ledger(st.rdir)}
    names = {s.name for s in st.search.space}
    for t in study.trials:  # trials a killed search left running: found again by identity
        if t.state == optuna.trial.TrialState.RUNNING and set(t.params) != names:
            # killed between ask and the settings drawn: no job was ever launched for it
            rec = _trial_record(st, t.number, {}, None)
            write_trial(st.rdir, rec.model_copy(update={"state": "failed", "ended_at": now_iso(),
                        "reason": "the search process ended before the trial's settings were drawn"}))  # fmt: skip
            study.tell(t.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        elif t.state == optuna.trial.TrialState.RUNNING:
            rec = _trial_record(
                st, t.number, dict(t.params), ledger.get((t.number, st.base["seed"], "trial"))
            )
            pending[rec.op_id + f"#{t.number}"] = Pending(rec, _launch(st, provider, rec), None)
    while True:
        while len(pending) < st.bound and _asked(study) < st.search.n_trials:
            trial = study.ask()
            settings = {s.name: _suggest(trial, s) for s in st.search.space}
            rec = _trial_record(st, trial.number, settings, None)
            pending[rec.op_id + f"#{trial.number}"] = Pending(rec, _launch(st, provider, rec), trial)
        if not pending:
            break
        _poll(st, provider, pending, study)
    _repeats(st, provider)
    return read_ledger(st.rdir)


def _asked(study: Any) -> int:
    """Trials asked for so far (enqueued grid points still waiting are not)."""
    import optuna

    return sum(1 for t in study.trials if t.state != optuna.trial.TrialState.WAITING)


def _sampler(search: Search) -> Any:
    import optuna

    if search.sampler in ("grid", "random"):  # grid: every trial is an enqueued grid point
        return optuna.samplers.RandomSampler(seed=search.sampler_seed)
    return optuna.samplers.TPESampler(seed=search.sampler_seed)


def _pruner(search: Search) -> Any:
    import optuna

    if search.pruning == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=search.pruning_startup_trials)
    return optuna.pruners.NopPruner()


def _suggest(trial: Any, s: Any) -> Any:
    if s.choices:
        return S.typed(s.name, trial.suggest_categorical(s.name, [S.typed(s.name, c) for c in s.choices]))
    if S.SEARCHABLE[s.name] is int:
        return trial.suggest_int(s.name, int(s.low), int(s.high), log=s.log)
    return trial.suggest_float(s.name, float(s.low), float(s.high), log=s.log)


def _provider(st: Study) -> Any:
    from claimcheck.engine.providers.registry import from_inputs

    inputs = {"provider": st.search.provider, "ray_address": st.search.ray_address}
    return from_inputs(inputs, st.rdir / JOBS, st.ctx.resolve)


def _trial_record(
    st: Study, number: int, settings: dict[str, Any], known: TrialRecord | None, seed: int | None = None
) -> TrialRecord:
    from claimcheck.engine.providers.base import operation_id

    seed = st.base["seed"] if seed is None else seed
    eff = S.trial_effective(st.base, settings, seed)
    digest = digest_of(eff)
    if known is not None and known.digest == digest:
        return known
    rec = TrialRecord(
        number=number,
        kind="trial" if seed == st.base["seed"] else "repeat",
        settings={k: S.typed(k, v) for k, v in settings.items()},
        seed=seed,
        digest=digest,
        op_id=operation_id(digest, 1),
        state="running",
        metric=st.metric,
        started_at=now_iso(),
    )
    return _resources(st, rec)


def _resources(st: Study, rec: TrialRecord) -> TrialRecord:
    from claimcheck.engine.stages.contract import trial_resources as R

    return R.with_resources(rec, read_ledger(st.rdir), st.base, st.meta, st.estimates)


def write_resources(st: Study) -> None:
    """The concurrency bound of this run of the search, recorded before its first launch."""
    from claimcheck.engine.stages.contract import trial_resources as R

    doc = R.bound(st.search, st.base, st.meta)
    R.write(st.rdir, doc)
    st.bound = int(doc["bound"])
    st.threads = doc.get("threads_per_trial")
    st.ctx.progress(None, f"search r{st.search.revision}: {doc['why']}")


def _launch(st: Study, provider: Any, rec: TrialRecord) -> Any:
    from claimcheck.engine.stages.dispatch.run import Operation, export_job

    eff = S.trial_effective(st.base, rec.settings, rec.seed)
    job_dir = st.rdir / JOBS / rec.op_id
    write_trial(st.rdir, rec)
    runtime = {"threads": st.threads} if st.threads else None
    export_job(job_dir, Operation(eff, rec.digest, rec.op_id, 1), st.upstream, st.ctx, runtime)
    st.ctx.progress(
        None, f"search r{st.search.revision}: trial {rec.number} ({S.settings_text(rec.settings)})"
    )
    return provider.launch(job_dir, rec.op_id)


def _poll(st: Study, provider: Any, pending: dict[str, Pending], study: Any) -> None:
    """One look at every running trial: tell the study those that ended, prune those behind."""
    import optuna

    time.sleep(POLL_SECONDS)
    st.ctx.check_cancelled()
    for key, p in list(pending.items()):
        status = provider.status(p.handle)
        if status.phase == "lost" and p.resumes < RESUMES:
            p.resumes += 1  # the process is gone: continue from its last checkpoint, same identity
            p.handle = provider.launch(p.handle.job_dir, p.rec.op_id, resume=True)
            continue
        if not status.terminal:
            if p.trial is not None and _should_prune(p):
                provider.cancel(p.handle)
                _end(st, p, "pruned", "behind the median of earlier trials at the same step", study)
                del pending[key]
            continue
        if status.phase == "done":
            provider.fetch(p.handle)  # local: nothing to copy; ray: logs and artifact home, verified
        value = dev_value(p.handle.job_dir) if status.phase == "done" else None
        if p.trial is not None:
            _report(p)  # its whole curve, however few polls saw it running: later trials are judged on it
        if value is None or not math.isfinite(value):
            why = status.reason or f"job ended {status.phase}"
            state = "cancelled" if status.phase == "cancelled" else "failed"
            _end(st, p, state, why if value is None else f"dev figure {value} is not finite", study)
        else:
            _end(st, p, "complete", "", study, value)
        del pending[key]
    _ = optuna  # imported for its trial states in _end


def _should_prune(p: Pending) -> bool:
    _report(p)
    return p.reported > 0 and p.trial.should_prune()


def _report(p: Pending) -> None:
    """Tell the trial the job's dev evaluations not yet told, each at its optimizer step."""
    from claimcheck.engine.training import jobfiles

    evals = [e for e in jobfiles.dev_evals(jobfiles.read_metrics(p.handle.job_dir)) if e.kind == "eval"]
    for e in evals:
        if e.step > p.reported and e.step > 0 and math.isfinite(e.value):
            p.trial.report(e.value, e.step)
            p.reported = e.step


def _end(st: Study, p: Pending, state: str, reason: str, study: Any, value: float | None = None) -> None:
    import optuna

    rec = p.rec.model_copy(
        update={
            "state": state,
            "reason": reason,
            "value": value,
            "ended_at": now_iso(),
            "trainable_params": _trainable(p.handle.job_dir),
            "step_s": p.rec.step_s if p.rec.resources_from is not None else _step_s(p.handle.job_dir),
        }
    )
    write_trial(st.rdir, rec)
    if rec.kind != "trial":
        return
    states = {
        "complete": optuna.trial.TrialState.COMPLETE,
        "pruned": optuna.trial.TrialState.PRUNED,
        "failed": optuna.trial.TrialState.FAIL,
        "cancelled": optuna.trial.TrialState.FAIL,
    }
    study.tell(rec.number, value if state == "complete" else None, state=states[state], skip_if_finished=True)


def dev_value(job_dir: Path) -> float | None:
    """The trial's dev figure: the selected state's evaluation (or the last one)."""
    from claimcheck.engine.training import jobfiles

    evals = jobfiles.dev_evals(jobfiles.read_metrics(job_dir))
    selected = [e for e in evals if e.kind == "selected_eval"]
    pick = selected[-1] if selected else (evals[-1] if evals else None)
    return None if pick is None else float(pick.value)


def _step_s(job_dir: Path) -> float | None:
    """The trial's measured seconds per optimizer step (its job's own step times)."""
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.pace import step_seconds

    secs = step_seconds(jobfiles.read_metrics(job_dir))
    return None if secs is None else round(secs, 6)


def _trainable(job_dir: Path) -> int:
    from claimcheck.engine.training import jobfiles

    status = jobfiles.read_status(job_dir)
    n = status.model_info.get("trainable_params", 0) if status is not None else 0
    return int(n) if isinstance(n, int | float) else 0


def _repeats(st: Study, provider: Any) -> None:
    """The finalists run again over the declared further seeds (fixed list, same concurrency)."""
    from claimcheck.engine.stages.contract.selection import finalists

    ledger = read_ledger(st.rdir)
    done = {(r.number, r.seed) for r in ledger if r.kind == "repeat" and r.state != "running"}
    todo: list[TrialRecord] = []
    for fin in finalists(ledger, st.search.finalists, st.lower_is_better):
        for k in range(1, st.search.seed_repeats + 1):
            seed = int(st.base["seed"]) + k
            if (fin.number, seed) not in done:
                todo.append(_trial_record(st, fin.number, fin.settings, None, seed))
    pending: dict[str, Pending] = {}
    while todo or pending:
        while todo and len(pending) < st.bound:
            rec = todo.pop(0)
            known = next(
                (r for r in ledger if (r.number, r.seed, r.kind) == (rec.number, rec.seed, "repeat")), None
            )
            rec = known or rec
            pending[f"{rec.op_id}#{rec.number}"] = Pending(rec, _launch(st, provider, rec))
        _poll(st, provider, pending, None)


# ---------------------------------------------------------------- the contract stage's tuning step

PB_SEARCH = (
    "If tuning is authorized, specify its hypothesis, search space, development metric and trial count first."
)
PB_TIED = "Retune interacting settings when changing batch size or model scale; do not copy a learning rate without its recipe."
PB_KEEP = "Keep failed trials and repeat promising configurations when stochastic variability matters."
PB_CONCURRENCY = (
    "Size hardware from model/optimizer/activation memory and representative length tails, not model "
    "parameter count alone. Prefer existing compatible throughput/memory evidence."
)


def tracked_metric(eff: dict[str, Any]) -> tuple[str, bool]:
    """The metric the job tracks on dev for this contract, and whether lower is better."""
    from claimcheck.engine.stats import registry

    if eff["task_kind"] != "text_classification":
        return registry.DEV_LOSS, True
    metric, _note = registry.dev_metric(eff.get("dev_metric") or registry.DEFAULTS["categorical"])
    return metric, registry.lower_is_better(metric)


def tune(
    search: Search,
    eff: dict[str, Any],
    res: Any,
    upstream: dict[str, Any],
    ctx: StageContext,
    meta: Any = None,
) -> tuple[dict[str, Any], list[Check]]:
    """Run (or, on replay, re-read) the declared search; the chosen trial's contract and the checks.
    `meta`: the model on the meta device, for the trials' memory estimates."""
    from claimcheck.engine.pipeline.checks import not_run
    from claimcheck.engine.stats import registry

    metric, lower = tracked_metric(eff)
    known = registry.METRICS.get(search.dev_metric or metric)
    direction_known = True if (search.dev_metric or metric) == registry.DEV_LOSS else (known is not None)
    why = S.refusals(search, eff, metric, lower if direction_known else None)
    if res.refused and not why:
        why = ["the contract has refused settings (see contract.requested_vs_effective): no trial runs"]
        skip = True
    else:
        skip = False
    for reason in why if not skip else []:
        res.refuse("search", f"revision {search.revision}", reason)
    base_digest = digest_of(eff)
    if why:
        decl = _declaration_check(search, None, base_digest, metric, lower, why, ctx.session_dir)
        off = "not run: the search declaration is refused (see contract.search_declaration)"
        return eff, [decl, not_run("contract.search_trials", off), not_run("contract.search_selection", off)]
    frozen = freeze(search, base_digest, ctx.session_dir, replay=ctx.replay)
    rdir = revision_dir(ctx.session_dir, search.revision)
    st = Study(search, eff, upstream, ctx, rdir, frozen, lower, metric, meta)
    if not ctx.replay:
        run_search(st)
    ledger = read_ledger(rdir)
    checks = [_declaration_check(search, frozen, base_digest, metric, lower, [], ctx.session_dir)]
    concurrency = _concurrency_check(st)
    if concurrency is not None:
        checks.append(concurrency)
    checks.append(_trials_check(st, ledger))
    chosen_eff, selection = _selection_check(st, ledger, res)
    checks.append(selection)
    return chosen_eff, checks


def _declaration_check(
    search: Search,
    frozen: Frozen | None,
    base_digest: str,
    metric: str,
    lower: bool,
    why: list[str],
    session_dir: Path,
) -> Check:
    from claimcheck.engine.shapes.tuning import SearchDeclaration

    rel = f"{SEARCH_DIR}/r{search.revision}/{DECLARATION}"
    path = session_dir / rel
    sha = sha256_file(path) if frozen is not None and path.is_file() else ""
    shape = SearchDeclaration(
        revision=search.revision,
        digest=S.declaration_digest(search),
        base_digest=base_digest,
        frozen_at=frozen.frozen_at if frozen else "",
        path=rel if sha else "",
        sha256=sha,
        hypothesis=search.hypothesis,
        space=[s.model_dump(mode="json", exclude_none=True) for s in search.space],
        sampler=search.sampler,
        n_trials=search.n_trials,
        metric=search.dev_metric or metric,
        direction="minimize" if lower else "maximize",
        pruning=search.pruning,
        finalists=search.finalists,
        seed_repeats=search.seed_repeats,
        tie_break=search.tie_break,
        provider=search.provider,
        concurrency=search.concurrency,
        refused=why,
        earlier_revisions=frozen.earlier if frozen else [],
    )
    varied = ", ".join(s.name for s in search.space)
    if why:
        summary = "REFUSED: " + "; ".join(why)
    else:
        summary = (
            f"revision {search.revision} frozen {shape.frozen_at} before its first trial: {search.n_trials} "
            f"{search.sampler} trial(s) over {varied} on dev {shape.metric} ({shape.direction}); "
            f"{search.seed_repeats} seed repeat(s) for the top {search.finalists}"
            + (
                f"; {len(shape.earlier_revisions)} earlier revision(s) kept"
                if shape.earlier_revisions
                else ""
            )
        )
    return Check(
        id="contract.search_declaration",
        status="fail" if why else "pass",
        basis="decided",
        summary=summary,
        measured=shape,
        why="A search declared after its results can be shaped by them; the frozen declaration rules that out.",
        playbook=f"{PB_SEARCH} {PB_TIED}",
    )


def _concurrency_check(st: Study) -> Check | None:
    """The bound resources.toml recorded for the search's last run (None for a search run before
    the file existed)."""
    from claimcheck.engine.shapes.tuning import SearchConcurrency
    from claimcheck.engine.stages.contract import trial_resources as R

    doc = R.read(st.rdir)
    if doc is None:
        return None
    rel = f"{SEARCH_DIR}/r{st.search.revision}/{R.FILE}"
    shape = SearchConcurrency.model_validate({**doc, "path": rel, "sha256": sha256_file(st.rdir / R.FILE)})
    return Check(
        id="contract.search_concurrency",
        status="pass",
        basis="measured",
        summary=f"trials run {shape.bound} at a time: {shape.why}",
        measured=shape,
        why="Trials that together outgrow the machine's cores or memory slow or kill one another.",
        playbook=PB_CONCURRENCY,
    )


def _trials_check(st: Study, ledger: list[TrialRecord]) -> Check:
    from claimcheck.engine.shapes.tuning import SearchTrials, TrialRow
    from claimcheck.engine.stages.contract.trial_resources import reuse_problems

    rows, problems = [], reuse_problems(ledger)
    for r in ledger:
        rel = f"{SEARCH_DIR}/r{st.search.revision}/{trial_file(r.number, r.seed if r.kind == 'repeat' else None)}"
        want = digest_of(S.trial_effective(st.base, r.settings, r.seed))
        if want != r.digest:
            problems.append(
                f"trial {r.number} (seed {r.seed}): its digest is not its contract's ({want[:19]}…)"
            )
        if not r.started_at > st.frozen.frozen_at:
            problems.append(f"trial {r.number} (seed {r.seed}) started {r.started_at}, not after the freeze")
        if r.state == "running":
            problems.append(f"trial {r.number} (seed {r.seed}) has no result: the search did not finish")
        rows.append(
            TrialRow(
                number=r.number,
                kind=r.kind,
                seed=r.seed,
                settings=r.settings,
                digest=r.digest,
                state=r.state,
                reason=r.reason,
                value=r.value,
                started_at=r.started_at,
                ended_at=r.ended_at,
                file=rel,
                file_sha256=sha256_file(st.ctx.session_dir / rel),
                memory_bytes=r.memory_bytes,
                step_s=r.step_s,
                resources_from=r.resources_from,
                resources_from_seed=r.resources_from_seed,
                resources_from_digest=r.resources_from_digest,
            )
        )
    trials = [r for r in ledger if r.kind == "trial"]
    if len(trials) != st.search.n_trials:
        problems.append(f"{len(trials)} trial records for the declared {st.search.n_trials}")
    count = {
        s: sum(1 for r in trials if r.state == s)
        for s in ("complete", "failed", "pruned", "cancelled", "running")
    }
    shape = SearchTrials(
        revision=st.search.revision,
        trials=len(trials),
        repeats=len(ledger) - len(trials),
        problems=problems,
        rows=rows,
        **count,
    )
    summary = (
        f"{len(trials)} trial(s): {count['complete']} complete, {count['failed']} failed, {count['pruned']} pruned, "
        f"{count['cancelled']} cancelled; {shape.repeats} seed repeat(s); every trial's contract digest re-derived"
        + (f"; PROBLEMS: {'; '.join(problems)}" if problems else "")
    )
    return Check(
        id="contract.search_trials",
        status="fail" if problems else ("warn" if count["failed"] else "pass"),
        summary=summary,
        measured=shape,
        why="Every trial is kept with its state and reason; a dropped failure would flatter the search.",
        playbook=PB_KEEP,
    )


def _selection_check(st: Study, ledger: list[TrialRecord], res: Any) -> tuple[dict[str, Any], Check]:
    from claimcheck.engine.shapes.tuning import SearchSelection
    from claimcheck.engine.stages.contract.selection import select

    sel = select(ledger, st.search.finalists, st.lower_is_better, st.search.seed_repeats, st.search.tie_break)
    direction = "minimize" if st.lower_is_better else "maximize"
    if sel is None:
        res.refuse("search", f"revision {st.search.revision}", "no trial completed: nothing to select")
        return st.base, Check(
            id="contract.search_selection",
            status="fail",
            summary="no trial completed: the search selects nothing and the contract is refused",
            measured={},
            why="A winner is named from dev figures only, and only when one exists.",
            playbook=PB_KEEP,
        )
    chosen = S.trial_effective(st.base, sel.chosen.settings)
    for name, value in sel.chosen.settings.items():
        _resolved(res, name, value, f"search r{st.search.revision} trial {sel.chosen.number}, chosen on dev")
    digest = digest_of(chosen)
    shape = SearchSelection(
        metric=st.metric,
        direction=direction,
        finalists=sel.finalists,
        margin=sel.margin,
        spread=sel.spread,
        tie=sel.tie,
        rule=sel.rule,
        chosen_trial=sel.chosen.number,
        chosen_digest=sel.chosen.digest,
        chosen_settings=sel.chosen.settings,
        contract_digest=digest,
    )
    same = digest == sel.chosen.digest
    summary = (
        f"trial {sel.chosen.number} ({S.settings_text(sel.chosen.settings)}) chosen on dev {st.metric}: {sel.rule}; "
        + (
            "the contract is that trial's contract"
            if same
            else "the contract's digest differs from the trial's"
        )
    )
    return chosen, Check(
        id="contract.search_selection",
        status="fail" if not same else ("warn" if sel.tie or sel.spread is None else "pass"),
        summary=summary,
        measured=shape,
        why="A margin inside the seed spread is noise; naming a winner there would report luck as a finding.",
        playbook=PB_KEEP,
    )


def _resolved(res: Any, name: str, value: Any, how: str) -> None:
    """The searched setting's row in requested-vs-effective: the chosen value, and why."""
    from claimcheck.engine.training.resolve import _show

    for row in res.rows:
        if row["setting"] == name:
            row["effective"] = _show(value)
            row["outcome"] = "resolved: " + how
            return
    res.resolved(name, "(searched)", value, how)

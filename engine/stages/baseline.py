"""Baseline stage: is the task learnable from the recorded inputs, and what must a model beat?

Trivial and conventional scikit-learn learners are fitted on train and measured on dev (or on
pooled out-of-fold predictions for small data, with folds that respect the split's groups / time).
Calibration and thresholds are fitted on the calibration split (or cross-fitted out-of-fold), never
on the locked test, which this stage cannot read (engine.splits.rows refuses it and the refusal is
probed and recorded).

Playbook: "Establish learnability and comparison evidence".
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.context import StageContext, StageInputError
from engine.evidence import Check, Note, StageRecord, atomic_write_bytes

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

TITLE = "Baseline"
CALLER = "baseline"
PREDICTIONS_FILE = "baseline_dev_predictions.parquet"

PB_TRIVIAL = (
    "Measure a task-appropriate trivial baseline and, when informative, a simple conventional learner using "
    "train/development only."
)
PB_RARE = (
    "For rare classes, retain per-class support, precision/recall, confusion counts and suitable "
    "probability/ranking/operating-point metrics. Accuracy can reward predicting only the majority class."
)
PB_LEARN = (
    "Inspect whether the available inputs can reasonably determine the targets. Contradictory or weak labels "
    "may limit performance; more epochs do not create missing information."
)
PB_CAL = (
    "Probability calibration and action-threshold choice are different. Fit them using independent or "
    "out-of-fold predictions, never final results. Tie thresholds to error costs or operating constraints; "
    "0.5 is not universally appropriate."
)
PB_SPLITS = (
    "Separate training, development, calibration and locked final testing when applicable. Development "
    "selects recipes/checkpoints; calibration fits temperatures/thresholds; final results do not select either."
)
PB_SMALL = (
    "For small datasets, consider cross-validation that respects the same groups/time constraints rather than "
    "fragmenting the data into four undersized sets. Keep model selection inside development folds."
)
PB_REPORT = (
    "Report raw and calibrated results separately, including per-class/slice regressions, uncertainty "
    "appropriate to the independent unit"
)

CLASS_TRIVIAL = ("most_frequent", "prior")
CLASS_CONVENTIONAL = ("tfidf_logreg", "hgb", "logreg")
REG_TRIVIAL = ("mean", "median")
REG_CONVENTIONAL = ("hgb",)
GEN_TRIVIAL = ("most_frequent_answer",)
REGRESSION_METRICS = {"mae", "rmse", "r2"}
LOWER_IS_BETTER = {"log_loss", "brier", "mae", "rmse"}
DECOMPOSABLE = {"accuracy", "macro_f1", "weighted_f1", "balanced_accuracy", "log_loss", "brier"}
# Non-decomposable ranking metrics bootstrapped per resample (macro over classes defined in it).
RANKING = ("macro_auroc", "macro_auprc")
# Claim metric names → the key classification_report uses for them.
REPORT_KEY = {"auroc": "macro_auroc", "auprc": "macro_auprc"}


class OperatingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # "none": no action threshold is chosen; decisions stay arg-max and the check says so.
    constraint: Literal["none", "min_precision", "min_recall", "cost"] = "none"
    positive_class: str = ""
    target: float = 0.9
    cost_fp: float = 1.0
    cost_fn: float = 1.0


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Empty: the defaults for the claim's task kind (text: most_frequent, prior, tfidf_logreg).
    learners: list[str] = Field(default_factory=list)
    max_features: int = Field(default=50_000, ge=1)
    ngram_max: int = Field(default=2, ge=1, le=3)
    min_df: int = Field(default=2, ge=1)
    C: float = Field(default=1.0, gt=0)
    # When given, C is selected on dev (or inside the training folds, nested, for K-fold).
    C_grid: list[float] = Field(default_factory=list)
    max_iter: int = Field(default=300, ge=1)
    seed: int = 0
    bootstrap_resamples: int = Field(default=1000, ge=100)
    bootstrap_seed: int = 0
    unit: Literal["auto", "family", "row"] = "auto"
    ece_bins: int = Field(default=15, ge=2)
    calibration: Literal["temperature", "platt", "isotonic", "none"] = "temperature"
    operating_point: OperatingPoint = Field(default_factory=OperatingPoint)
    cv: Literal["auto", "on", "off"] = "auto"
    cv_folds: int = Field(default=5, ge=2)
    # cv="auto" switches to K-fold when train has fewer rows than this (or dev is empty).
    cv_below_rows: int = Field(default=2000, ge=0)
    trivial_reference: str = "most_frequent"
    # HistGradientBoosting boosting rounds (no early stopping, so runs are reproducible).
    hgb_max_iter: int = Field(default=100, ge=1)


# ---------------------------------------------------------------- data


@dataclass
class Data:
    task: str  # "classification" | "regression" | "generation"
    classes: list[str]
    fit: pl.DataFrame  # rows the learners are fitted on
    eval: pl.DataFrame  # rows measured (dev, or the pooled K-fold rows)
    cal: pl.DataFrame  # calibration rows (may be empty)
    text_cols: list[str]
    tab_cols: list[str]
    units: np.ndarray  # independent unit per eval row
    unit_kind: str
    folds: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # K-fold (fit idx, eval idx)
    eval_fold: np.ndarray | None = None  # fold per eval row in K-fold mode (-1: never evaluated)
    mode: str = "holdout"


def _task(claim: dict[str, Any]) -> str:
    if claim.get("task_kind") == "causal_lm_sft":
        return "generation"
    return "regression" if claim.get("primary_metric") in REGRESSION_METRICS else "classification"


def _load(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> Data:
    import numpy as np
    import polars as pl

    from engine import data as d
    from engine import splits

    for need in ("claim", "source", "split"):
        if need not in upstream:
            raise StageInputError(f"the baseline stage needs a frozen '{need}' stage first")
    claim, src = upstream["claim"].inputs, upstream["source"].inputs
    task = _task(claim)
    parts = {s: splits.rows(s, upstream, ctx, caller=CALLER) for s in ("train", "dev", "calibration")}
    if parts["train"].height == 0:
        raise StageInputError("the split has no train rows; re-run the split stage with a train fraction")
    text_cols = d.text_inputs(src)
    tab_cols = [c for c in d.model_inputs(src) if c not in text_cols]
    classes = _classes(task, claim, parts)
    mode = _mode(inputs, parts)
    if mode == "holdout":
        fit, ev = parts["train"], parts["dev"]
    else:
        fit = ev = pl.concat([parts["train"], parts["dev"]], how="diagonal_relaxed").sort(d.ROW_ID)
    unit_kind = _unit_kind(inputs, upstream)
    fam = ev.get_column(d.FAMILY) if d.FAMILY in ev.columns else None
    if unit_kind == "family" and fam is not None:
        # rows the families file lacks stay their own unit (negative ids cannot clash with families)
        units = np.where(
            fam.is_null().to_numpy(), -1 - ev.get_column(d.ROW_ID).to_numpy(), fam.fill_null(0).to_numpy()
        )
    else:
        unit_kind, units = "row", ev.get_column(d.ROW_ID).to_numpy()
    data = Data(
        task, classes, fit, ev, parts["calibration"], text_cols, tab_cols, units, unit_kind, mode=mode
    )
    if mode != "holdout":
        _plan_folds(data, inputs, upstream)
    return data


def _classes(task: str, claim: dict[str, Any], parts: dict[str, pl.DataFrame]) -> list[str]:
    if task != "classification":
        return []
    seen: set[str] = set()
    for frame in parts.values():
        seen |= set(frame.get_column("target").unique().to_list())
    order = [str(c) for c in claim.get("class_order") or []]
    if not order:
        return sorted(seen)
    extra = sorted(seen - set(order))
    if extra:
        raise StageInputError(
            f"labels {extra[:5]} occur in the data but not in the claim's class_order {order}; "
            "add them to class_order (claim stage) or map them in the source stage's label_mapping"
        )
    return order


def _mode(inputs: Inputs, parts: dict[str, pl.DataFrame]) -> str:
    if inputs.cv == "on":
        return "kfold"
    if inputs.cv == "off":
        if parts["dev"].height == 0:
            raise StageInputError(
                "cv is 'off' but the split has no dev rows; set cv to 'auto' or add a dev split"
            )
        return "holdout"
    small = parts["train"].height < inputs.cv_below_rows
    return "kfold" if small or parts["dev"].height == 0 else "holdout"


def _unit_kind(inputs: Inputs, upstream: dict[str, StageRecord]) -> str:
    if inputs.unit != "auto":
        return inputs.unit
    return "family" if upstream["source"].check("source.entity_families") is not None else "row"


def _time_split(upstream: dict[str, StageRecord]) -> bool:
    """Whether the split stage placed rows by time (then folds only train on the past)."""
    inp = upstream["split"].inputs
    return any("time" in str(inp.get(k, "")) for k in ("strategy", "method", "kind", "split_by"))


def _plan_folds(data: Data, inputs: Inputs, upstream: dict[str, StageRecord]) -> None:
    """K-fold over the pooled rows: the split stage's folds if it made them, else family-respecting folds."""
    import numpy as np
    import polars as pl

    from engine import splits

    ev = data.eval
    fold = ev.get_column(splits.FOLD).fill_null(-1).to_numpy() if splits.FOLD in ev.columns else None
    if fold is None or (fold < 0).any():
        fam = ev.get_column("family_id") if "family_id" in ev.columns else None
        ids = (
            data.units
            if fam is None
            else np.where(fam.is_null().to_numpy(), -1 - ev["row_id"].to_numpy(), fam.fill_null(0).to_numpy())
        )
        src = upstream["source"].inputs
        tcol = str(src.get("time_column") or "")
        if _time_split(upstream) and tcol in ev.columns:
            from engine.data import time_expr

            t = ev.select(time_expr(tcol, ev.schema[tcol]).alias("t")).get_column("t")
            rank = t.rank("ordinal").fill_null(0).to_numpy()
            fold = np.minimum((rank - 1) * inputs.cv_folds // max(len(rank), 1), inputs.cv_folds - 1)
        else:
            fold = splits.assign_folds(np.asarray(ids, dtype=np.int64), inputs.cv_folds, inputs.seed)
    fold = np.asarray(fold, dtype=np.int64)
    ks = sorted(set(fold.tolist()))
    ordered = _time_split(upstream)
    for k in ks:
        train_idx = np.flatnonzero(fold < k) if ordered else np.flatnonzero(fold != k)
        if len(train_idx) == 0:
            continue
        data.folds.append((train_idx, np.flatnonzero(fold == k)))
    evaluated = np.full(len(fold), -1)
    for i, (_, e) in enumerate(data.folds):
        evaluated[e] = i
    data.eval_fold = evaluated
    data.mode = "kfold-time" if ordered else "kfold"
    if len(data.folds) < 2:
        raise StageInputError(
            "K-fold needs at least two folds with training rows; raise cv_folds or add data"
        )
    _ = pl  # polars is used through the frames


# ---------------------------------------------------------------- learners


def _default_learners(task: str, claim: dict[str, Any], text_cols: list[str]) -> list[str]:
    if task == "generation":
        return list(GEN_TRIVIAL)
    if task == "regression":
        return ["mean", "median", "hgb"]
    if claim.get("task_kind") == "tabular" or not text_cols:
        return ["most_frequent", "prior", "hgb", "logreg"]
    return ["most_frequent", "prior", "tfidf_logreg"]


def _validate_learners(learners: list[str], data: Data) -> None:
    allowed = {
        "classification": CLASS_TRIVIAL + CLASS_CONVENTIONAL,
        "regression": REG_TRIVIAL + REG_CONVENTIONAL,
        "generation": GEN_TRIVIAL,
    }[data.task]
    bad = [x for x in learners if x not in allowed]
    if bad:
        raise StageInputError(
            f"learners {bad} do not fit a {data.task} task; choose from {', '.join(allowed)}"
        )
    if "tfidf_logreg" in learners and not data.text_cols:
        raise StageInputError(
            "tfidf_logreg needs free-text input columns; declare text_columns in the source stage"
        )
    if any(x in learners for x in ("hgb", "logreg")) and not data.tab_cols:
        raise StageInputError("hgb / logreg need non-text input columns; the source stage declares none")


def _text(frame: pl.DataFrame, cols: list[str]) -> list[str]:
    import polars as pl

    return (
        frame.select(
            pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in cols], separator="\n").alias("x")
        )
        .get_column("x")
        .to_list()
    )


def _make_model(name: str, data: Data, inputs: Inputs, c_value: float) -> Any:
    """An unfitted sklearn estimator whose every learned transform is fitted on the rows given to fit()."""
    from sklearn.compose import ColumnTransformer
    from sklearn.dummy import DummyClassifier, DummyRegressor
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    if name in CLASS_TRIVIAL:
        return DummyClassifier(strategy=name)
    if name in REG_TRIVIAL:
        return DummyRegressor(strategy=name)
    if name == "tfidf_logreg":
        return make_pipeline(
            TfidfVectorizer(
                max_features=inputs.max_features,
                ngram_range=(1, inputs.ngram_max),
                min_df=inputs.min_df,
                sublinear_tf=True,
                dtype=_float32(),
            ),
            LogisticRegression(C=c_value, max_iter=inputs.max_iter, random_state=inputs.seed),
        )
    num, cat = _tab_kinds(data)
    if name == "hgb":
        pre = ColumnTransformer(
            [
                ("num", "passthrough", num),
                (
                    "cat",
                    OrdinalEncoder(
                        handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1
                    ),
                    cat,
                ),
            ]
        )
        cat_mask = [False] * len(num) + [True] * len(cat)
        est_cls = (
            HistGradientBoostingClassifier if data.task == "classification" else HistGradientBoostingRegressor
        )
        kw = {"categorical_features": cat_mask} if cat else {}
        return make_pipeline(
            pre, est_cls(random_state=inputs.seed, early_stopping=False, max_iter=inputs.hgb_max_iter, **kw)
        )
    # logreg on tabular inputs
    pre = ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), num),
            (
                "cat",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="(missing)"),
                    OneHotEncoder(handle_unknown="ignore", min_frequency=inputs.min_df),
                ),
                cat,
            ),
        ]
    )
    return make_pipeline(
        pre, LogisticRegression(C=c_value, max_iter=inputs.max_iter, random_state=inputs.seed)
    )


def _float32() -> Any:
    import numpy as np

    return np.float32


def _tab_kinds(data: Data) -> tuple[list[int], list[int]]:
    num, cat = [], []
    for i, c in enumerate(data.tab_cols):
        (num if data.fit.schema[c].is_numeric() else cat).append(i)
    return num, cat


def _features(name: str, frame: pl.DataFrame, data: Data) -> Any:
    import numpy as np

    if name == "tfidf_logreg":
        return _text(frame, data.text_cols)
    if name in ("hgb", "logreg"):
        num, cat = _tab_kinds(data)
        cols = []
        for i, c in enumerate(data.tab_cols):
            s = frame.get_column(c)
            cols.append(s.cast(float).to_numpy() if i in num else s.cast(str).to_numpy().astype(object))
        out = np.empty((frame.height, len(cols)), dtype=object)
        for j, col in enumerate(cols):
            out[:, j] = col
        return out
    return np.zeros((frame.height, 1))


def _target(frame: pl.DataFrame, data: Data) -> np.ndarray:
    import numpy as np

    y = frame.get_column("target")
    if data.task == "regression":
        try:
            return y.cast(float).to_numpy()
        except Exception:
            raise StageInputError(
                "the claim's metric is a regression metric but the target is not numeric"
            ) from None
    return np.asarray(y.to_list(), dtype=object)


def _predict(model: Any, x: Any, data: Data) -> np.ndarray:
    """Class probabilities in the declared class order (absent-from-train classes get 0), or values."""
    import numpy as np

    if data.task != "classification":
        return np.asarray(model.predict(x), dtype=np.float64)
    raw = model.predict_proba(x)
    out = np.zeros((raw.shape[0], len(data.classes)))
    for j, c in enumerate(model.classes_):
        out[:, data.classes.index(str(c))] = raw[:, j]
    return out / out.sum(axis=1, keepdims=True)


def _fit_predict(
    name: str, data: Data, inputs: Inputs, c_value: float, fit_idx: Any, targets: list[Any]
) -> list[Any]:
    fit = data.fit if fit_idx is None else data.fit[fit_idx]
    y = _target(fit, data)
    model = _make_model(name, data, inputs, c_value)
    if data.task == "classification" and len(set(y.tolist())) < 2 and name not in CLASS_TRIVIAL:
        from sklearn.dummy import DummyClassifier

        model = DummyClassifier(strategy="prior")  # one class in the fitting rows: nothing to learn
    model.fit(_features(name, fit, data), y)
    return [_predict(model, _features(name, t, data), data) for t in targets]


def _selected_c(
    name: str, data: Data, inputs: Inputs, metric: str, fit_idx: Any, select_on: Any
) -> tuple[float, list[dict[str, Any]]]:
    """C chosen by the primary metric: on dev (holdout) or inside the outer training fold (nested)."""
    import numpy as np

    from engine import splits

    if name not in ("tfidf_logreg", "logreg") or not inputs.C_grid:
        return inputs.C, []
    trials = []
    for c in inputs.C_grid:
        if select_on is not None:  # holdout: dev selects
            pred = _fit_predict(name, data, inputs, c, None, [select_on])[0]
            score = _score(metric, _target(select_on, data), pred, data)
        else:  # nested: inner family folds inside the outer training rows
            inner = data.fit[fit_idx]
            fam = (
                inner.get_column("family_id").fill_null(-1).to_numpy()
                if "family_id" in inner.columns
                else np.arange(inner.height)
            )
            ifold = splits.assign_folds(np.asarray(fam, dtype=np.int64), 3, inputs.seed + 7)
            scores = []
            for k in range(3):
                tr, te = np.asarray(fit_idx)[ifold != k], inner[np.flatnonzero(ifold == k)]
                if len(tr) == 0 or te.height == 0:
                    continue
                pred = _fit_predict(name, data, inputs, c, tr, [te])[0]
                scores.append(_score(metric, _target(te, data), pred, data))
            score = float(np.mean(scores)) if scores else float("nan")
        # TOML has no null and NaN never compares equal on replay: an undefined score is a flag
        trials.append(
            {"C": float(c), "score": score} if score == score else {"C": float(c), "undefined": True}
        )
    sign = 1 if metric in LOWER_IS_BETTER else -1
    best = min(trials, key=lambda t: (sign * t["score"] if "score" in t else float("inf"), t["C"]))
    return best["C"], trials


def _score(metric: str, y: np.ndarray, pred: np.ndarray, data: Data) -> float:
    from engine import metrics as m

    if data.task == "regression":
        return float(m.regression_report(y, pred).get(metric, float("nan")))
    rep = m.classification_report(y, pred, data.classes)
    return float(rep.get(metric, float("nan")))


@dataclass
class Fitted:
    name: str
    eval_pred: np.ndarray  # probabilities (classification) or values on the eval rows
    cal_pred: np.ndarray | None  # on calibration rows (holdout only)
    c_value: float | None = None
    trials: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def _run_learner(name: str, data: Data, inputs: Inputs, metric: str) -> Fitted:
    import numpy as np

    t0 = time.perf_counter()
    if data.mode == "holdout":
        c, trials = _selected_c(name, data, inputs, metric, None, data.eval)
        targets = [data.eval] + ([data.cal] if data.cal.height else [])
        preds = _fit_predict(name, data, inputs, c, None, targets)
        out = Fitted(name, preds[0], preds[1] if len(preds) > 1 else None, c, trials)
    else:
        width = len(data.classes) if data.task == "classification" else 0
        oof = np.zeros((data.eval.height, width)) if width else np.zeros(data.eval.height)
        cs, trials = [], []
        for fit_idx, ev_idx in data.folds:
            c, tr = _selected_c(name, data, inputs, metric, fit_idx, None)
            cs.append(c)
            trials.extend(tr)
            oof[ev_idx] = _fit_predict(name, data, inputs, c, fit_idx, [data.eval[ev_idx]])[0]
        out = Fitted(name, oof, None, cs[0] if len(set(cs)) == 1 else None, trials)
    out.seconds = time.perf_counter() - t0
    return out


def refit_best(upstream: dict[str, StageRecord], ctx: StageContext) -> tuple[Any, str]:
    """Refit the recorded best conventional learner on its own fitting rows (train, or train+dev for
    K-fold) with its recorded settings, for a later stage's comparison. Returns (predict(frame), name)."""
    import math

    rec = upstream.get("baseline")
    conv = rec.check("baseline.conventional") if rec else None
    learners = dict(conv.measured.get("learners", {})) if conv else {}
    if not learners:
        raise StageInputError("the baseline stage recorded no conventional learner to compare against")
    metric = str(conv.measured.get("primary_metric", "macro_f1"))
    lower = metric in LOWER_IS_BETTER
    best = sorted(
        learners,
        key=lambda n: float(learners[n].get(metric, math.inf if lower else -math.inf)) * (1 if lower else -1),
    )[0]
    inputs = Inputs.model_validate(rec.inputs)
    data = _load(inputs, upstream, ctx)
    model = _make_model(best, data, inputs, float(learners[best].get("C", inputs.C)))
    model.fit(_features(best, data.fit, data), _target(data.fit, data))

    def predict(frame: Any) -> Any:
        return _predict(model, _features(best, frame, data), data)

    return predict, best


# ---------------------------------------------------------------- the stage


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    import numpy as np

    t_start = time.perf_counter()
    ctx.progress(0.0, "reading train / dev / calibration rows")
    data = _load(inputs, upstream, ctx)
    claim = upstream["claim"].inputs
    learners = inputs.learners or _default_learners(data.task, claim, data.text_cols)
    _validate_learners(learners, data)
    metric = str(claim.get("primary_metric") or ("mae" if data.task == "regression" else "macro_f1"))
    metric = REPORT_KEY.get(metric, metric)
    if data.task == "generation":
        metric = "exact_match"
    t_load = time.perf_counter() - t_start

    fitted: dict[str, Fitted] = {}
    for i, name in enumerate(learners):
        ctx.check_cancelled()
        ctx.progress(0.1 + 0.6 * i / len(learners), f"fitting {name}")
        if data.task == "generation":
            fitted[name] = _most_frequent_answer(data)
        else:
            fitted[name] = _run_learner(name, data, inputs, metric)
    ctx.progress(0.75, "bootstrap intervals and comparisons")
    mask = _evaluated(data)
    y_eval = _target(data.eval, data)[mask]
    units = data.units[mask]
    checks: list[Check] = []
    notes: list[Note] = []
    if data.task == "classification":
        checks += _classification_checks(inputs, data, fitted, y_eval, units, mask, metric, upstream, notes)
    elif data.task == "regression":
        checks += _regression_checks(inputs, data, fitted, y_eval, units, mask, metric)
    else:
        checks += _generation_checks(inputs, data, fitted, y_eval, units, mask)
    checks.append(_predictions_check(data, fitted, mask, ctx))
    checks.append(_locked_test_check(upstream, ctx))
    checks.append(_timing_check(data, fitted, t_load, time.perf_counter() - t_start))
    ctx.progress(1.0, "done")
    _ = np
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks, notes=notes)


def _evaluated(data: Data) -> np.ndarray:
    import numpy as np

    if data.eval_fold is None:
        return np.ones(data.eval.height, dtype=bool)
    return data.eval_fold >= 0


def _coverage(data: Data, mask: np.ndarray) -> str:
    n = int(mask.sum())
    if data.mode == "holdout":
        return f"full: all {n} dev rows"
    return (
        f"full: {n} of {data.eval.height} train+dev rows, out-of-fold ({len(data.folds)} folds, {data.mode})"
    )


def _where(data: Data) -> str:
    return "dev" if data.mode == "holdout" else "out-of-fold"


def _most_frequent_answer(data: Data) -> Fitted:
    import numpy as np

    counts = data.fit.get_column("target").value_counts(sort=True)
    top = counts.sort(["count", "target"], descending=[True, False]).get_column("target")[0]
    return Fitted("most_frequent_answer", np.asarray([top] * data.eval.height, dtype=object), None)


# ---------------------------------------------------------------- classification checks


def _classification_checks(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
    upstream: dict[str, StageRecord],
    notes: list[Note],
) -> list[Check]:
    from engine import metrics as m

    reports = {
        n: m.classification_report(y, f.eval_pred[mask], data.classes, ece_bins=inputs.ece_bins)
        for n, f in fitted.items()
    }
    present = [
        i for i, c in enumerate(data.classes) if reports[next(iter(reports))]["per_class"][i]["support"] > 0
    ]
    intervals = {
        n: _intervals(inputs, data, y, f.eval_pred[mask], units, present, metric) for n, f in fitted.items()
    }
    cov = _coverage(data, mask)
    trivial = [n for n in fitted if n in CLASS_TRIVIAL]
    conventional = [n for n in fitted if n in CLASS_CONVENTIONAL]
    out = [_trivial_check(data, reports, intervals, trivial, cov)]
    out.append(_conventional_check(data, fitted, reports, intervals, conventional, metric, cov))
    out.append(_per_class_check(data, reports, trivial, cov))
    best = _best(conventional, reports, metric)
    out.append(
        _learnability_check(
            inputs, data, fitted, reports, y, units, mask, metric, best, present, upstream, cov, notes
        )
    )
    cal_check, calibrated = _calibration_check(inputs, data, fitted, y, mask, best)
    out.append(cal_check)
    out.append(_operating_point_check(inputs, data, fitted, y, mask, best, calibrated))
    return out


def _intervals(
    inputs: Inputs,
    data: Data,
    y: np.ndarray,
    proba: np.ndarray,
    units: np.ndarray,
    present: list[int],
    metric: str,
) -> dict[str, Any]:
    from engine import uncertainty

    names = ["accuracy", "macro_f1"] + (
        [metric] if metric in DECOMPOSABLE and metric not in ("accuracy", "macro_f1") else []
    )
    out = {}
    for name in names:
        out[name] = uncertainty.bootstrap_ci(
            name,
            y,
            proba,
            units,
            n=inputs.bootstrap_resamples,
            seed=inputs.bootstrap_seed,
            classes=data.classes,
            labels=present,
        )
        out[name]["unit"] = data.unit_kind
    return out


def _slim(report: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "n",
        "accuracy",
        "majority_class",
        "majority_rate",
        "macro_f1",
        "weighted_f1",
        "balanced_accuracy",
        "macro_auroc",
        "macro_auprc",
        "log_loss",
        "brier",
        "ece",
        "ece_bins",
        "confusion",
        "per_class",
        "classes_absent",
        "collapsed_classes",
        "undefined",
    )
    return {k: report[k] for k in keys if k in report}


def _trivial_check(
    data: Data, reports: dict[str, Any], intervals: dict[str, Any], trivial: list[str], cov: str
) -> Check:
    if not trivial:
        return Check(
            id="baseline.trivial",
            status="warn",
            basis="decided",
            summary="no trivial learner was run",
            coverage=cov,
            why="Without a trivial reference, 'better' has no floor.",
            playbook=PB_TRIVIAL,
        )
    first = reports[trivial[0]]
    majority_train = str(data.fit.get_column("target").mode().sort()[0])
    same = abs(first["accuracy"] - first["majority_rate"]) < 1e-12
    parts = [
        f"{n}: accuracy {reports[n]['accuracy']:.4f}, macro-F1 {reports[n].get('macro_f1', 0.0):.4f}, "
        f"log loss {reports[n]['log_loss']:.4f}"
        for n in trivial
    ]
    summary = (
        f"{'; '.join(parts)} on {_where(data)}; {_where(data)} majority rate {first['majority_rate']:.4f} "
        f"('{first['majority_class']}')" + ("" if same else f"; train majority is '{majority_train}'")
    )
    return Check(
        id="baseline.trivial",
        status="info",
        summary=summary,
        coverage=cov,
        measured={
            "learners": {n: _slim(reports[n]) | {"intervals": intervals[n]} for n in trivial},
            "train_majority_class": majority_train,
            "accuracy_equals_majority_rate": same,
        },
        why="The trivial learner's score is the floor every model must clear; accuracy alone reaches the majority rate.",
        playbook=PB_TRIVIAL,
    )


def _conventional_check(
    data: Data,
    fitted: dict[str, Fitted],
    reports: dict[str, Any],
    intervals: dict[str, Any],
    conventional: list[str],
    metric: str,
    cov: str,
) -> Check:
    if not conventional:
        return Check(
            id="baseline.conventional",
            status="not_run",
            basis="not_run",
            summary="no conventional learner chosen",
            coverage=cov,
            why="A simple learner shows whether the inputs carry signal.",
            playbook=PB_TRIVIAL,
        )
    measured: dict[str, Any] = {
        "primary_metric": metric,
        "fitted_on": "train" if data.mode == "holdout" else "folds",
        "measured_on": _where(data),
        "mode": data.mode,
        "learners": {},
    }
    parts = []
    for n in conventional:
        f = fitted[n]
        ci = intervals[n].get(metric, intervals[n]["macro_f1"])
        entry = _slim(reports[n]) | {"intervals": intervals[n], "trials": f.trials}
        if f.c_value is not None:
            entry["C"] = f.c_value
        measured["learners"][n] = entry
        val = reports[n].get(metric)
        parts.append(
            f"{n}: {metric} {val:.4f} [{ci.get('lo', float('nan')):.4f}, {ci.get('hi', float('nan')):.4f}]"
            if val is not None
            else f"{n}: {metric} undefined"
        )
    return Check(
        id="baseline.conventional",
        status="info",
        summary="; ".join(parts) + f" on {_where(data)}",
        coverage=cov,
        measured=measured,
        why="Fitted on train only (vocabulary and encoders too), measured on rows it never saw.",
        playbook=PB_TRIVIAL,
    )


def _per_class_check(data: Data, reports: dict[str, Any], trivial: list[str], cov: str) -> Check:
    collapsed = {n: r["collapsed_classes"] for n, r in reports.items() if r["collapsed_classes"]}
    learned = {n: c for n, c in collapsed.items() if n not in trivial}
    recall = {n: {p["class"]: p.get("recall", -1.0) for p in r["per_class"]} for n, r in reports.items()}
    parts = [f"{n} never recalls {', '.join(c)}" for n, c in collapsed.items()]
    status = "warn" if learned else "info"
    if not parts:
        summary = "every learner recalls at least one row of every class present"
    else:
        summary = "; ".join(parts) + (
            " (expected of trivial learners; accuracy hides it)" if not learned else ""
        )
    weakest = {}
    for n, r in reports.items():
        rated = [p for p in r["per_class"] if "recall" in p]
        if n not in trivial and rated:
            low = min(rated, key=lambda p: (p["recall"], p["class"]))
            weakest[n] = {"class": low["class"], "recall": low["recall"], "support": low["support"]}
            summary += f"; {n}'s weakest class: {low['class']} (recall {low['recall']:.3f}, support {low['support']})"
    absent = reports[next(iter(reports))]["classes_absent"]
    if absent:
        summary += f"; classes absent from {_where(data)}: {', '.join(absent)}"
    return Check(
        id="baseline.per_class",
        status=status,
        summary=summary,
        coverage=cov,
        measured={
            "collapsed": collapsed,
            "weakest": weakest,
            "recall": recall,
            "classes_absent": absent,
            "recall_absent_marker": -1.0,
        },
        why="A model that predicts only the majority class scores the majority rate in accuracy and zero recall on the rest.",
        playbook=PB_RARE,
    )


def _best(conventional: list[str], reports: dict[str, Any], metric: str) -> str:
    if not conventional:
        return ""
    sign = 1 if metric in LOWER_IS_BETTER else -1

    def key(n: str) -> tuple[int, float, int]:
        v = reports[n].get(metric)  # an undefined metric ranks last, never first
        return (1, 0.0, conventional.index(n)) if v is None else (0, sign * float(v), conventional.index(n))

    return min(conventional, key=key)


def _noise_ceiling(upstream: dict[str, StageRecord]) -> tuple[float | None, str]:
    """The accuracy ceiling implied by conflicting labels, if the source stage recorded one."""
    check = upstream["source"].check("source.conflicting_labels")
    if check is None or check.status == "not_run":
        return None, "the source stage recorded no conflicting-labels measurement"
    meas = check.measured
    for key in ("noise_ceiling_accuracy", "accuracy_ceiling", "noise_ceiling", "label_noise_ceiling"):
        v = meas.get(key)
        if isinstance(v, int | float) and 0 <= v <= 1:
            return float(v), f"source.conflicting_labels.{key}"
    for key, v in meas.items():
        if "ceiling" in key and isinstance(v, int | float) and 0 <= v <= 1:
            return float(v), f"source.conflicting_labels.{key}"
    return None, "source.conflicting_labels has no ceiling value"


def _learnability_check(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    reports: dict[str, Any],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
    best: str,
    present: list[int],
    upstream: dict[str, StageRecord],
    cov: str,
    notes: list[Note],
) -> Check:
    from engine import metrics as m
    from engine import uncertainty

    ref = (
        inputs.trivial_reference
        if inputs.trivial_reference in fitted
        else next((n for n in fitted if n in CLASS_TRIVIAL), "")
    )
    if not best or not ref:
        return Check(
            id="baseline.learnability",
            status="not_run",
            basis="not_run",
            coverage=cov,
            summary="needs one trivial and one conventional learner",
            why="",
            playbook=PB_LEARN,
        )
    boot_metric = metric if metric in DECOMPOSABLE or metric in RANKING else "macro_f1"
    lower = boot_metric in LOWER_IS_BETTER
    pa, pb = fitted[best].eval_pred[mask], fitted[ref].eval_pred[mask]
    # AUROC / AUPRC do not decompose into per-unit sums: the (slower) per-resample path computes them
    stat: Any = getattr(m, boot_metric) if boot_metric in RANKING else boot_metric
    diff = uncertainty.paired_bootstrap_diff(
        stat,
        y,
        pa,
        pb,
        units,
        n=inputs.bootstrap_resamples,
        seed=inputs.bootstrap_seed,
        classes=data.classes,
        labels=present,
    )
    diff["metric"] = boot_metric
    if boot_metric in RANKING:
        diff["method"] += " (per-resample recomputation; macro over classes defined in each resample)"
    diff["unit"] = data.unit_kind
    acc_diff = uncertainty.paired_bootstrap_diff(
        "accuracy",
        y,
        pa,
        pb,
        units,
        n=inputs.bootstrap_resamples,
        seed=inputs.bootstrap_seed,
        classes=data.classes,
        labels=present,
    )
    acc_diff["unit"] = data.unit_kind
    yi = m.encode(y, data.classes)
    test = uncertainty.mcnemar(m.argmax_pred(pa) == yi, m.argmax_pred(pb) == yi)
    better = "lo" in diff and ((diff["hi"] < 0) if lower else (diff["lo"] > 0))
    ceiling, ceiling_from = _noise_ceiling(upstream)
    acc = reports[best]["accuracy"]
    measured: dict[str, Any] = {
        "learner": best,
        "reference": ref,
        "metric": boot_metric,
        "difference": diff,
        "accuracy_difference": acc_diff,
        "mcnemar": test,
        "beats_trivial": better,
        "selected_on": _where(data),
        "noise_ceiling_source": ceiling_from,
    }
    verdict = (
        f"{best} beats {ref} on {boot_metric} by {diff['estimate']:+.4f} "
        f"[{diff.get('lo', float('nan')):+.4f}, {diff.get('hi', float('nan')):+.4f}] "
        f"({diff['resamples']} {data.unit_kind} resamples, {diff['units']} units); "
        f"McNemar p={test['p_value']:.3g}"
    )
    if not better:
        verdict = verdict.replace(" beats ", " does not clearly beat ")
    status = "pass" if better else "warn"
    if ceiling is None:
        measured["ceiling_comparison"] = "not_run"
        verdict += "; label-noise ceiling not measured"
    else:
        gap = ceiling - acc
        measured.update(noise_ceiling=ceiling, accuracy=acc, gap_to_ceiling=gap)
        if gap < -0.01:
            measured["ceiling_comparison"] = "above_ceiling"
            status = "warn"
            verdict += (
                f"; accuracy {acc:.4f} exceeds the label-noise ceiling {ceiling:.4f} — suspect leakage "
                "or a ceiling measured on too few duplicated inputs"
            )
        else:
            measured["ceiling_comparison"] = "below_ceiling"
            verdict += f"; accuracy {acc:.4f} vs label-noise ceiling {ceiling:.4f} (gap {gap:.4f})"
            if ceiling < 1.0:
                notes.append(
                    Note(
                        tag="limitation",
                        text=(
                            f"Contradictory labels on identical inputs cap accuracy at about {ceiling:.4f} "
                            f"({ceiling_from}); no model trained on these labels can be expected to exceed it."
                        ),
                    )
                )
    if data.mode == "holdout" and fitted[best].trials:
        verdict += "; C was selected on dev, so the dev figure of the chosen C is optimistic"
    return Check(
        id="baseline.learnability",
        status=status,
        summary=verdict,
        coverage=cov,
        measured=measured,
        why="Learnable means the conventional learner beats the trivial one with an interval over the independent "
        "unit that excludes zero; weak or contradictory labels are a limit, reported, not hidden.",
        playbook=PB_LEARN,
    )


# ---------------------------------------------------------------- calibration and operating point


def _calibration_sets(
    data: Data, fitted: dict[str, Fitted], mask: np.ndarray, best: str, y: np.ndarray
) -> tuple[str, Any]:
    """Where calibration is fitted: the calibration split (holdout) or cross-fitted over folds (K-fold)."""
    if data.mode == "holdout":
        if data.cal.height == 0 or fitted[best].cal_pred is None:
            return "none", None
        return "calibration_split", (fitted[best].cal_pred, _target(data.cal, data))
    return "out_of_fold", (fitted[best].eval_pred[mask], y, data.eval_fold[mask])


def _calibration_check(
    inputs: Inputs, data: Data, fitted: dict[str, Fitted], y: np.ndarray, mask: np.ndarray, best: str
) -> tuple[Check, Any]:
    import numpy as np

    from engine import calibration
    from engine import metrics as m

    base = dict(
        id="baseline.calibration",
        why="Calibration fitted on the rows it is scored on looks better than it is; "
        "scores on the fitting rows are in-sample.",
        playbook=PB_CAL,
    )
    if not best or inputs.calibration == "none":
        why = "no conventional learner" if not best else "calibration method 'none' chosen"
        return Check(status="not_run", basis="not_run", summary=f"not run: {why}", **base), None
    where, sets = _calibration_sets(data, fitted, mask, best, y)
    if sets is None:
        return Check(
            status="not_run",
            basis="not_run",
            summary="not run: no calibration split and not in K-fold mode; the split stage makes one",
            **base,
        ), None
    raw = fitted[best].eval_pred[mask]
    yi = m.encode(y, data.classes)

    def figures(p: np.ndarray, yy: np.ndarray, sample: str) -> dict[str, Any]:
        r = m.classification_report(yy, p, data.classes, ece_bins=inputs.ece_bins)
        return {
            "sample": sample,
            "log_loss": r["log_loss"],
            "brier": r["brier"],
            "ece": r["ece"],
            "accuracy": r["accuracy"],
            "rows": r["n"],
        }

    if where == "calibration_split":
        cal_p, cal_y = sets
        cal_i = m.encode(cal_y, data.classes)
        calib = calibration.fit_calibrator(inputs.calibration, cal_p, cal_i, seed=inputs.seed)
        out_p = calib.transform(raw)
        fitting = {
            "raw": figures(cal_p, cal_y, "in-sample (fitting rows, before calibration)"),
            "calibrated": figures(calib.transform(cal_p), cal_y, "in-sample (fitting rows)"),
        }
        calibrated_fit = (calib.transform(cal_p), cal_i)
    else:
        p_all, _, folds = sets
        out_p = np.zeros_like(p_all)
        for k in sorted(set(folds.tolist())):  # cross-fit: each fold calibrated by the others
            other = folds != k
            if len(set(yi[other].tolist())) < 2:
                out_p[folds == k] = p_all[folds == k]
                continue
            out_p[folds == k] = calibration.fit_calibrator(
                inputs.calibration, p_all[other], yi[other], seed=inputs.seed
            ).transform(p_all[folds == k])
        calib = calibration.fit_calibrator(inputs.calibration, p_all, yi, seed=inputs.seed)
        fitting = {"calibrated": figures(calib.transform(p_all), y, "in-sample (all out-of-fold rows)")}
        calibrated_fit = (out_p, yi)
    evaluation = {
        "raw": figures(raw, y, f"out-of-sample ({_where(data)})"),
        "calibrated": figures(
            out_p,
            y,
            f"out-of-sample ({_where(data)}" + (", cross-fitted)" if where == "out_of_fold" else ")"),
        ),
    }
    r0, r1 = evaluation["raw"], evaluation["calibrated"]
    summary = (
        f"{best}, {inputs.calibration} fitted on {where.replace('_', ' ')}: {_where(data)} ECE "
        f"{r0['ece']:.4f} raw → {r1['ece']:.4f} calibrated, log loss {r0['log_loss']:.4f} → "
        f"{r1['log_loss']:.4f} (out-of-sample; {inputs.ece_bins} bins)"
    )
    measured = {
        "learner": best,
        "method": inputs.calibration,
        "fitted_on": where,
        "params": calib.params,
        "evaluation": evaluation,
        "fitting_rows": fitting,
        "ece_bins": inputs.ece_bins,
    }
    return Check(status="info", summary=summary, coverage=_coverage(data, mask), measured=measured, **base), (
        out_p,
        calibrated_fit,
        calib,
    )


def _operating_point_check(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    mask: np.ndarray,
    best: str,
    calibrated: Any,
) -> Check:
    import numpy as np

    from engine import calibration
    from engine import metrics as m

    op = inputs.operating_point
    base = dict(
        id="baseline.operating_point",
        why="An action threshold is a decision about error costs; 0.5 or "
        "arg-max is not a default that fits every cost.",
        playbook=PB_CAL,
    )
    if op.constraint == "none":
        return Check(
            status="not_run",
            basis="not_run",
            summary="no operating constraint or cost declared; decisions "
            "are arg-max over classes and no threshold was chosen",
            **base,
        )
    if op.positive_class not in data.classes:
        raise StageInputError(
            f"operating_point.positive_class '{op.positive_class}' is not one of {data.classes}"
        )
    if not best:
        return Check(
            status="not_run",
            basis="not_run",
            summary="no conventional learner to set a threshold for",
            **base,
        )
    j = data.classes.index(op.positive_class)
    yi = m.encode(y, data.classes)
    kw = dict(constraint=op.constraint, target=op.target, cost_fp=op.cost_fp, cost_fn=op.cost_fn)
    if (
        calibrated is None
    ):  # no calibration available: the threshold is fitted on raw scores of the same sources
        return Check(
            status="not_run",
            basis="not_run",
            summary="not run: no calibration split or out-of-fold predictions to fit a threshold on",
            **base,
        )
    eval_p, (fit_p, fit_y), _ = calibrated
    if data.mode == "holdout":
        choice = calibration.choose_threshold(fit_y == j, fit_p[:, j], **kw)
        applied = calibration.binary_counts(yi == j, eval_p[:, j], choice["threshold"])
    else:
        folds = data.eval_fold[mask]
        flags = np.zeros(len(yi), dtype=bool)
        for k in sorted(set(folds.tolist())):
            other, this = folds != k, folds == k
            t = calibration.choose_threshold(fit_y[other] == j, fit_p[other, j], **kw)["threshold"]
            flags[this] = eval_p[this, j] >= t
        choice = calibration.choose_threshold(fit_y == j, fit_p[:, j], **kw)
        applied = calibration.binary_counts(yi == j, flags.astype(float), 0.5)
        applied["threshold"] = "cross-fitted per fold"
    choice["fit_sample"] = "in-sample (the rows the threshold was chosen on)"
    applied["sample"] = f"out-of-sample ({_where(data)})"
    rule = (
        f"precision ≥ {op.target}"
        if op.constraint == "min_precision"
        else f"recall ≥ {op.target}"
        if op.constraint == "min_recall"
        else f"min {op.cost_fp}·FP + {op.cost_fn}·FN"
    )
    status = "pass"
    if not choice["feasible"]:
        status = "warn"
        summary = f"'{op.positive_class}': no threshold meets {rule} on the fitting rows"
    else:
        got = applied.get("precision" if op.constraint == "min_precision" else "recall", 0.0)
        summary = (
            f"'{op.positive_class}' ≥ {choice['threshold']:.4f} ({rule}, chosen on calibrated "
            f"{'calibration split' if data.mode == 'holdout' else 'out-of-fold'} scores): {_where(data)} "
            f"precision {applied['precision']:.4f}, recall {applied.get('recall', float('nan')):.4f}"
        )
        if op.constraint != "cost" and got < op.target:
            status = "warn"
            summary += f"; the constraint does not hold out-of-sample ({got:.4f} < {op.target})"
    return Check(
        status=status,
        summary=summary,
        coverage=_coverage(data, mask),
        measured={
            "learner": best,
            "positive_class": op.positive_class,
            "rule": rule,
            "choice": choice,
            "applied": applied,
        },
        **base,
    )


# ---------------------------------------------------------------- regression and generation


def _regression_checks(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
) -> list[Check]:
    from engine import metrics as m
    from engine import uncertainty

    cov = _coverage(data, mask)
    reps = {n: m.regression_report(y, f.eval_pred[mask]) for n, f in fitted.items()}
    for n, f in fitted.items():
        reps[n]["intervals"] = {
            k: uncertainty.bootstrap_ci(
                k, y, f.eval_pred[mask], units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
            )
            | {"unit": data.unit_kind}
            for k in ("mae", "rmse")
        }
    trivial = [n for n in fitted if n in REG_TRIVIAL]
    conv = [n for n in fitted if n in REG_CONVENTIONAL]
    desc = "; ".join(f"{n}: MAE {reps[n]['mae']:.4g}, RMSE {reps[n]['rmse']:.4g}" for n in fitted)
    out = [
        Check(
            id="baseline.trivial",
            status="info",
            summary=desc,
            coverage=cov,
            measured={"learners": {n: reps[n] for n in trivial}},
            why="The floor a model must clear.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="info" if conv else "not_run",
            basis="measured" if conv else "not_run",
            summary=desc if conv else "no conventional learner chosen",
            coverage=cov,
            measured={"learners": {n: reps[n] for n in conv}},
            why="Signal in the inputs.",
            playbook=PB_TRIVIAL,
        ),
    ]
    boot = metric if metric in ("mae", "rmse", "r2") else "mae"
    if conv and trivial:
        best = min(conv, key=lambda n: reps[n][boot] if boot != "r2" else -reps[n].get("r2", -1e9))
        ref = inputs.trivial_reference if inputs.trivial_reference in trivial else trivial[0]
        diff = uncertainty.paired_bootstrap_diff(
            boot,
            y,
            fitted[best].eval_pred[mask],
            fitted[ref].eval_pred[mask],
            units,
            n=inputs.bootstrap_resamples,
            seed=inputs.bootstrap_seed,
        )
        better = "lo" in diff and (diff["lo"] > 0 if boot == "r2" else diff["hi"] < 0)
        out.append(
            Check(
                id="baseline.learnability",
                status="pass" if better else "warn",
                coverage=cov,
                summary=f"{best} − {ref} {boot}: {diff['estimate']:+.4g} [{diff.get('lo', 0):+.4g}, "
                f"{diff.get('hi', 0):+.4g}] ({data.unit_kind} bootstrap)",
                measured={"learner": best, "reference": ref, "difference": diff, "beats_trivial": better},
                why="Learnable means the conventional learner beats the trivial one beyond noise.",
                playbook=PB_LEARN,
            )
        )
    na = "not a classification task"
    for cid in ("baseline.per_class", "baseline.calibration", "baseline.operating_point"):
        out.append(
            Check(id=cid, status="not_run", basis="not_run", summary=f"not run: {na}", playbook=PB_RARE)
        )
    return out


def _generation_checks(
    inputs: Inputs, data: Data, fitted: dict[str, Fitted], y: np.ndarray, units: np.ndarray, mask: np.ndarray
) -> list[Check]:
    import numpy as np

    from engine import metrics as m
    from engine import uncertainty

    f = fitted["most_frequent_answer"]
    answer = str(f.eval_pred[0]) if len(f.eval_pred) else ""
    em = m.exact_match(list(y), list(f.eval_pred[mask]))

    def em_fn(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    yy = np.asarray([" ".join(str(s).split()).casefold() for s in y], dtype=object)
    pp = np.asarray([" ".join(answer.split()).casefold()] * len(yy), dtype=object)
    ci = uncertainty.bootstrap_ci(
        em_fn, yy, pp, units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
    )
    ci["unit"] = data.unit_kind
    cov = _coverage(data, mask)
    return [
        Check(
            id="baseline.trivial",
            status="info",
            coverage=cov,
            summary=f"most frequent training answer: exact match {em:.4f} [{ci.get('lo', 0):.4f}, {ci.get('hi', 0):.4f}]",
            measured={
                "answer": answer[:200],
                "exact_match": em,
                "interval": ci,
                "normalisation": "whitespace collapsed, case-folded",
            },
            why="Repeating the commonest answer is the floor for a generative task.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="not_run",
            basis="not_run",
            summary="no conventional learner for free generation; the unchanged base model is the comparator "
            "measured at the artifact stage",
            playbook=PB_TRIVIAL,
        ),
    ]


# ---------------------------------------------------------------- files, locked test, timing


def _predictions_frame(data: Data, fitted: dict[str, Fitted], mask: np.ndarray) -> pl.DataFrame:
    import numpy as np
    import polars as pl

    from engine.metrics import argmax_pred

    row_id = data.eval.get_column("row_id").to_numpy()[mask]
    frames = []
    for name, f in fitted.items():
        cols: dict[str, Any] = {"row_id": row_id, "learner": [name] * len(row_id)}
        pred = f.eval_pred[mask]
        if data.task == "classification":
            cols["predicted"] = [data.classes[i] for i in argmax_pred(pred)]
            for j, c in enumerate(data.classes):
                cols[f"proba_{c}"] = pred[:, j].astype(np.float64)
        elif data.task == "regression":
            cols["predicted"] = pred.astype(np.float64)
        else:
            cols["predicted"] = [str(v) for v in pred]
        frames.append(pl.DataFrame(cols))
    return pl.concat(frames) if frames else pl.DataFrame()


def _predictions_check(data: Data, fitted: dict[str, Fitted], mask: np.ndarray, ctx: StageContext) -> Check:
    import hashlib

    frame = _predictions_frame(data, fitted, mask)
    buf = io.BytesIO()
    frame.write_parquet(buf, compression="zstd", statistics=False)
    blob = buf.getvalue()
    path = ctx.data_dir / PREDICTIONS_FILE
    if not ctx.replay:
        atomic_write_bytes(path, blob)
    return Check(
        id="baseline.predictions",
        status="info",
        summary=f"{frame.height} {_where(data)} predictions ({len(fitted)} learners) saved to data/{PREDICTIONS_FILE}",
        coverage=_coverage(data, mask),
        measured={
            "path": f"data/{PREDICTIONS_FILE}",
            "sha256": hashlib.sha256(blob).hexdigest(),
            "rows": frame.height,
            "columns": frame.columns,
        },
        why="Saved predictions let a reviewer recompute every figure without refitting.",
        playbook=PB_REPORT,
    )


def _locked_test_check(upstream: dict[str, StageRecord], ctx: StageContext) -> Check:
    """Probe the guard (it must refuse before reading anything) and count locked reads on this context."""
    from engine import splits

    refused, message = False, ""
    try:
        splits.rows("test", upstream, ctx, caller=CALLER)
    except splits.LockedTestError as exc:
        refused, message = True, str(exc)
    reads = [r for r in splits.locked_reads(ctx) if r.get("caller") == CALLER]
    ok = refused and not reads
    return Check(
        id="baseline.locked_test",
        status="pass" if ok else "fail",
        summary=(
            "the locked test was not read: the guard refused this stage and 0 locked reads are logged"
            if ok
            else f"the locked test was read by this stage ({len(reads)} read(s)); its figures cannot select anything"
        ),
        measured={
            "guard_refused": refused,
            "refusal": message,
            "locked_reads": len(reads),
            "splits_read": ["train", "dev", "calibration"],
        },
        why="Final results must select nothing; a stage that saw the test labels cannot claim an unbiased test.",
        playbook=PB_SPLITS,
    )


def _timing_check(data: Data, fitted: dict[str, Fitted], t_load: float, total: float) -> Check:
    per = {n: round(f.seconds, 3) for n, f in fitted.items()}
    return Check(
        id="baseline.timing",
        status="info",
        replay="observation",
        summary=f"stage took {total:.1f} s (reading {t_load:.1f} s; "
        + ", ".join(f"{n} {s:.1f} s" for n, s in per.items())
        + f") for {data.fit.height} fitting rows and {data.eval.height} evaluated rows",
        measured={
            "total_seconds": round(total, 3),
            "load_seconds": round(t_load, 3),
            "learner_seconds": per,
            "fit_rows": data.fit.height,
            "eval_rows": data.eval.height,
            "mode": data.mode,
        },
        why="Run time is an observation of this machine, not a property of the data.",
        playbook="Performance timing and quality benchmarks are different experiments.",
    )

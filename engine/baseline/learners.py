"""The baseline stage's learners: loading the split rows they see, building trivial and conventional
scikit-learn models, and fitting / predicting them (held-out or group- and time-respecting K-fold).

The baseline checks (engine/baseline/) turn their predictions into checks; the artifact stage refits
the recorded best learner through `claimcheck.engine.stages.baseline.run.refit_best`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from claimcheck.engine import threads
from claimcheck.engine.data import weights
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stats import registry
from claimcheck.engine.stats.registry import target_type

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

    from claimcheck.engine.baseline.settings import LearnerSettings as Inputs

CALLER = "baseline"
CLASS_TRIVIAL = ("most_frequent", "prior", "median_class")
CLASS_CONVENTIONAL = ("tfidf_logreg", "hgb", "logreg")
REG_TRIVIAL = ("mean", "median")
REG_CONVENTIONAL = ("hgb",)
GEN_TRIVIAL = ("most_frequent_answer",)
ML_TRIVIAL = ("prior", "most_frequent")  # engine/baseline/multilabel.py
ML_CONVENTIONAL = ("tfidf_logreg", "logreg")


# ---------------------------------------------------------------- data


@dataclass
class Data:
    task: str  # "classification" | "regression" | "generation" | "multilabel"
    classes: list[str]  # the class order, or a multi-label target's labels
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
    train: pl.DataFrame | None = None  # the train split's rows alone (in K-fold mode `fit` pools train + dev)
    weight_column: str = ""  # the source's sample weights: every fit gets them as sample_weight
    mode_reason: str = ""  # why cv "auto" ran the holdout after choosing K-fold (empty: it did not)


def _task(claim: dict[str, Any]) -> str:
    if claim.get("task_kind") == "causal_lm_sft":
        return "generation"
    kind = target_type(claim)
    if kind == "multi_label":
        return "multilabel"
    return "regression" if kind == "numeric" else "classification"


def load(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> Data:
    from claimcheck.engine.data import rows, splits

    for need in ("claim", "source", "split"):
        if need not in upstream:
            raise StageInputError(f"the baseline stage needs a frozen '{need}' stage first")
    _refuse_row_unit(inputs, upstream)
    claim, src = upstream["claim"].inputs, upstream["source"].inputs
    task = _task(claim)
    parts = {s: splits.rows(s, upstream, ctx, caller=CALLER) for s in ("train", "dev", "calibration")}
    if parts["train"].height == 0:
        raise StageInputError("the split has no train rows; re-run the split stage with a train fraction")
    text_cols = rows.text_inputs(src)
    tab_cols = [c for c in rows.model_inputs(src) if c not in text_cols]
    classes = _classes(task, claim, parts)
    mode = _mode(inputs, parts)
    data = _assemble(mode, inputs, upstream, parts, (task, classes, text_cols, tab_cols))
    data.weight_column = weights.column(src)
    if mode == "holdout":
        return data
    try:
        _plan_folds(data, inputs, upstream)
    except StageInputError as exc:
        # cv = "auto" chose K-fold for a small train; when the folds cannot be made (a time split whose
        # families all start in the first fold) the train/dev holdout runs instead, and says so.
        if inputs.cv != "auto" or parts["dev"].height == 0:
            raise
        data = _assemble("holdout", inputs, upstream, parts, (task, classes, text_cols, tab_cols))
        data.weight_column = weights.column(src)
        data.mode_reason = (
            f"cv 'auto' fell back to the train/dev holdout: {str(exc).split(';')[0]} "
            f"({_fold_obstacle(upstream)})"
        )
    return data


def _fold_obstacle(upstream: dict[str, StageRecord]) -> str:
    """Why the K-fold of load() made fewer than two folds with training rows, in a few words."""
    if _time_split(upstream):
        return "a time split keeps each family whole in the fold of its earliest row, and every family starts early"
    return "too few families for the folds"


def _assemble(
    mode: str,
    inputs: Inputs,
    upstream: dict[str, StageRecord],
    parts: dict[str, pl.DataFrame],
    task_facts: tuple[str, list[str], list[str], list[str]],
) -> Data:
    """The baseline's rows for `mode`: train / dev for the holdout, the pooled train+dev for K-fold."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.data import rows

    task, classes, text_cols, tab_cols = task_facts
    if mode == "holdout":
        fit, ev = parts["train"], parts["dev"]
    else:
        fit = ev = pl.concat([parts["train"], parts["dev"]], how="diagonal_relaxed").sort(rows.ROW_ID)
    unit_kind = _unit_kind(inputs, upstream)
    fam = ev.get_column(rows.FAMILY) if rows.FAMILY in ev.columns else None
    if unit_kind != "row" and fam is not None:
        # rows the families file lacks stay their own unit (negative ids cannot clash with families)
        units = np.where(
            fam.is_null().to_numpy(), -1 - ev.get_column(rows.ROW_ID).to_numpy(), fam.fill_null(0).to_numpy()
        )
    else:
        unit_kind, units = "row", ev.get_column(rows.ROW_ID).to_numpy()
    data = Data(
        task,
        classes,
        fit,
        ev,
        parts["calibration"],
        text_cols,
        tab_cols,
        units,
        unit_kind,
        mode=mode,
        train=parts["train"],
    )
    return data


def _classes(task: str, claim: dict[str, Any], parts: dict[str, pl.DataFrame]) -> list[str]:
    if task == "multilabel":
        return _labels(claim, parts)
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


def _labels(claim: dict[str, Any], parts: dict[str, pl.DataFrame]) -> list[str]:
    """A multi-label target's labels: the claim's class_order, which must hold every label in the rows."""
    from claimcheck.engine.data import labelsets

    seen: set[str] = set()
    for frame in parts.values():
        seen |= set(labelsets.vocabulary(frame.get_column("target")))
    order = [str(c) for c in claim.get("class_order") or []] or sorted(seen)
    extra = sorted(seen - set(order))
    if extra:
        raise StageInputError(
            f"labels {extra[:5]} occur in the data but not in the claim's class_order {order}; add them "
            "to class_order (claim stage)"
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


def _refuse_row_unit(inputs: Inputs, upstream: dict[str, StageRecord]) -> None:
    """`unit = "row"` over a split that grouped duplicates is refused: the split kept each family of
    copies on one side, and resampling its rows one by one would treat the copies as independent."""
    from claimcheck.engine.data import splits

    if inputs.unit != "row":
        return
    kept = splits.unit_kind(upstream["split"])
    if kept in splits.DUPLICATE_UNITS:
        raise StageInputError(
            f'baseline unit = "row" is refused: the split kept each {kept} together '
            f"(grouping '{upstream['split'].inputs.get('grouping', '')}'), so its rows are not independent; "
            'use unit = "auto" or "family"'
        )


def _unit_kind(inputs: Inputs, upstream: dict[str, StageRecord]) -> str:
    """'row' when the inputs ask for rows; else the unit the split kept together (splits.unit_kind),
    whose families `splits.rows` returns as family_id. A split record made before the membership
    carried its unit, over a source without entity families, leaves rows."""
    from claimcheck.engine.data import splits
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    if inputs.unit == "row":
        return "row"
    mem = parse(upstream["split"].check("split.membership"), shapes.Membership)
    has_unit = mem is not None and bool(mem.unit)
    if inputs.unit == "auto" and not has_unit and upstream["source"].check("source.entity_families") is None:
        return "row"
    return splits.unit_kind(upstream["split"])


def _time_split(upstream: dict[str, StageRecord]) -> bool:
    """Whether the split stage placed rows by time (then folds only train on the past)."""
    inp = upstream["split"].inputs
    return any("time" in str(inp.get(k, "")) for k in ("strategy", "method", "kind", "split_by"))


def _plan_folds(data: Data, inputs: Inputs, upstream: dict[str, StageRecord]) -> None:
    """K-fold over the pooled rows: the split stage's folds if it made them, else family-respecting folds."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.data import splits

    ev = data.eval
    fold = ev.get_column(splits.FOLD).fill_null(-1).to_numpy() if splits.FOLD in ev.columns else None
    if fold is None or (fold < 0).any():
        fam = ev.get_column("family_id") if "family_id" in ev.columns else None
        ids = (
            data.units
            if fam is None
            else np.where(fam.is_null().to_numpy(), -1 - ev["row_id"].to_numpy(), fam.fill_null(0).to_numpy())
        )
        from claimcheck.engine.data.rows import source_time, time_expr

        tcol, unit = source_time(upstream["source"].inputs, ev.schema) if _time_split(upstream) else ("", "")
        if tcol:
            t = ev.select(time_expr(tcol, ev.schema[tcol], unit).alias("t")).get_column("t")
            rank = t.rank("ordinal").fill_null(0).to_numpy()
            fold = np.minimum((rank - 1) * inputs.cv_folds // max(len(rank), 1), inputs.cv_folds - 1)
            # each family whole, in the fold of its earliest row (as group_time places it in a split)
            fold = splits.family_first_split(np.asarray(ids, dtype=np.int64), fold)
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


def default_learners(task: str, claim: dict[str, Any], text_cols: list[str]) -> list[str]:
    if task == "generation":
        return list(GEN_TRIVIAL)
    if task == "regression":
        return ["mean", "median", "hgb"]
    if task == "multilabel":
        return ["prior", "most_frequent", "tfidf_logreg" if text_cols else "logreg"]
    # an ordinal target's trivial predictor is the median class (registry.MEDIAN_CLASS)
    ordinal = [registry.MEDIAN_CLASS] if registry.is_ordinal(claim) else []
    if claim.get("task_kind") == "tabular" or not text_cols:
        return [*ordinal, "most_frequent", "prior", "hgb", "logreg"]
    return [*ordinal, "most_frequent", "prior", "tfidf_logreg"]


def validate_learners(learners: list[str], data: Data, inputs_trivial: str = "") -> None:
    """Refuse learners that do not fit the task, and a numeric target's named trivial predictor
    (`trivial_reference` mean / median) that is not among the learners fitted."""
    allowed = {
        "classification": CLASS_TRIVIAL + CLASS_CONVENTIONAL,
        "regression": REG_TRIVIAL + REG_CONVENTIONAL,
        "generation": GEN_TRIVIAL,
        "multilabel": ML_TRIVIAL + ML_CONVENTIONAL,
    }[data.task]
    bad = [x for x in learners if x not in allowed]
    if bad:
        raise StageInputError(
            f"learners {bad} do not fit a {data.task} task; choose from {', '.join(allowed)}"
        )
    if data.task == "regression" and inputs_trivial in REG_TRIVIAL and inputs_trivial not in learners:
        raise StageInputError(
            f"trivial_reference '{inputs_trivial}' names a learner that is not fitted; add it to learners "
            f"({', '.join(learners)}) or leave trivial_reference to the metric's default"
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


def make_model(name: str, data: Data, inputs: Inputs, c_value: float) -> Any:
    """An unfitted sklearn estimator whose every learned transform is fitted on the rows given to fit()."""
    from sklearn.compose import ColumnTransformer
    from sklearn.dummy import DummyClassifier, DummyRegressor
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    if name == "median_class":
        from claimcheck.engine.baseline.ordinal import MedianClass

        return MedianClass(tuple(data.classes))
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


def features(name: str, frame: pl.DataFrame, data: Data) -> Any:
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


def target(frame: pl.DataFrame, data: Data) -> np.ndarray:
    import numpy as np

    y = frame.get_column("target")
    if data.task == "multilabel":  # (n, L) 0/1 over the claim's labels
        from claimcheck.engine.data.labelsets import indicator

        return indicator(y, data.classes)
    if data.task == "regression":
        try:
            return y.cast(float).to_numpy()
        except Exception:
            raise StageInputError(
                "the claim's target_type is numeric but the target column holds values that are not "
                'numbers; fix the label column (source stage) or set target_type = "categorical" (claim)'
            ) from None
    return np.asarray(y.to_list(), dtype=object)


def fit_model(model: Any, x: Any, frame: pl.DataFrame, data: Data) -> Any:
    """Fit `model` on `frame`'s features `x` and target, with the rows' sample weights as
    sample_weight when the source declares a weight column (to the final step of a pipeline)."""
    y = target(frame, data)
    w = weights.of(frame, {"weight_column": data.weight_column})
    if w is None:
        return model.fit(x, y)
    key = f"{model.steps[-1][0]}__sample_weight" if hasattr(model, "steps") else "sample_weight"
    return model.fit(x, y, **{key: w})


def predict(model: Any, x: Any, data: Data) -> np.ndarray:
    """Class probabilities in the declared class order (absent-from-train classes get 0), or values."""
    import numpy as np

    if data.task == "multilabel":  # one-vs-rest: each label's probability
        return np.asarray(model.predict_proba(x), dtype=np.float64).reshape(-1, len(data.classes))
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
    y = target(fit, data)
    model = make_model(name, data, inputs, c_value)
    if data.task == "classification" and len(set(y.tolist())) < 2 and name not in CLASS_TRIVIAL:
        from sklearn.dummy import DummyClassifier

        model = DummyClassifier(strategy="prior")  # one class in the fitting rows: nothing to learn
    with threads.capped():
        fit_model(model, features(name, fit, data), fit, data)
        return [predict(model, features(name, t, data), data) for t in targets]


def import_learner_libraries() -> float:
    """Import what make_model needs and return the seconds it took, so that cost is timed apart
    from the first learner's fit (it once showed as "most_frequent 14.1 s")."""
    t0 = time.perf_counter()
    import sklearn.compose  # noqa: F401
    import sklearn.dummy  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import sklearn.feature_extraction.text  # noqa: F401
    import sklearn.impute  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.pipeline  # noqa: F401
    import sklearn.preprocessing  # noqa: F401

    return time.perf_counter() - t0


def _selected_c(
    name: str, data: Data, inputs: Inputs, metric: str, fit_idx: Any, select_on: Any
) -> tuple[float, list[dict[str, Any]]]:
    """C chosen by the primary metric: on dev (holdout) or inside the outer training fold (nested)."""
    import numpy as np

    from claimcheck.engine.data import splits

    if name not in ("tfidf_logreg", "logreg") or not inputs.C_grid:
        return inputs.C, []
    trials = []
    for c in inputs.C_grid:
        if select_on is not None:  # holdout: dev selects
            pred = _fit_predict(name, data, inputs, c, None, [select_on])[0]
            score = _score(metric, target(select_on, data), pred, data)
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
                scores.append(_score(metric, target(te, data), pred, data))
            score = float(np.mean(scores)) if scores else float("nan")
        # TOML has no null and NaN never compares equal on replay: an undefined score is a flag
        trials.append(
            {"C": float(c), "score": score} if score == score else {"C": float(c), "undefined": True}
        )
    sign = 1 if registry.lower_is_better(metric) else -1
    best = min(trials, key=lambda t: (sign * t["score"] if "score" in t else float("inf"), t["C"]))
    return best["C"], trials


def _score(metric: str, y: np.ndarray, pred: np.ndarray, data: Data) -> float:
    from claimcheck.engine.stats import metrics

    if data.task == "regression":
        return float(metrics.regression_report(y, pred).get(metric, float("nan")))
    entry = registry.by_key(metric)
    if entry is not None and entry.ordinal_only:  # over the class order; the report holds nominal figures
        return entry.value(metrics.encode(y, data.classes), pred, registry.Scoring(tuple(data.classes)))
    rep = metrics.classification_report(y, pred, data.classes)
    return float(rep.get(metric, float("nan")))


@dataclass
class Fitted:
    name: str
    eval_pred: np.ndarray  # probabilities (classification) or values on the eval rows
    cal_pred: np.ndarray | None  # on calibration rows (holdout only)
    c_value: float | None = None
    trials: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def run_learner(name: str, data: Data, inputs: Inputs, metric: str) -> Fitted:
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

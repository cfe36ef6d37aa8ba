"""The `frozen_probe` comparator of a text-classification claim: the contract's base model and
tokenizer, frozen, as a feature extractor; a logistic-regression head (features standardised on
train) fitted on the pooled embeddings of the job's train rows, its C chosen on the job's dev rows. It answers "did fine-tuning
the encoder help, compared with using it unchanged?" — the random-head `base_model` arm answers
only "is the candidate better than chance?".

The embedding is the input the contracted classification head receives (the model's own pooling),
taken by a forward hook on the head while `evaluate.predict` runs its usual batches: the same
template, tokenizer, max length, inference mode and batching as every torch arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.artifact.common import PB_BASE
from claimcheck.engine.evidence import Check, sha256_bytes
from claimcheck.engine.shapes import artifact as shapes

ARM = "frozen_probe"
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)  # the head's inverse regularisation strengths tried on dev
MAX_ITER = 2000  # lbfgs iterations per fit


@dataclass
class Probe:
    """The fitted probe: its predict function (an arm), what the arms table says of it, its pin."""

    fn: Any  # frame -> (n, K) probabilities in the contract's class order
    note: str
    fit: dict[str, Any]  # the FrozenProbe fields known once the head is fitted


class _Embedder:
    """Pooled embeddings of rows under the contract: the head's input, captured per batch."""

    def __init__(self, model: Any, tok: Any, eff: dict[str, Any], classes: list[str], mode: str):
        from claimcheck.engine.training.evaluate import Batcher
        from claimcheck.engine.training.models import head_module

        self.model, self.mode = model, mode
        self.batcher = Batcher(eff, tok, classes, "cpu")
        self.head_name, head = head_module(model)
        self.captured: list[Any] = []
        head.register_forward_hook(lambda _m, args, _out: self.captured.append(args[0].detach()))
        self.pooling = (
            f"the input of the contracted classification head ({self.head_name}) of the frozen base model"
        )

    def __call__(self, frame: Any, rendered: bool = False) -> Any:
        """The rows' embeddings; `rendered`: the job's own data files, whose text the contract's
        template already rendered (as the job reads them)."""
        import numpy as np

        from claimcheck.engine.training.evaluate import EVAL_BATCH, eval_batches, predict

        enc = self.batcher.prepare(frame, with_labels=False, rendered=rendered)
        self.captured.clear()
        predict(self.model, enc, mode=self.mode)
        out: Any = None
        for idx, feats in zip(eval_batches(enc, EVAL_BATCH, self.mode), self.captured, strict=True):
            pooled = self._pool(feats.float(), [len(enc.input_ids[i]) for i in idx])
            if out is None:
                out = np.zeros((enc.n, pooled.shape[1]), dtype=np.float64)
            out[idx] = pooled
        self.captured.clear()
        return out if out is not None else np.zeros((0, 0))

    def _pool(self, feats: Any, lengths: list[int]) -> Any:
        """A per-row head input as it is; a per-token one (a head that pools itself) at the position
        the model's pooling reads: the last real token for a `score` head, the first otherwise."""
        import numpy as np

        if feats.dim() == 2:
            return feats.cpu().numpy().astype(np.float64)
        if self.head_name == "score":
            rows = [feats[j, n - 1] for j, n in enumerate(lengths)]
        else:
            rows = [feats[j, 0] for j in range(len(lengths))]
        return np.stack([r.cpu().numpy() for r in rows]).astype(np.float64)


def fit(eff: dict[str, Any], job_dir: Path, mode: str, ctx: Any, scoring: tuple[str, Any]) -> Probe:
    """Embed the job's own train and dev rows with the frozen base model, choose C on dev by the
    claim's metric (`scoring`: its name and the registry Scoring), fit the head on train."""
    import numpy as np

    from claimcheck.engine import threads
    from claimcheck.engine.stats import registry
    from claimcheck.engine.training.artifact_files import build_base
    from claimcheck.engine.training.evaluate import load_split
    from claimcheck.engine.training.jobfiles import read_contract

    metric, sc = scoring
    classes = [str(c) for c in eff["label_classes"]]
    model, tok = build_base(eff, ctx.workspace)
    embed = _Embedder(model, tok, eff, classes, mode)
    doc = read_contract(job_dir)
    train, dev = load_split(job_dir, doc, "train"), load_split(job_dir, doc, "dev")
    y_tr = np.asarray([classes.index(str(t)) for t in train["target"].to_list()])
    y_dev = np.asarray([classes.index(str(t)) for t in dev["target"].to_list()])
    ctx.progress(0.3, f"frozen probe: embedding {train.height} train and {dev.height} dev rows")
    x_tr, x_dev = embed(train, rendered=True), embed(dev, rendered=True)
    seed = int(eff.get("seed", 0))
    w_tr, sc = _weights(eff, train, dev, sc)
    fits, dev_values = {}, {}
    m = registry.get(metric)
    with threads.single():
        for c in C_GRID:
            ctx.check_cancelled()
            fits[c] = _head(x_tr, y_tr, c, seed, w_tr)
            dev_values[c] = m.value(y_dev, _full(fits[c], x_dev, len(classes)), sc)
    best = max(C_GRID, key=lambda c: (-dev_values[c] if m.lower_is_better else dev_values[c], -c))
    clf = fits[best]

    def fn(frame: Any) -> Any:
        x = embed(frame)
        with threads.single():
            return _full(clf, x, len(classes))

    fn.arm_batch = 256  # type: ignore[attr-defined]
    note = (
        f"the unchanged base model, frozen, under the identical template, tokenizer and inference mode; "
        f"a logistic-regression head on standardised features (C {best:g}, chosen on {dev.height} dev "
        f"rows by {metric}) fitted "
        f"on the pooled embeddings of {train.height} train rows — a linear probe"
        + ("" if w_tr is None else f", fitted with the rows' sample weights ('{eff.get('weight_column')}')")
    )
    return Probe(
        fn,
        note,
        {
            "model_sha256": str(eff.get("model_sha256", "")),
            "pooling": embed.pooling,
            "features": int(x_tr.shape[1]),
            "rows_fitted": int(train.height),
            "dev_rows": int(dev.height),
            "c_grid": [float(c) for c in C_GRID],
            "dev_metric": metric,
            "dev_values": {f"{c:g}": float(v) for c, v in dev_values.items()},
            "c_chosen": float(best),
            "converged": bool(int(np.max(clf[-1].n_iter_)) < MAX_ITER),
            "head_sha256": _head_sha256(clf),
        },
    )


def _weights(eff: dict[str, Any], train: Any, dev: Any, sc: Any) -> tuple[Any, Any]:
    """Under a weighted contract the head is fitted with the train rows' sample weights (as the
    fine-tuned candidate's loss is weighted) and C chosen by the dev metric weighted as the claim
    says; else (None, the scoring unchanged)."""
    import dataclasses

    import numpy as np

    from claimcheck.engine.training.jobfiles import WEIGHT_COLUMN
    from claimcheck.engine.training.schema import effective

    c = effective(eff)
    if c.loss_weighting != "sample_weight" or WEIGHT_COLUMN not in train.columns:
        return None, sc
    w_tr = np.asarray(train[WEIGHT_COLUMN].to_list(), dtype=np.float64)
    if c.metric_weighting == "sample_weight":
        sc = dataclasses.replace(sc, weights=np.asarray(dev[WEIGHT_COLUMN].to_list(), dtype=np.float64))
    return w_tr, sc


def _head(x: Any, y: Any, c: float, seed: int, w: Any = None) -> Any:
    """Features standardised on train (mean and scale), then the logistic regression; with `w`, both
    fitted with those sample weights."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=MAX_ITER, random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # recorded as `converged`, not printed
        if w is None:
            return clf.fit(x, y)
        return clf.fit(x, y, standardscaler__sample_weight=w, logisticregression__sample_weight=w)


def _head_sha256(clf: Any) -> str:
    """sha256 over the scaler's mean_ and scale_, then the regression's coef_ and intercept_
    (float64, C order): the whole head."""
    import numpy as np

    scaler, lr = clf[0], clf[-1]
    parts = (scaler.mean_, scaler.scale_, lr.coef_, lr.intercept_)
    return sha256_bytes(b"".join(np.ascontiguousarray(p, dtype=np.float64).tobytes() for p in parts))


def _full(clf: Any, x: Any, k: int) -> Any:
    """Probabilities over every class of the contract (a class absent from train gets 0)."""
    import numpy as np

    out = np.zeros((x.shape[0], k), dtype=np.float64)
    if x.shape[0]:
        out[:, clf.classes_] = clf.predict_proba(x)
    return out


def pin(probe: Probe, preds: dict[str, Any] | None) -> Check:
    """The probe's identity: model digest, head digest, C and rows, and its locked-test decisions."""
    import numpy as np

    ok = preds["ok"] if preds else np.zeros(0, dtype=bool)
    decided = preds["proba"][ok].argmax(axis=1).astype(np.int64) if preds else np.zeros(0, np.int64)
    f = probe.fit
    measured = shapes.FrozenProbe(
        **f,
        test_predictions_sha256=sha256_bytes(np.ascontiguousarray(decided).tobytes()),
        test_rows_predicted=int(ok.sum()),
    )
    return Check(
        id="artifact.frozen_probe",
        status="pass" if f["model_sha256"] and measured.test_rows_predicted else "warn",
        summary=(
            f"frozen base {f['model_sha256'][:12] or '(no model digest)'}: {f['features']}-wide pooled "
            f"embeddings, logistic head C {f['c_chosen']:g} (dev {f['dev_metric']} "
            f"{f['dev_values'][format(f['c_chosen'], 'g')]:.4f}) fitted on {f['rows_fitted']} train rows; "
            f"head sha256 {f['head_sha256'][:12]}; {measured.test_rows_predicted} test rows predicted"
            + ("" if f["converged"] else f"; lbfgs stopped at {MAX_ITER} iterations before converging")
        ),
        coverage=f"the job's train rows ({f['rows_fitted']}) and dev rows ({f['dev_rows']})",
        measured=measured,
        why="An unchanged-base comparator for a classifier needs a head fit on train; a random head is chance.",
        playbook=PB_BASE,
    )

"""The artifact stage of a retrieval claim with fine_tuning = true: the job's adapters, verified and ranked.

artifact.identity: every file of jobs/<op>/final matches the sha256 the job recorded, the adapter's
tensors are the recorded ones with no zero LoRA B matrix, and the unchanged encoder's folder still
hashes to the contract's pin (the adapters are applied to it). artifact.reload_parity: the adapters
reloaded into a fresh copy of the encoder embed the dev queries the job embedded at its end alike.
Then every arm ranks the locked-test queries (engine/retrieval/stages.ranked_checks): the fine-tuned
encoder (candidate), the unchanged encoder (base_model), BM25 and a random ranking, as the claim's
comparators select them, with paired intervals resampled over queries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.retrieval import finetune, rankers
from claimcheck.engine.retrieval.stages import BASE_MODEL, ranked_checks


def finetuned_checks(
    inputs: Any, eff: dict[str, Any], final: Path, upstream: dict[str, StageRecord], ctx: StageContext
) -> list[Check]:
    """Identity, reload parity, the locked-test ranking of every arm and the comparison."""
    from claimcheck.engine.training.models import resolve_model_path
    from claimcheck.engine.training.schema import effective

    spec = effective(eff).encoder
    if spec is None:
        raise StageInputError("the contract pins no encoder: re-run and freeze the contract stage")
    base_path = resolve_model_path(spec.model_path, ctx.workspace)
    ctx.progress(0.05, "adapter identity")
    identity = _identity(final, base_path, spec, ctx)
    checks = [identity]
    if identity.status != "pass":
        return checks
    ctx.progress(0.15, "reloading the adapters")
    model, missing, unexpected = finetune.load_final(final, eff, ctx.workspace)
    checks.append(_parity(model, final, missing, unexpected, inputs.parity_tolerance))
    ctx.check_cancelled()
    models = {"candidate": model}
    if BASE_MODEL in inputs.comparators:
        models[BASE_MODEL] = rankers.load_encoder(base_path, spec.max_length)
    return checks + ranked_checks(inputs, spec, models, upstream, ctx)


def _identity(final: Path, base_path: Path, spec: Any, ctx: StageContext) -> Check:
    from claimcheck.engine.shapes.artifact import Identity

    problems = finetune.verify_final(final)
    digest, files = rankers.folder_digest(base_path)
    if digest != spec.model_sha256 or files != spec.model_files:
        problems.append(
            f"the unchanged encoder's files hash to {digest} ({files} files); the contract pinned "
            f"{spec.model_sha256} ({spec.model_files})"
        )
    m = finetune.read_manifest(final) if (final / finetune.MANIFEST_FILE).is_file() else {}
    measured = Identity(
        path=final.relative_to(ctx.session_dir).as_posix(),
        file_sha256=m.get("file_sha256"),
        files=len(m.get("file_sha256", {})),
        tensor_count=len(m.get("tensors", {})),
        tensor_shapes=m.get("tensors"),
        lora_b_matrices=m.get("lora_b_matrices"),
        lora_b_min_norm=m.get("lora_b_min_norm"),
        selected_step=m.get("selected_step"),
        checkpoint_selection=m.get("checkpoint_selection"),
        problems=problems or None,
        candidate_kind="torch",
        versions=spec.versions,
    )
    return Check(
        id="artifact.identity",
        status="fail" if problems else "pass",
        summary=(
            "; ".join(problems[:3])
            if problems
            else f"{measured.files} files match their recorded sha256; {measured.tensor_count} adapter tensors, "
            f"{measured.lora_b_matrices} LoRA B matrices (min norm {measured.lora_b_min_norm:.3g}); the unchanged "
            f"encoder hashes to the contract's pin ({digest[7:19]}…); step {measured.selected_step} "
            f"({measured.checkpoint_selection})"
        ),
        measured=measured,
        why="The adapters scored must be the ones the job saved, on the encoder the contract pinned.",
        playbook=declaration("artifact.identity").playbook,
    )


def _parity(model: Any, final: Path, missing: list[str], unexpected: list[str], tol: float) -> Check:
    """The reloaded adapters embed the dev queries the job embedded at its end alike."""
    from claimcheck.engine.shapes.artifact import ReloadParity

    texts = list(finetune.read_manifest(final).get("parity_queries", []))
    recorded = finetune.recorded_embeddings(final)
    now = finetune.embed(model, texts) if texts else np.zeros((0, 0))
    diff = float(np.abs(now - recorded).max()) if texts and now.shape == recorded.shape else float("inf")
    keys_ok = not missing and not unexpected
    ok = keys_ok and diff <= tol
    return Check(
        id="artifact.reload_parity",
        status="pass" if ok else "fail",
        summary=(
            f"the saved adapters, reloaded into the unchanged encoder, embed the {len(texts)} dev queries the "
            f"job embedded at its end alike: max |Δ| {diff:.2e} (tolerance {tol:g}); missing keys "
            f"{len(missing)}, unexpected {len(unexpected)}"
        ),
        measured=ReloadParity(
            rows=len(texts),
            compared=len(texts),
            max_abs_embedding_diff=diff,
            tolerance=tol,
            missing_keys=missing,
            unexpected_keys=unexpected,
            inference_mode="eval",
            keys_ok=keys_ok,
        ),
        why="The ranking must be made by the adapters the job trained, as the job used them.",
        playbook=declaration("artifact.reload_parity").playbook,
    )

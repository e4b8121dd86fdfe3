"""Hugging-Face-format checkpoint folders: ``config.json`` + ``model.safetensors``.

Folders use the upstream projects' config fields and state-dict names, so they interchange with
them (DESIGN.md §4):

- Caduceus (``"model_type": "caduceus"``): keys ``caduceus.backbone.*``, ``lm_head.*`` (PS).
- mamba_ssm ``MambaLMHeadModel`` (MambaConfig fields, no model_type): keys ``backbone.*``.
- HyenaDNA (a ``layer`` dict with the Hyena settings): keys ``backbone.*``.
- Read only: Hugging Face transformers' ``MambaForCausalLM`` (``"model_type": "mamba"``).

Weights are read from ``model.safetensors``, ``pytorch_model.bin`` or HyenaDNA's original
``weights.ckpt`` (a Lightning checkpoint, keys ``model.backbone.*``; it is a pickle, so load
only files you trust). Tied tensors are stored once and re-tied on load.

Vocabulary: config.json may give the raw vocabulary (HyenaDNA: 12) or the padded one
(Caduceus: 16); both build the padded model because vocab_size is rounded up to a multiple of
pad_vocab_size_multiple. Written folders always hold the padded size.
"""

from __future__ import annotations

import inspect
import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import safetensors.torch
import torch
from torch import nn

from genodiff.backbones.build import CONFIG_ATTR, build
from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.hyena import HyenaDNA, HyenaOperator
from genodiff.backbones.mamba_lm import MambaLM

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Looked for in this order.
WEIGHT_FILES = (WEIGHTS_FILE, "pytorch_model.bin", "weights.ckpt")

CADUCEUS_FIELDS = (
    "d_model",
    "n_layer",
    "vocab_size",
    "ssm_cfg",
    "rms_norm",
    "residual_in_fp32",
    "fused_add_norm",
    "pad_vocab_size_multiple",
    "norm_epsilon",
    "initializer_cfg",
    "bidirectional",
    "bidirectional_strategy",
    "bidirectional_weight_tie",
    "rcps",
    "complement_map",
)
MAMBA_FIELDS = (
    "d_model",
    "d_intermediate",
    "n_layer",
    "vocab_size",
    "ssm_cfg",
    "attn_layer_idx",
    "attn_cfg",
    "rms_norm",
    "residual_in_fp32",
    "fused_add_norm",
    "pad_vocab_size_multiple",
    "tie_embeddings",
)
HYENA_FIELDS = (
    "d_model",
    "n_layer",
    "d_inner",
    "vocab_size",
    "resid_dropout",
    "embed_dropout",
    "layer_norm_epsilon",
    "residual_in_fp32",
    "pad_vocab_size_multiple",
    "layer",
)
# Upstream files may store a tied LM head a second time; dropped on load when it equals a
# tensor already stored (the embedding).
TIED_HEAD_KEYS = ("lm_head.weight", "lm_head.lm_head.weight")


class CheckpointError(ValueError):
    """A checkpoint folder whose weights do not fit the model its config.json describes."""


# ----------------------------------------------------------------------------- saving


def save_pretrained(
    model: nn.Module,
    directory: str | Path,
    config: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model`` to ``directory`` as config.json + model.safetensors; returns the folder.

    ``config`` is the backbone's genodiff config (``name`` optional); by default the one that
    ``genodiff.backbones.build`` recorded on the model. The folder appears complete or not at
    all: it is written under a temporary name next to ``directory`` and renamed.
    """
    layout = _model_layout(model)
    full = _full_config(model, _recorded_config(model, config))
    reference = _CONFIG_WRITERS[layout](model, full)
    tensors = {_reference_name(name, layout): t for name, t in _unique_tensors(model).items()}
    return _write_folder(Path(directory), reference, tensors, overwrite)


def _model_layout(model: nn.Module) -> str:
    for cls, layout in ((Caduceus, "caduceus"), (MambaLM, "mamba_ssm"), (HyenaDNA, "hyena")):
        if isinstance(model, cls):
            return layout
    raise TypeError(f"no Hugging Face layout for {type(model).__name__}")


def _recorded_config(model: nn.Module, config: Mapping[str, Any] | None) -> dict[str, Any]:
    config = config if config is not None else getattr(model, CONFIG_ATTR, None)
    if config is None:
        raise TypeError(
            f"{type(model).__name__} has no recorded config: build it with "
            "genodiff.backbones.build(name, **config) or pass config= to save_pretrained"
        )
    return {k: v for k, v in config.items() if k != "name"}


def _full_config(model: nn.Module, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` completed with the constructor's defaults."""
    return {**_defaults(type(model).__init__), **config}


def _defaults(fn: Callable) -> dict[str, Any]:
    params = inspect.signature(fn).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _caduceus_config(model: Caduceus, cfg: dict[str, Any]) -> dict[str, Any]:
    fields = {k: cfg[k] for k in CADUCEUS_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["ssm_cfg"] = dict(cfg["ssm_cfg"] or {})
    cmap = model.complement_map
    fields["complement_map"] = None if cmap is None else {str(k): v for k, v in cmap.items()}
    return {"model_type": "caduceus", "architectures": ["CaduceusForMaskedLM"], **fields}


def _mamba_config(model: MambaLM, cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg["norm_epsilon"] != 1e-5:
        raise ValueError("mamba_ssm's MambaConfig has no norm_epsilon; only 1e-5 can be saved")
    fields = {k: cfg[k] for k in MAMBA_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["ssm_cfg"] = dict(cfg["ssm_cfg"] or {})
    fields["attn_layer_idx"] = list(cfg["attn_layer_idx"] or [])
    fields["attn_cfg"] = dict(cfg["attn_cfg"] or {})
    return fields


def _hyena_config(model: HyenaDNA, cfg: dict[str, Any]) -> dict[str, Any]:
    fields = {k: cfg[k] for k in HYENA_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["d_inner"] = cfg["d_inner"] if cfg["d_inner"] is not None else 4 * model.d_model
    layer = dict(cfg["layer"] or {})
    if "local_order" in layer:
        layer["short_filter_order"] = layer.pop("local_order")
    layer_defaults = _defaults(HyenaOperator.__init__)
    fields["layer"] = {"_name_": "hyena", **layer_defaults, **layer}
    return fields


_CONFIG_WRITERS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "caduceus": _caduceus_config,
    "mamba_ssm": _mamba_config,
    "hyena": _hyena_config,
}


def _storage_key(tensor: torch.Tensor) -> tuple:
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))


def _unique_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each shared tensor kept once, under its first name."""
    seen: set[tuple] = set()
    unique = {}
    for name, tensor in model.state_dict().items():
        key = _storage_key(tensor)
        if key not in seen:
            seen.add(key)
            unique[name] = tensor.detach().contiguous()
    return unique


def _reference_name(name: str, layout: str) -> str:
    """Caduceus' Hugging Face model holds the backbone under ``caduceus.``."""
    if layout == "caduceus" and name.startswith("backbone."):
        return "caduceus." + name
    return name


def _write_folder(
    directory: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor], overwrite: bool
) -> Path:
    if directory.exists() and not overwrite:
        raise FileExistsError(f"{directory} exists; pass overwrite=True to replace it")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    try:
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        safetensors.torch.save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        if directory.exists():
            shutil.rmtree(directory)
        tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


# ----------------------------------------------------------------------------- loading


def load_pretrained(directory: str | Path, **overrides: Any) -> nn.Module:
    """The genodiff backbone stored in a checkpoint folder, in eval mode.

    The layout (Caduceus, mamba_ssm, HyenaDNA, transformers' Mamba) is recognised from
    config.json; ``overrides`` replace fields of the genodiff config built from it (e.g.
    ``fused_add_norm=False``). Weights load strictly: only known redundant copies of tied
    tensors may be absent or extra; anything else raises ``CheckpointError``.
    """
    directory = Path(directory)
    config = _read_config(directory)
    layout = detect_layout(config, directory)
    model = build(**{**_CONFIG_READERS[layout](config), **overrides})
    weights = _weights_file(directory)
    state = {_genodiff_name(k, layout): t for k, t in _read_weights(weights).items()}
    _load_strictly(model, state, f"{weights} (read as the {layout} layout)")
    return model.eval()


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} is not a checkpoint folder: no {CONFIG_FILE}")
    return json.loads(path.read_text())


def detect_layout(config: Mapping[str, Any], source: str | Path = "config") -> str:
    """ "caduceus", "hf_mamba" (transformers), "hyena" or "mamba_ssm" from a config.json."""
    if config.get("model_type") == "caduceus":
        return "caduceus"
    if config.get("model_type") == "mamba":
        return "hf_mamba"
    if isinstance(config.get("layer"), Mapping) and "d_inner" in config:
        return "hyena"
    if {"d_model", "n_layer", "ssm_cfg"} <= config.keys():
        return "mamba_ssm"
    raise CheckpointError(
        f"{source}: config.json matches no known layout (Caduceus, mamba_ssm, HyenaDNA, "
        f"transformers Mamba); its fields: {sorted(config)}"
    )


def _pick(config: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {k: config[k] for k in fields if k in config}


def _hf_mamba_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' MambaConfig -> MambaLM arguments (its embedding is not padded)."""
    ssm_names = {
        "state_size": "d_state",
        "conv_kernel": "d_conv",
        "expand": "expand",
        "time_step_rank": "dt_rank",
        "time_step_min": "dt_min",
        "time_step_max": "dt_max",
        "time_step_init_scheme": "dt_init",
        "time_step_scale": "dt_scale",
        "time_step_floor": "dt_init_floor",
        "use_conv_bias": "conv_bias",
        "use_bias": "bias",
    }
    return {
        "name": "mamba",
        "d_model": config["hidden_size"],
        "n_layer": config["num_hidden_layers"],
        "vocab_size": config["vocab_size"],
        "pad_vocab_size_multiple": 1,
        "ssm_cfg": {new: config[old] for old, new in ssm_names.items() if old in config},
        "norm_epsilon": config.get("layer_norm_epsilon", 1e-5),
        "residual_in_fp32": config.get("residual_in_fp32", True),
        "tie_embeddings": config.get("tie_word_embeddings", True),
    }


_CONFIG_READERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "caduceus": lambda c: {"name": "caduceus", **_pick(c, CADUCEUS_FIELDS)},
    "mamba_ssm": lambda c: {"name": "mamba", **_pick(c, MAMBA_FIELDS)},
    "hyena": lambda c: {"name": "hyena", **_pick(c, HYENA_FIELDS)},
    "hf_mamba": _hf_mamba_config,
}


def _weights_file(directory: Path) -> Path:
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise FileNotFoundError(f"{directory} holds no weights: none of {', '.join(WEIGHT_FILES)}")


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        return safetensors.torch.load_file(str(path))
    if path.suffix == ".bin":
        return torch.load(path, map_location="cpu", weights_only=True)
    # HyenaDNA's original Lightning checkpoint: the model's keys under "model.".
    state = torch.load(path, map_location="cpu", weights_only=False)["state_dict"]
    return {k.removeprefix("model."): t for k, t in state.items() if k.startswith("model.")}


def _genodiff_name(name: str, layout: str) -> str:
    if layout == "caduceus":
        return name.removeprefix("caduceus.")
    if layout == "hyena":
        return name.removeprefix("hyena.")
    if layout == "hf_mamba" and name == "backbone.embeddings.weight":
        return "backbone.embedding.weight"
    return name


def _load_strictly(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Load ``state``, re-tying shared tensors stored once; CheckpointError on any mismatch."""
    expected = model.state_dict()
    state = _drop_tied_head_copies(dict(state), expected)
    for names in _alias_groups(expected):
        stored = [n for n in names if n in state]
        if stored and not all(torch.equal(state[stored[0]], state[n]) for n in stored):
            raise CheckpointError(f"{source}: tied tensors {stored} hold different values")
        for name in names:
            if stored and name not in state:
                state[name] = state[stored[0]]
    missing = sorted(expected.keys() - state.keys())
    unexpected = sorted(state.keys() - expected.keys())
    if missing or unexpected:
        raise CheckpointError(
            f"{source}: weights do not match the {type(model).__name__} its config describes; "
            f"missing keys ({len(missing)}): {missing[:10]}; "
            f"unexpected keys ({len(unexpected)}): {unexpected[:10]}"
        )
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:  # shape mismatches
        raise CheckpointError(f"{source}: {err}") from err


def _drop_tied_head_copies(
    state: dict[str, torch.Tensor], expected: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Drop an LM head the model does not have when it repeats another stored tensor."""
    for name in TIED_HEAD_KEYS:
        head = state.get(name)
        if head is None or name in expected:
            continue
        others = (t for k, t in state.items() if k != name and t.shape == head.shape)
        if any(torch.equal(head, t) for t in others):
            del state[name]
    return state


def _alias_groups(state: Mapping[str, torch.Tensor]) -> list[list[str]]:
    """Names of the tensors that share storage, for each storage with more than one name."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for name, tensor in state.items():
        groups[_storage_key(tensor)].append(name)
    return [names for names in groups.values() if len(names) > 1]


# ----------------------------------------------------------------------------- export


def export_checkpoint(
    ckpt_path: str | Path,
    out_dir: str | Path,
    weights: Literal["ema", "raw"] = "ema",
    overwrite: bool = False,
) -> Path:
    """A genodiff training checkpoint (.ckpt of ``genodiff train``) -> a checkpoint folder.

    ``weights="ema"`` exports the EMA weights (``ema.module.*``, what validation and sampling
    use), ``"raw"`` the trained ones (``backbone.*``). The backbone config comes from the
    checkpoint's hyper-parameters.
    """
    prefixes = {"ema": "ema.module.", "raw": "backbone."}
    if weights not in prefixes:
        raise ValueError(f"weights must be 'ema' or 'raw', got {weights!r}")
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    model_config = ckpt["hyper_parameters"]["config"]["model"]
    prefix = prefixes[weights]
    state = {
        k.removeprefix(prefix): t for k, t in ckpt["state_dict"].items() if k.startswith(prefix)
    }
    if not state:
        raise CheckpointError(
            f"{ckpt_path} holds no {weights} weights (no '{prefix}*' keys); "
            "a run trained without EMA (ema.decay=0) exports with weights='raw'"
        )
    model = build(**model_config)
    _load_strictly(model, state, f"{ckpt_path} ({weights} weights)")
    return save_pretrained(model, out_dir, model_config, overwrite=overwrite)

"""Hugging-Face-format checkpoint folders: ``config.json`` + ``model.safetensors``.

Folders use the upstream projects' config fields and state-dict names, so they interchange with
them (DESIGN.md §4). Each backbone declares its layouts (``genodiff.backbones.layout``); this
module names no model class, so plugin backbones save, load and export the same way. Built in:

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

import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import safetensors.torch
import torch
from torch import nn

from genodiff import registry
from genodiff.backbones.build import CONFIG_ATTR, build
from genodiff.backbones.layout import CheckpointLayout, constructor_defaults, layouts_of
from genodiff.tokenizers import Tokenizer, tokenizer_from_checkpoint

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Looked for in this order.
WEIGHT_FILES = (WEIGHTS_FILE, "pytorch_model.bin", "weights.ckpt")

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
    tokenizer: Tokenizer | None = None,
) -> Path:
    """Write ``model`` to ``directory`` as config.json + model.safetensors (+ tokenizer.json
    when ``tokenizer`` is given); returns the folder.

    ``config`` is the backbone's genodiff config (``name`` optional); by default the one that
    ``genodiff.backbones.build`` recorded on the model. The layout is the first writable one
    the model's class declares (``checkpoint_layouts``). The folder appears complete or not at
    all: it is written under a temporary name next to ``directory`` and renamed.
    """
    layout = _writable_layout(model)
    full = {**constructor_defaults(type(model).__init__), **_recorded_config(model, config)}
    reference = layout.write_config(model, full)
    tensors = {layout.to_reference(name): t for name, t in _unique_tensors(model).items()}
    return _write_folder(Path(directory), reference, tensors, overwrite, tokenizer)


def _writable_layout(model: nn.Module) -> CheckpointLayout:
    for layout in layouts_of(type(model)):
        if layout.write_config is not None:
            return layout
    raise TypeError(
        f"{type(model).__name__} declares no writable checkpoint layout (checkpoint_layouts); "
        "see genodiff.backbones.layout.CheckpointLayout"
    )


def _recorded_config(model: nn.Module, config: Mapping[str, Any] | None) -> dict[str, Any]:
    config = config if config is not None else getattr(model, CONFIG_ATTR, None)
    if config is None:
        raise TypeError(
            f"{type(model).__name__} has no recorded config: build it with "
            "genodiff.backbones.build(name, **config) or pass config= to save_pretrained"
        )
    return {k: v for k, v in config.items() if k != "name"}


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


def _write_folder(
    directory: Path,
    config: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    overwrite: bool,
    tokenizer: Tokenizer | None,
) -> Path:
    if directory.exists() and not overwrite:
        raise FileExistsError(f"{directory} exists; pass overwrite=True to replace it")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    try:
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        safetensors.torch.save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        if tokenizer is not None:
            tokenizer.save(tmp)
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

    The layout is recognised from config.json among those every registered backbone
    declares (built-in: Caduceus, mamba_ssm, HyenaDNA, transformers' Mamba; plugins add
    theirs); ``overrides`` replace fields of the genodiff config built from it (e.g.
    ``fused_add_norm=False``). Weights load strictly: only known redundant copies of tied
    tensors may be absent or extra; anything else raises ``CheckpointError``. The folder's
    tokenizer, if it has one, is read with ``genodiff.tokenizers.load_tokenizer``.
    """
    directory = Path(directory)
    config = _read_config(directory)
    backbone, layout = detect_layout(config, directory)
    model = build(backbone, **{**layout.read_config(config), **overrides})
    weights = _weights_file(directory)
    state = {layout.to_genodiff(k): t for k, t in _read_weights(weights).items()}
    _load_strictly(model, state, f"{weights} (read as the {layout.name} layout)")
    return model.eval()


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} is not a checkpoint folder: no {CONFIG_FILE}")
    return json.loads(path.read_text())


def registered_layouts() -> list[tuple[str, CheckpointLayout]]:
    """(backbone name, layout) for every layout every registered backbone declares."""
    return [
        (name, layout)
        for name, cls in sorted(registry.available("backbone").items())
        for layout in layouts_of(cls)
    ]


def detect_layout(
    config: Mapping[str, Any], source: str | Path = "config"
) -> tuple[str, CheckpointLayout]:
    """The (backbone name, layout) whose ``matches`` accepts a config.json; exactly one must."""
    found = [(name, layout) for name, layout in registered_layouts() if layout.matches(config)]
    if len(found) == 1:
        return found[0]
    known = ", ".join(layout.name for _, layout in registered_layouts())
    if not found:
        raise CheckpointError(
            f"{source}: config.json matches no known layout ({known}; a plugin backbone may "
            f"add more); its fields: {sorted(config)}"
        )
    raise CheckpointError(
        f"{source}: config.json matches several layouts: {', '.join(l.name for _, l in found)}"
    )


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
    tokenizer = tokenizer_from_checkpoint(ckpt)
    return save_pretrained(model, out_dir, model_config, overwrite=overwrite, tokenizer=tokenizer)

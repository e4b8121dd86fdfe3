"""Convert an upstream MDLM Lightning checkpoint (kuleshov-group/mdlm ``.ckpt``) to a
checkpoint folder (config.json + model.safetensors) that ``genodiff.checkpoints.load_pretrained``
reads: layout ``mdlm`` for a DiT, ``mdlm_ar`` for the AR baseline.

    python -m genodiff_text.convert IN.ckpt OUT_DIR [--weights ema|raw] [--mask-index M]
        [--model-length L] [--overwrite] [--stub-unknown-classes]

What the upstream checkpoint holds:

- ``state_dict``: the trained ("raw") weights as ``backbone.<names>`` (other keys, e.g.
  ``noise.*``, are ignored). A DiT has ``backbone.sigma_map.*``; the AR model has not.
- ``ema``: the state of upstream's ExponentialMovingAverage (``decay``, ``num_updates``,
  ``shadow_params``). ``shadow_params`` is a list with one tensor per trained parameter, in the
  order the EMA was given them: ``backbone.parameters()`` first (then the noise schedule's
  parameters, if any: ignored). ``parameters()`` follows module registration order;
  ``upstream_parameter_order`` lists it, and is the order of our models' ``named_parameters()``
  (they register their modules in upstream's order). Buffers (``rotary_emb.inv_freq``) are not
  trained and come from ``state_dict``.
- ``hyper_parameters``: ``config`` (upstream's Hydra config: ``model.dropout``,
  ``model.length``, ``time_conditioning``) and ``tokenizer`` (its ``mask_token_id``, else
  upstream appends [MASK] at ``tokenizer.vocab_size``). The sizes are read from the weights
  (vocabulary, width, blocks, cond_dim, and the heads from the rotary buffer's length
  head_dim / 2) and checked against ``config.model`` where it gives them.

The checkpoint is a pickle. It is read by genodiff's safe reader
(``genodiff.checkpoints.io.read_checkpoint_file``: ``weights_only``, the OmegaConf config
allow-listed), so no code in it runs; upstream's checkpoints also pickle the tokenizer object
(a transformers class), which that reader refuses, naming it. ``stub_unknown_classes=True``
(``--stub-unknown-classes``) reads it as an inert placeholder instead: the weights convert and
still no code from the file runs.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from torch import Tensor, nn

from genodiff.checkpoints import UnsafePickleError, read_checkpoint_file, save_pretrained
from genodiff.errors import InputFileNotFoundError, InputValueError, UserInputError
from genodiff_text.layouts import PREFIX
from genodiff_text.models.ar import ARTransformer
from genodiff_text.models.dit import DIT

BUFFERS = ("rotary_emb.inv_freq",)


class ConversionError(InputValueError):
    """An upstream checkpoint this converter cannot read."""


def upstream_parameter_order(n_blocks: int, conditioned: bool) -> list[str]:
    """Names of upstream's trained backbone parameters in ``backbone.parameters()`` order (the
    order of the EMA's ``shadow_params``): DiT with ``conditioned``, AR without."""
    adaln = ["adaLN_modulation.weight", "adaLN_modulation.bias"] if conditioned else []
    block = [
        "norm1.weight",
        "attn_qkv.weight",
        "attn_out.weight",
        "norm2.weight",
        "mlp.0.weight",
        "mlp.0.bias",
        "mlp.2.weight",
        "mlp.2.bias",
        *adaln,
    ]
    names = ["vocab_embed.embedding"]
    if conditioned:
        names += [f"sigma_map.mlp.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")]
    for i in range(n_blocks):
        names += [f"blocks.{i}.{name}" for name in block]
    names += ["output_layer.norm_final.weight", "output_layer.linear.weight"]
    names += ["output_layer.linear.bias"]
    names += [f"output_layer.{name}" for name in adaln]
    return names


def _section(mapping: Any, key: str) -> Mapping[str, Any]:
    value = mapping.get(key) if mapping is not None else None
    return value if value is not None else {}


def model_config(
    raw: Mapping[str, Tensor],
    hyper_parameters: Mapping[str, Any] | None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[type[nn.Module], dict[str, Any]]:
    """(model class, its constructor arguments) for upstream backbone weights ``raw`` (without
    the ``backbone.`` prefix) and the checkpoint's hyper-parameters; ``overrides`` win."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if not {"vocab_embed.embedding", *BUFFERS} <= raw.keys():
        raise ConversionError("no backbone.vocab_embed.embedding: not an MDLM DiT or AR model")
    config = _section(hyper_parameters, "config")
    model = _section(config, "model")
    vocab_size, hidden_dim = raw["vocab_embed.embedding"].shape
    blocks = {int(m.group(1)) for k in raw if (m := re.match(r"blocks\.(\d+)\.", k))}
    n_heads = hidden_dim // (2 * raw["rotary_emb.inv_freq"].numel())
    fields: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_dim": hidden_dim,
        "n_blocks": len(blocks),
        "n_heads": n_heads,
        "dropout": model.get("dropout", 0.1),
        "model_length": model.get("length", 1024),
    }
    if "sigma_map.mlp.0.weight" in raw:
        cls = DIT
        fields["cond_dim"] = raw["sigma_map.mlp.0.weight"].shape[0]
        fields["time_conditioning"] = bool(config.get("time_conditioning", False))
    else:
        cls = ARTransformer
        tokenizer = hyper_parameters.get("tokenizer") if hyper_parameters else None
        if tokenizer is not None:  # read as a placeholder: the fields its pickle holds
            mask = getattr(tokenizer, "mask_token_id", None)
            fields["mask_index"] = (
                mask if mask is not None else getattr(tokenizer, "vocab_size", None)
            )
    accepted = inspect.signature(cls.__init__).parameters
    if unknown := sorted(set(overrides) - set(accepted)):
        raise ConversionError(f"{cls.__name__} takes no {', '.join(unknown)}")
    fields.update(overrides)
    if cls is ARTransformer and fields.get("mask_index") is None:
        raise ConversionError(
            "the checkpoint has no tokenizer to read the mask id from (or its pickled "
            "tokenizer holds no mask_token_id or vocab_size); give mask_index (--mask-index)"
        )
    shown = {"hidden_size": hidden_dim, "n_blocks": len(blocks), "n_heads": n_heads}
    for key, value in shown.items():
        if model.get(key, value) != value:
            raise ConversionError(
                f"config.model.{key} = {model.get(key)} disagrees with the weights ({value})"
            )
    return cls, fields


def ema_weights(raw: Mapping[str, Tensor], ema: Mapping[str, Any], names: list[str]) -> dict:
    """The EMA's shadow parameters by name: ``names`` in ``shadow_params`` order."""
    shadow = list(ema["shadow_params"])
    if len(shadow) < len(names):
        raise ConversionError(
            f"the EMA holds {len(shadow)} tensors, fewer than the {len(names)} parameters"
        )
    weights = dict(zip(names, shadow[: len(names)], strict=True))
    for name, tensor in weights.items():
        if tuple(tensor.shape) != tuple(raw[name].shape):
            raise ConversionError(
                f"EMA tensor for {name} has shape {tuple(tensor.shape)}, the weight "
                f"{tuple(raw[name].shape)}: the EMA order does not match"
            )
    return weights


def convert_checkpoint(
    ckpt_path: str | Path,
    out_dir: str | Path,
    weights: Literal["ema", "raw"] = "ema",
    overrides: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    stub_unknown_classes: bool = False,
) -> Path:
    """Upstream MDLM ``.ckpt`` -> checkpoint folder ``out_dir`` with its EMA (``"ema"``) or
    trained (``"raw"``) weights; ``overrides`` replace config fields (``mask_index``,
    ``model_length``, ...). Returns the folder. A checkpoint that needs more than tensors,
    plain values and an OmegaConf config to be unpickled (upstream's tokenizer object) is
    refused (``UnsafePickleError``); ``stub_unknown_classes=True`` reads those classes as inert
    placeholders (``genodiff.checkpoints.Placeholder``): no code from the file runs."""
    if weights not in ("ema", "raw"):
        raise ValueError(f"weights must be 'ema' or 'raw', got {weights!r}")
    if not Path(ckpt_path).is_file():
        what = "is a folder, not" if Path(ckpt_path).is_dir() else "not found: no"
        raise InputFileNotFoundError(f"{ckpt_path} {what} upstream MDLM .ckpt file")
    ckpt = read_checkpoint_file(ckpt_path, stub_unknown_classes=stub_unknown_classes)
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise ConversionError(f"{ckpt_path} holds no state_dict: not a Lightning checkpoint")
    raw = {k.removeprefix(PREFIX): t for k, t in ckpt["state_dict"].items() if k.startswith(PREFIX)}
    cls, config = model_config(raw, ckpt.get("hyper_parameters"), overrides)
    names = upstream_parameter_order(config["n_blocks"], conditioned=cls is DIT)
    if set(names) | set(BUFFERS) != set(raw):
        unknown = sorted(set(raw) - set(names) - set(BUFFERS))
        missing = sorted((set(names) | set(BUFFERS)) - set(raw))
        raise ConversionError(
            f"{ckpt_path}: backbone weights are not {cls.__name__}'s; "
            f"unexpected {unknown[:10]}, missing {missing[:10]}"
        )
    state = dict(raw)
    if weights == "ema":
        if ckpt.get("ema") is None:
            raise ConversionError(
                f"{ckpt_path} holds no EMA; convert with weights='raw' (--weights raw)"
            )
        state.update(ema_weights(raw, ckpt["ema"], names))
    model = cls(**config)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:  # shapes
        raise ConversionError(f"{ckpt_path}: {err}") from err
    return save_pretrained(model, out_dir, config=config, overwrite=overwrite)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m genodiff_text.convert",
        description="Convert an upstream MDLM Lightning checkpoint to a checkpoint folder.",
    )
    parser.add_argument("ckpt", type=Path, help="the upstream .ckpt")
    parser.add_argument("out_dir", type=Path, help="the folder to write")
    parser.add_argument("--weights", choices=("ema", "raw"), default="ema")
    parser.add_argument("--mask-index", type=int, help="AR: the mask token's id")
    parser.add_argument("--model-length", type=int, help="the context length to record")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument(
        "--stub-unknown-classes",
        action="store_true",
        help="read classes outside the allow-list (upstream's pickled tokenizer) as inert "
        "placeholders; no code from the file runs",
    )
    args = parser.parse_args(argv)
    overrides = {"mask_index": args.mask_index, "model_length": args.model_length}
    try:
        folder = convert_checkpoint(
            args.ckpt,
            args.out_dir,
            args.weights,
            overrides,
            args.overwrite,
            args.stub_unknown_classes,
        )
    except UserInputError as err:  # one line, naming the flag that opts in to placeholders
        if isinstance(err, UnsafePickleError):
            err = err.offering("--stub-unknown-classes")
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()

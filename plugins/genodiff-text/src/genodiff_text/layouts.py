"""Checkpoint-folder layouts of the text models (see ``genodiff.backbones.layout``).

- ``mdlm`` (``DIT``): the Hugging Face folder of MDLM (``kuleshov-group/mdlm-owt``): config.json
  with ``"model_type": "mdlm"`` and the fields ``vocab_size, model_length, hidden_dim, cond_dim,
  n_blocks, n_heads, dropout, time_conditioning``; weights ``backbone.<DiT names>``.
- ``mdlm_ar`` (``ARTransformer``): the same fields without ``cond_dim``, with
  ``"model_type": "mdlm_ar"``, ``"time_conditioning": false`` and ``mask_index``; weights
  ``backbone.<names>``. (Upstream publishes its AR baseline only as a Lightning checkpoint;
  ``genodiff_text.convert`` turns one into this folder.)

Both key on ``model_type`` alone, which the core's layouts (caduceus, mamba, and the
model_type-less mamba_ssm / HyenaDNA folders) never use with these values.
"""

from __future__ import annotations

from typing import Any

from genodiff.backbones.layout import (
    CONDITIONING_FIELDS,
    CheckpointLayout,
    conditioning_fields,
    pick,
)

PREFIX = "backbone."

MDLM_FIELDS = (
    "vocab_size",
    "model_length",
    "hidden_dim",
    "cond_dim",
    "n_blocks",
    "n_heads",
    "dropout",
    "time_conditioning",
)
MDLM_AR_FIELDS = (
    "vocab_size",
    "model_length",
    "hidden_dim",
    "n_blocks",
    "n_heads",
    "dropout",
    "mask_index",
)


def _write_mdlm_config(model: Any, config: dict[str, Any]) -> dict[str, Any]:
    fields = {k: config[k] for k in MDLM_FIELDS}
    return {"model_type": "mdlm", **fields, **conditioning_fields(config)}


def _write_mdlm_ar_config(model: Any, config: dict[str, Any]) -> dict[str, Any]:
    fields = {k: config[k] for k in MDLM_AR_FIELDS}
    return {"model_type": "mdlm_ar", **fields, "time_conditioning": False}


def _add_prefix(name: str) -> str:
    return PREFIX + name


def _strip_prefix(name: str) -> str:
    return name.removeprefix(PREFIX)


MDLM_LAYOUT = CheckpointLayout(
    name="mdlm",
    matches=lambda c: c.get("model_type") == "mdlm",
    read_config=lambda c: pick(c, MDLM_FIELDS + CONDITIONING_FIELDS),
    write_config=_write_mdlm_config,
    to_genodiff=_strip_prefix,
    to_reference=_add_prefix,
)

MDLM_AR_LAYOUT = CheckpointLayout(
    name="mdlm_ar",
    matches=lambda c: c.get("model_type") == "mdlm_ar",
    read_config=lambda c: pick(c, MDLM_AR_FIELDS),
    write_config=_write_mdlm_ar_config,
    to_genodiff=_strip_prefix,
    to_reference=_add_prefix,
)

"""The causal Mamba language model (the autoregressive baseline), as mamba_ssm's
``MambaLMHeadModel``.

State-dict keys are mamba_ssm's: ``backbone.embedding.weight``, ``backbone.layers.{i}.norm.weight``,
``backbone.layers.{i}.mixer.*`` (see ``Mamba``), ``backbone.norm_f.weight``; with
tie_embeddings the LM head is the embedding matrix and stored nowhere. ``step`` runs the model
recurrently, one token at a time, with a constant-size state per layer.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.backbones.base import LMBackboneBase
from genodiff.backbones.capabilities import Capabilities
from genodiff.backbones.layout import (
    CONDITIONING_FIELDS,
    CheckpointLayout,
    conditioning_fields,
    pick,
)
from genodiff.backbones.mamba import INIT_MAMBA_RANGES, Block, Mamba, init_mamba_weights
from genodiff.conditioning import add_label, label_embedding_for
from genodiff.config_values import Keywords
from genodiff.errors import InputValueError
from genodiff.ops import RMSNorm, add_norm
from genodiff.registry import register_backbone

# Per layer (conv_state (B, d_inner, d_conv), ssm_state (B, d_inner, N)).
InferenceCache = list[tuple[torch.Tensor, torch.Tensor]]


class MixerModel(nn.Module):
    """Embedding -> n_layer prenorm Mamba blocks -> final add + norm: ids -> (B, L, d)."""

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        vocab_size: int,
        ssm_cfg: dict,
        rms_norm: bool,
        residual_in_fp32: bool,
        norm_epsilon: float,
        fused_add_norm: bool = False,
        num_classes: int = 0,
    ):
        super().__init__()
        self.residual_in_fp32, self.fused_add_norm = residual_in_fp32, fused_add_norm
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.label_embedding = label_embedding_for(num_classes, d_model)
        norm_cls = RMSNorm if rms_norm else nn.LayerNorm
        self.layers = nn.ModuleList(
            Block(
                Mamba(d_model, layer_idx=i, **ssm_cfg),
                norm_cls(d_model, eps=norm_epsilon),
                residual_in_fp32,
                fused_add_norm,
            )
            for i in range(n_layer)
        )
        self.norm_f = norm_cls(d_model, eps=norm_epsilon)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        hidden = self.embedding(input_ids) if inputs_embeds is None else inputs_embeds
        hidden = add_label(hidden, self.label_embedding, labels)  # at every position
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        return self.final_norm(hidden, residual)  # (B, L, d)

    def final_norm(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """norm_f(hidden + residual)."""
        fused, fp32 = self.fused_add_norm, self.residual_in_fp32
        normed, _ = add_norm(hidden, residual, self.norm_f, fp32, fused)
        return normed

    def step(
        self, input_ids: torch.Tensor, cache: InferenceCache, labels: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ids (B, 1) -> final normed hidden state (B, 1, d); advances ``cache`` in place."""
        hidden = add_label(self.embedding(input_ids), self.label_embedding, labels)
        residual = None
        for layer, (conv_state, ssm_state) in zip(self.layers, cache, strict=True):
            hidden, residual = layer.add_norm(hidden, residual)
            hidden, _, _ = layer.mixer.step(hidden, conv_state, ssm_state)
        return self.final_norm(hidden, residual)


@register_backbone("mamba")
class MambaLM(LMBackboneBase):
    """Causal Mamba LM. Arguments use mamba_ssm's ``MambaConfig`` field names and defaults
    (plus ``norm_epsilon`` and ``initializer_cfg`` of its ``MixerModel``). ``fused_add_norm``
    only selects mamba_ssm's fused add + norm kernel (on CUDA, see ``genodiff.ops.upstream``);
    the function is the same. Hybrid attention layers and MLPs (``d_intermediate``,
    ``attn_layer_idx``) and Mamba-2 are not supported."""

    # Checked when a config is loaded (genodiff.config_values); d_model, n_layer, ... on the base.
    config_ranges = {"norm_epsilon": ">0"}
    # ssm_cfg holds the Mamba mixer's keyword arguments, and mamba_ssm's "layer" (Mamba1 only);
    # initializer_cfg those of the weight initialisation.
    config_mappings = {
        "ssm_cfg": Keywords(
            Mamba, exclude=("d_model", "layer_idx"), extra={"layer": Literal["Mamba1"]}
        ),
        "initializer_cfg": Keywords(
            init_mamba_weights, exclude=("model", "n_layer"), ranges=INIT_MAMBA_RANGES
        ),
    }

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        vocab_size: int,
        ssm_cfg: dict | None = None,
        rms_norm: bool = True,
        residual_in_fp32: bool = True,
        fused_add_norm: bool = True,
        pad_vocab_size_multiple: int = 8,
        tie_embeddings: bool = True,
        norm_epsilon: float = 1e-5,
        initializer_cfg: dict | None = None,
        d_intermediate: int = 0,
        attn_layer_idx: list[int] | None = None,
        attn_cfg: dict | None = None,
        num_classes: int = 0,
    ):
        super().__init__()
        ssm_cfg = dict(ssm_cfg or {})
        if ssm_cfg.pop("layer", "Mamba1") != "Mamba1" or d_intermediate or attn_layer_idx:
            raise InputValueError(
                "only pure Mamba-1 models are supported (no Mamba-2, MLP, attention)"
            )
        self.d_model, self.n_layer = d_model, n_layer
        self.vocab_size = math.ceil(vocab_size / pad_vocab_size_multiple) * pad_vocab_size_multiple
        self.capabilities = Capabilities(
            vocab_size=self.vocab_size,
            hidden_size=d_model,
            causal=True,
            recurrent_step=True,
            class_conditioning=num_classes > 0,
        )
        self.backbone = MixerModel(
            d_model,
            n_layer,
            self.vocab_size,
            ssm_cfg,
            rms_norm,
            residual_in_fp32,
            norm_epsilon,
            fused_add_norm,
            num_classes,
        )
        self.lm_head = None if tie_embeddings else nn.Linear(d_model, self.vocab_size, bias=False)
        init_mamba_weights(self, n_layer, **(initializer_cfg or {}))

    @property
    def lm_head_weight(self) -> torch.Tensor:
        """(vocab_size, d): the embedding matrix itself when tied."""
        return self.backbone.embedding.weight if self.lm_head is None else self.lm_head.weight

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tied (or separate) LM head: (B, L, d) -> (B, L, vocab_size). Causal: position t
        sees tokens 0..t only."""
        return F.linear(hidden, self.lm_head_weight)

    def allocate_inference_cache(
        self, batch_size: int, dtype: torch.dtype | None = None
    ) -> InferenceCache:
        """Zero recurrent states, one (conv_state, ssm_state) per layer."""
        return [
            layer.mixer.allocate_inference_cache(batch_size, dtype)
            for layer in self.backbone.layers
        ]

    def step(
        self, input_ids: torch.Tensor, cache: InferenceCache, labels: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Feed one token per sequence, ids (B,) or (B, 1): float32 logits (B, vocab_size) for
        the next token. ``cache`` advances in place by one position. ``labels`` (B,) as in
        ``forward`` (the same at every step of a sequence)."""
        hidden = self.backbone.step(input_ids.reshape(-1, 1), cache, labels)  # (B, 1, d)
        return self.head(hidden.squeeze(1)).float()


# ----------------------------------------------------------------------------- checkpoints
# mamba_ssm's MambaLMHeadModel folders (MambaConfig fields, no model_type, keys "backbone.*")
# and, read only, Hugging Face transformers' MambaForCausalLM ("model_type": "mamba").

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
# transformers' MambaConfig name -> mamba_ssm's ssm_cfg name
_HF_SSM_NAMES = {
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


def _write_mamba_config(model: MambaLM, cfg: dict) -> dict:
    if cfg["norm_epsilon"] != 1e-5:
        raise InputValueError("mamba_ssm's MambaConfig has no norm_epsilon; only 1e-5 can be saved")
    fields = {k: cfg[k] for k in MAMBA_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["ssm_cfg"] = dict(cfg["ssm_cfg"] or {})
    fields["attn_layer_idx"] = list(cfg["attn_layer_idx"] or [])
    fields["attn_cfg"] = dict(cfg["attn_cfg"] or {})
    fields.update(conditioning_fields(cfg))
    return fields


def _read_hf_mamba_config(config: dict) -> dict:
    """transformers' MambaConfig -> MambaLM arguments (its embedding is not padded)."""
    return {
        "d_model": config["hidden_size"],
        "n_layer": config["num_hidden_layers"],
        "vocab_size": config["vocab_size"],
        "pad_vocab_size_multiple": 1,
        "ssm_cfg": {new: config[old] for old, new in _HF_SSM_NAMES.items() if old in config},
        "norm_epsilon": config.get("layer_norm_epsilon", 1e-5),
        "residual_in_fp32": config.get("residual_in_fp32", True),
        "tie_embeddings": config.get("tie_word_embeddings", True),
    }


def _is_mamba_ssm_config(config: dict) -> bool:
    return (
        "model_type" not in config
        and "layer" not in config
        and {"d_model", "n_layer", "ssm_cfg"} <= config.keys()
    )


MambaLM.checkpoint_layouts = (
    CheckpointLayout(
        name="mamba_ssm",
        matches=_is_mamba_ssm_config,
        read_config=lambda c: pick(c, MAMBA_FIELDS + CONDITIONING_FIELDS),
        write_config=_write_mamba_config,
    ),
    CheckpointLayout(
        name="hf_mamba",
        matches=lambda c: c.get("model_type") == "mamba",
        read_config=_read_hf_mamba_config,
        to_genodiff=lambda name: (
            "backbone.embedding.weight" if name == "backbone.embeddings.weight" else name
        ),
    ),
)

"""Caduceus-Ph: a bidirectional Mamba (BiMamba) language model over DNA tokens.

Follows kuleshov-group/caduceus (``CaduceusForMaskedLM`` with rcps=False). State-dict keys are
the Hugging Face checkpoint keys without their ``caduceus.`` prefix, e.g.
``backbone.layers.0.mixer.mamba_fwd.in_proj.weight``; the LM head is tied to the embedding and
stored nowhere. Ph models are trained with reverse-complement augmentation; post-hoc conjoining
(averaging predictions for x and its reverse complement) is the caller's job.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.backbones.mamba import Block, Mamba
from genodiff.ops import RMSNorm, add_norm
from genodiff.registry import register_backbone


class BiMamba(nn.Module):
    """mamba_fwd(x) combined with flip(mamba_rev(flip(x))) over the sequence, by "add" or
    "ew_multiply". With weight_tie the reverse direction uses mamba_fwd's in_proj and out_proj
    (stored once, under mamba_fwd); its conv, x_proj, dt_proj, A_log and D are its own."""

    def __init__(
        self,
        d_model: int,
        bidirectional: bool = True,
        bidirectional_strategy: str | None = "add",
        bidirectional_weight_tie: bool = True,
        **mamba_kwargs,
    ):
        super().__init__()
        strategy = bidirectional_strategy or "add"
        if bidirectional and strategy not in ("add", "ew_multiply"):
            raise ValueError(
                f"bidirectional_strategy must be 'add' or 'ew_multiply', got {strategy!r}"
            )
        self.strategy = strategy
        self.weight_tie = bidirectional and bidirectional_weight_tie
        self.mamba_fwd = Mamba(d_model, **mamba_kwargs)
        self.mamba_rev = Mamba(d_model, **mamba_kwargs) if bidirectional else None
        if self.weight_tie:
            self.mamba_rev.in_proj = None
            self.mamba_rev.out_proj = None

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, d) -> (B, L, d)."""
        fwd, rev = self.mamba_fwd, self.mamba_rev
        if rev is None:
            return fwd(hidden_states)
        if self.weight_tie:
            xz = fwd.in_proj(hidden_states)  # (B, L, 2 d_inner), shared by both directions
            out = fwd.out_proj(fwd.ssm(xz))
            out_rev = fwd.out_proj(rev.ssm(xz.flip(1)).flip(1))
        else:
            out = fwd(hidden_states)
            out_rev = rev(hidden_states.flip(1)).flip(1)
        return out + out_rev if self.strategy == "add" else out * out_rev


class Embeddings(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, d_model)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(input_ids)


class CaduceusMixerModel(nn.Module):
    """Embedding -> n_layer prenorm BiMamba blocks -> final add + norm: ids -> (B, L, d)."""

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        vocab_size: int,
        ssm_cfg: dict | None,
        rms_norm: bool,
        residual_in_fp32: bool,
        norm_epsilon: float,
        bidirectional: bool,
        bidirectional_strategy: str | None,
        bidirectional_weight_tie: bool,
    ):
        super().__init__()
        self.residual_in_fp32 = residual_in_fp32
        self.embeddings = Embeddings(vocab_size, d_model)

        norm_cls = RMSNorm if rms_norm else nn.LayerNorm
        self.layers = nn.ModuleList(
            Block(
                BiMamba(
                    d_model,
                    bidirectional=bidirectional,
                    bidirectional_strategy=bidirectional_strategy,
                    bidirectional_weight_tie=bidirectional_weight_tie,
                    layer_idx=i,
                    **(ssm_cfg or {}),
                ),
                norm_cls(d_model, eps=norm_epsilon),
                residual_in_fp32,
            )
            for i in range(n_layer)
        )
        self.norm_f = norm_cls(d_model, eps=norm_epsilon)

    def forward(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None = None):
        hidden = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        hidden, _ = add_norm(hidden, residual, self.norm_f, self.residual_in_fp32)
        return hidden  # (B, L, d)


@register_backbone("caduceus")
class Caduceus(nn.Module):
    """Caduceus-Ph backbone + tied LM head. Arguments use the ``CaduceusConfig`` field names and
    defaults (released checkpoints set residual_in_fp32=False). ``fused_add_norm`` only selects
    a kernel upstream; both paths compute the same function for Ph and it is accepted for config
    compatibility. ``complement_map`` (token id -> complement id) is padded with identities to
    the padded vocabulary and kept for reverse-complement helpers."""

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        vocab_size: int = 12,
        ssm_cfg: dict | None = None,
        rms_norm: bool = True,
        residual_in_fp32: bool = True,
        fused_add_norm: bool = True,
        pad_vocab_size_multiple: int = 8,
        norm_epsilon: float = 1e-5,
        initializer_cfg: dict | None = None,
        bidirectional: bool = True,
        bidirectional_strategy: str | None = "add",
        bidirectional_weight_tie: bool = True,
        rcps: bool = False,
        complement_map: dict[int, int] | None = None,
    ):
        super().__init__()
        if rcps:
            raise ValueError(
                "rcps=True (Caduceus-PS) is not supported in this version; use rcps=False"
            )
        self.d_model, self.n_layer = d_model, n_layer
        self.vocab_size = math.ceil(vocab_size / pad_vocab_size_multiple) * pad_vocab_size_multiple
        self.complement_map = None
        if complement_map is not None:
            self.complement_map = {int(k): int(v) for k, v in complement_map.items()}
            for i in range(len(self.complement_map), self.vocab_size):
                self.complement_map[i] = i
        self.backbone = CaduceusMixerModel(
            d_model,
            n_layer,
            self.vocab_size,
            ssm_cfg,
            rms_norm,
            residual_in_fp32,
            norm_epsilon,
            bidirectional,
            bidirectional_strategy,
            bidirectional_weight_tie,
        )
        self._init_weights(**(initializer_cfg or {}))

    @torch.no_grad()
    def _init_weights(
        self,
        initializer_range: float = 0.02,
        rescale_prenorm_residual: bool = True,
        n_residuals_per_layer: int = 1,
    ):
        """As Caduceus' ``_init_weights``: embedding N(0, initializer_range), Linear biases zero
        (except dt_proj's), out_proj re-drawn (PyTorch's default) and scaled by
        1/sqrt(n_residuals_per_layer * n_layer) (GPT-2)."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and module.bias is not None:
                if not getattr(module.bias, "_no_reinit", False):
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=initializer_range)
            if (
                rescale_prenorm_residual
                and isinstance(module, Mamba)
                and module.out_proj is not None
            ):
                nn.init.kaiming_uniform_(module.out_proj.weight, a=math.sqrt(5))
                module.out_proj.weight /= math.sqrt(n_residuals_per_layer * self.n_layer)

    def hidden_states(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, L) ids, or (B, L, d) embeddings -> final normed hidden states (B, L, d)."""
        return self.backbone(input_ids, inputs_embeds)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        sigma: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, L, vocab_size) in float32 over the padded vocabulary.

        ``sigma`` (B,) is accepted for the backbone contract and ignored: the DNA models are not
        time-conditioned (as in the MDLM paper).
        """
        hidden = self.hidden_states(input_ids, inputs_embeds)
        return F.linear(hidden, self.backbone.embeddings.word_embeddings.weight).float()

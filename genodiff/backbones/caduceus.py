"""Caduceus: a bidirectional Mamba (BiMamba) language model over DNA tokens, Ph or PS.

Follows kuleshov-group/caduceus (``CaduceusForMaskedLM``). State-dict keys are the Hugging Face
checkpoint keys without their ``caduceus.`` prefix.

- Ph (rcps=False), e.g. ``backbone.layers.0.mixer.mamba_fwd.in_proj.weight``; the LM head is
  tied to the embedding and stored nowhere. With bidirectional_weight_tie the reverse
  direction's in_proj and out_proj are stored once, under mamba_fwd; upstream's own state dict
  lists them under mamba_rev too, and such files load (the copies must equal mamba_fwd's).
  Ph models are trained with reverse-complement augmentation; ``conjoin_logits`` does the
  post-hoc conjoining.
- PS (rcps=True): reverse-complement equivariant (pieces in ``genodiff.backbones.rcps``), with
  hidden states of 2*d_model channels and the same parameter tensors as Ph. Keys:
  ``backbone.embeddings.word_embeddings.{embedding.weight,complement_map}``,
  ``backbone.layers.{i}.mixer.submodule.mamba_{fwd,rev}.*``, ``lm_head.complement_map`` and
  ``lm_head.lm_head.weight`` (the embedding tensor itself: ``state_dict()`` lists it, as
  upstream's ``pytorch_model.bin`` does; a safetensors file may leave the tied copy out, so load
  those with ``strict=False``). The norms are ``backbone.layers.{i}.norm.weight`` and
  ``backbone.norm_f.weight`` with fused_add_norm=True (the released checkpoints), and
  ``...norm.submodule.weight`` / ``backbone.norm_f.submodule.weight`` without, as upstream.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

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
from genodiff.backbones.mamba import (
    INIT_MAMBA_RANGES,
    Block,
    Mamba,
    init_mamba_weights,
    mix_directions,
    one_pass,
)
from genodiff.backbones.rcps import (
    RCPSAddNormWrapper,
    RCPSBlock,
    RCPSEmbedding,
    RCPSLMHead,
    rc_ids,
    rcps_add_norm,
)
from genodiff.backbones.time_embedding import add_sigma, sigma_embedding_for
from genodiff.conditioning import add_label, label_embedding_for
from genodiff.config_values import Keywords
from genodiff.errors import InputValueError
from genodiff.ops import RMSNorm, add_norm
from genodiff.registry import register_backbone


class BiMamba(nn.Module):
    """mamba_fwd(x) combined with flip(mamba_rev(flip(x))) over the sequence, by "add" or
    "ew_multiply". With weight_tie the reverse direction uses mamba_fwd's in_proj and out_proj
    (stored once, under mamba_fwd); its conv, x_proj, dt_proj, A_log and D are its own. Where
    nothing needs a gradient both directions run as one pass (``mix_directions``)."""

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
            raise InputValueError(
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
        if one_pass(self, hidden_states):  # both directions in one pass over the data
            projs = [fwd] if self.weight_tie else [fwd, rev]
            in_projs, out_projs = [m.in_proj for m in projs], [m.out_proj for m in projs]
            return mix_directions([fwd, rev], hidden_states, in_projs, out_projs, self.strategy)
        if self.weight_tie:
            xz = fwd.in_proj_xz(hidden_states)  # (B, 2 d_inner, L), shared by both directions
            out = fwd.mix(xz, fwd.out_proj)
            out_rev = rev.mix(xz.flip(-1), fwd.out_proj).flip(1)
        else:
            out = fwd(hidden_states)
            out_rev = rev(hidden_states.flip(1)).flip(1)
        return out + out_rev if self.strategy == "add" else out * out_rev


class Embeddings(nn.Module):
    """word_embeddings: nn.Embedding (Ph, ids -> (B, L, d)) or RCPSEmbedding (PS, -> 2d)."""

    def __init__(self, vocab_size: int, d_model: int, complement_map: torch.Tensor | None = None):
        super().__init__()
        if complement_map is None:
            self.word_embeddings = nn.Embedding(vocab_size, d_model)
        else:
            self.word_embeddings = RCPSEmbedding(vocab_size, d_model, complement_map)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(input_ids)


class CaduceusMixerModel(nn.Module):
    """Embedding -> n_layer prenorm BiMamba blocks -> final add + norm: ids -> (B, L, d).

    With ``rcps_complement_map`` (PS) every piece is its RCPS version and states are
    (B, L, 2d); ``fused_add_norm`` then picks upstream's fused-kernel ordering of the halves in
    the blocks (see ``rcps.rcps_add_norm``). For Ph both paths are the same function.
    ``fused_add_norm`` also selects mamba_ssm's fused add + norm kernel where the upstream
    kernels run (``genodiff.ops.add_norm``).
    """

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
        fused_add_norm: bool = True,
        rcps_complement_map: torch.Tensor | None = None,
        num_classes: int = 0,
        time_conditioning: bool = False,
    ):
        super().__init__()
        self.residual_in_fp32 = residual_in_fp32
        self.rcps = rcps_complement_map is not None
        self.fused_add_norm = fused_add_norm
        self.embeddings = Embeddings(vocab_size, d_model, rcps_complement_map)
        self.label_embedding = label_embedding_for(num_classes, d_model)
        self.sigma_embedding = sigma_embedding_for(time_conditioning, d_model)

        norm_cls = RMSNorm if rms_norm else nn.LayerNorm
        layers = []
        for i in range(n_layer):
            mixer = BiMamba(
                d_model,
                bidirectional=bidirectional,
                bidirectional_strategy=bidirectional_strategy,
                bidirectional_weight_tie=bidirectional_weight_tie,
                layer_idx=i,
                **(ssm_cfg or {}),
            )
            norm = norm_cls(d_model, eps=norm_epsilon)
            if self.rcps:
                layers.append(RCPSBlock(mixer, norm, fused_add_norm, residual_in_fp32))
            else:
                layers.append(Block(mixer, norm, residual_in_fp32, fused_add_norm))
        self.layers = nn.ModuleList(layers)
        self.norm_f = norm_cls(d_model, eps=norm_epsilon)
        if self.rcps and not fused_add_norm:
            self.norm_f = RCPSAddNormWrapper(self.norm_f)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sigma: torch.Tensor | None = None,
    ):
        hidden = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        # The label and noise-level vectors join every position (both strands' channels for
        # PS, so the model stays RC-equivariant); sigma is ignored without time conditioning.
        hidden = add_label(hidden, self.label_embedding, labels, rc_symmetric=self.rcps)
        hidden = add_sigma(hidden, self.sigma_embedding, sigma, rc_symmetric=self.rcps)
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        fused, fp32 = self.fused_add_norm, self.residual_in_fp32
        if not self.rcps:
            hidden, _ = add_norm(hidden, residual, self.norm_f, fp32, fused)
        elif fused:  # upstream's fused final norm keeps the halves in order
            hidden, _ = rcps_add_norm(hidden, residual, self.norm_f, fp32, fused=True)
        else:
            hidden, _ = self.norm_f(hidden, residual, self.residual_in_fp32)
        return hidden  # (B, L, d), or (B, L, 2d) for PS


@register_backbone("caduceus")
class Caduceus(LMBackboneBase):
    """Caduceus backbone + tied LM head. Arguments use the ``CaduceusConfig`` field names and
    defaults (released checkpoints set residual_in_fp32=False).

    rcps=False is Caduceus-Ph: ``fused_add_norm`` only selects mamba_ssm's fused add + norm
    kernel (on CUDA, see ``genodiff.ops.upstream``); both paths compute the same function.
    rcps=True is Caduceus-PS: ``fused_add_norm=True`` reproduces the ordering of upstream's
    fused path (that the released PS checkpoints need), ``False`` that of its plain PyTorch
    path; they are different functions of the same weights. ``complement_map`` (token id ->
    complement id, a mapping or a sequence; a config takes the tokenizer's) is padded with
    identities to the padded vocabulary; PS needs one. For PS, ``hidden_states`` (and
    ``inputs_embeds``) have 2 d_model channels, cat[fwd, rc stream], and are RC-equivariant:
    the states of rc(ids) are those of ids flipped over sequence and channels
    (``rcps.rc_states``).

    ``time_conditioning=True`` adds the noise level: e(sigma) joins every position of the
    BiMamba stack's input (both strands' channels for PS, which stays RC-equivariant), see
    ``genodiff.backbones.time_embedding``; the module declares
    ``capabilities.time_conditioning`` and diffusion objectives then give it sigma
    (``objective.time_conditioning=true``; UDLM always does). Default off: the state dict and
    the function are those of a model without it.
    """

    # Checked when a config is loaded (genodiff.config_values); d_model, n_layer, ... on the base.
    config_ranges = {"norm_epsilon": ">0"}
    # ssm_cfg holds the keyword arguments of each direction's Mamba mixer, initializer_cfg
    # those of the weight initialisation.
    config_mappings = {
        "ssm_cfg": Keywords(Mamba, exclude=("d_model", "layer_idx")),
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
        norm_epsilon: float = 1e-5,
        initializer_cfg: dict | None = None,
        bidirectional: bool = True,
        bidirectional_strategy: str | None = "add",
        bidirectional_weight_tie: bool = True,
        rcps: bool = False,
        complement_map: Mapping[int, int] | Sequence[int] | None = None,
        num_classes: int = 0,
        time_conditioning: bool = False,
    ):
        super().__init__()
        self.d_model, self.n_layer, self.rcps = d_model, n_layer, rcps
        self.vocab_size = math.ceil(vocab_size / pad_vocab_size_multiple) * pad_vocab_size_multiple
        self.capabilities = Capabilities(
            vocab_size=self.vocab_size,
            hidden_size=2 * d_model if rcps else d_model,
            rc_equivariant=rcps,
            class_conditioning=num_classes > 0,
            time_conditioning=time_conditioning,
        )
        if rcps and complement_map is None:
            raise InputValueError(
                "model.rcps=true (Caduceus-PS, reverse-complement equivariant) needs a "
                "complement_map, which comes from the tokenizer, and this tokenizer has none "
                "(its vocabulary has no reverse complement); use model.rcps=false"
            )
        self.complement_map = None
        if complement_map is not None:
            if not isinstance(complement_map, Mapping):
                complement_map = dict(enumerate(complement_map))
            self.complement_map = {int(k): int(v) for k, v in complement_map.items()}
            for i in range(len(self.complement_map), self.vocab_size):
                self.complement_map[i] = i
        cmap = None
        if rcps:
            cmap = torch.tensor([self.complement_map[i] for i in range(self.vocab_size)])
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
            fused_add_norm,
            cmap,
            num_classes,
            time_conditioning,
        )
        if rcps:  # the head's weight IS the embedding table
            self.lm_head = RCPSLMHead(d_model, self.vocab_size, cmap)
            self.lm_head.lm_head.weight = self.backbone.embeddings.word_embeddings.weight
        init_mamba_weights(self, n_layer, **(initializer_cfg or {}))

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head tied to the embedding (the RCPS head for PS): -> (B, L, vocab_size)."""
        if self.rcps:
            return self.lm_head(hidden)
        return F.linear(hidden, self.backbone.embeddings.word_embeddings.weight)


def conjoin_logits(
    model: Caduceus, input_ids: torch.Tensor, sigma: torch.Tensor | None = None
) -> torch.Tensor:
    """Post-hoc conjoining (for Ph): (logits(x) + rc_permute(logits(rc(x)))) / 2, (B, L, V).

    rc_permute flips the sequence back and permutes the vocabulary by the complement map, so
    both terms predict the tokens of x. Averaged in logit space, as upstream's conjoined
    decoders average the outputs of x and rc(x). Uses the model's complement map.
    """
    cmap = model.complement_map
    if cmap is None:
        raise InputValueError("conjoining needs the model's complement_map (from its tokenizer)")
    cmap = torch.tensor([cmap[i] for i in range(model.vocab_size)], device=input_ids.device)
    logits = model(input_ids, sigma)
    logits_rc = model(rc_ids(input_ids, cmap), sigma)  # predictions for rc(x)
    return (logits + logits_rc.flip(1)[..., cmap]) / 2


# ----------------------------------------------------------------------------- checkpoints
# Hugging Face folders of kuleshov-group/caduceus: "model_type": "caduceus", CaduceusConfig
# fields, weights under "caduceus." (the backbone) and "lm_head." (PS).

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


# genodiff's own field for a time-conditioned Caduceus (``time_embedding``).
TIME_FIELDS = ("time_conditioning",)


def _write_caduceus_config(model: Caduceus, cfg: dict) -> dict:
    fields = {k: cfg[k] for k in CADUCEUS_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["ssm_cfg"] = dict(cfg["ssm_cfg"] or {})
    cmap = model.complement_map
    fields["complement_map"] = None if cmap is None else {str(k): v for k, v in cmap.items()}
    fields.update(conditioning_fields(cfg))
    if cfg.get("time_conditioning"):  # genodiff's own field, only when set (upstream has none)
        fields["time_conditioning"] = True
    return {"model_type": "caduceus", "architectures": ["CaduceusForMaskedLM"], **fields}


def _caduceus_reference_name(name: str) -> str:
    return "caduceus." + name if name.startswith("backbone.") else name


# mamba_rev's in_proj / out_proj: with bidirectional_weight_tie upstream's module holds them as
# mamba_fwd's parameters, and its state dict (a torch.save, a pytorch_model.bin written with
# safe_serialization=False, a Lightning checkpoint) lists them under both directions.
_TIED_REVERSE_PROJECTION = re.compile(r"(.*\.)mamba_rev\.((?:in|out)_proj\.(?:weight|bias))")


def _tied_reverse_projection(name: str) -> str | None:
    """The mamba_fwd name a weight-tied reverse projection repeats; None for other names."""
    match = _TIED_REVERSE_PROJECTION.fullmatch(name)
    return None if match is None else f"{match[1]}mamba_fwd.{match[2]}"


Caduceus.checkpoint_layouts = (
    CheckpointLayout(
        name="caduceus",
        matches=lambda c: c.get("model_type") == "caduceus",
        read_config=lambda c: pick(c, CADUCEUS_FIELDS + CONDITIONING_FIELDS + TIME_FIELDS),
        write_config=_write_caduceus_config,
        to_genodiff=lambda name: name.removeprefix("caduceus."),
        to_reference=_caduceus_reference_name,
        tied_copy_of=_tied_reverse_projection,
    ),
)

"""HyenaDNA: a causal language model of order-2 Hyena operators (implicit long convolutions).

Follows HazyResearch/hyena-dna (the ``HyenaDNAModel`` of ``standalone_hyenadna.py`` /
``huggingface.py``, the code behind the released ``hyenadna-*`` checkpoints). State-dict keys are
the checkpoint keys without their prefix, e.g. ``backbone.layers.0.mixer.filter_fn.bias``; the
LM head is tied to the embedding and stored nowhere.

One Hyena operator (order 2) on u (B, L, d):
    x0, x1, v = short_causal_conv(in_proj(u))          each (B, d, L)
    k         = implicit filter: FFN(pos. features) * exponential window       (d, L)
    y         = x0 * (k * (x1 v) + bias * (x1 v))      * = causal convolution, by FFT
    out       = out_proj(y)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.backbones.base import LMBackboneBase
from genodiff.backbones.capabilities import Capabilities
from genodiff.backbones.layout import (
    CONDITIONING_FIELDS,
    CheckpointLayout,
    conditioning_fields,
    constructor_defaults,
    pick,
)
from genodiff.backbones.meta_build import computed_on_cpu
from genodiff.conditioning import add_label, label_embedding_for
from genodiff.config_values import Keywords
from genodiff.errors import InputValueError
from genodiff.registry import register_backbone


def fftconv(u: torch.Tensor, k: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Causal long convolution y[t] = sum_{s<=t} k[s] u[t-s] + bias * u[t], by FFT of size 2L.

    u (B, D, L), k (D, L), bias (D,) -> (B, D, L) in u's dtype. The transforms run in float32,
    or in float64 when u or k is float64 (upstream casts u to k's dtype: float32 outside
    autocast, float64 in a float64 model; under autocast k is bf16, too coarse for the FFT).
    """
    seqlen = u.shape[-1]
    n = 2 * seqlen  # zero padding to 2L turns the circular convolution into a linear one
    dtype = torch.float64 if torch.float64 in (u.dtype, k.dtype) else torch.float32
    k_f = torch.fft.rfft(k.to(dtype), n=n)  # (D, L + 1)
    u_f = torch.fft.rfft(u.to(dtype), n=n)  # (B, D, L + 1)
    y = torch.fft.irfft(u_f * k_f, n=n)[..., :seqlen]  # (B, D, L)
    return (y + u * bias[:, None]).to(u.dtype)


class Sin(nn.Module):
    """sin(freq * x) with a learnable per-channel frequency freq (1, dim), initialised to w."""

    def __init__(self, dim: int, w: float = 10.0):
        super().__init__()
        self.freq = nn.Parameter(torch.full((1, dim), float(w)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.freq * x)


class PositionalEmbedding(nn.Module):
    """Features of each filter position: z (1, l_max, emb_dim) = [t, Re exp(-i f w), Im ...]
    with t = linspace(0, 1), w = 2 pi pos / l_max and (emb_dim - 1) // 2 bands f. z is trained
    only when lr_pos_emb != 0, with learning rate lr_pos_emb and no weight decay (upstream's
    ``register(..., lr=lr_pos_emb)``; a buffer otherwise); t is a buffer."""

    def __init__(self, emb_dim: int, seq_len: int, lr_pos_emb: float = 0.0):
        super().__init__()
        z = computed_on_cpu(self.features, emb_dim, seq_len)  # (1, L, emb_dim)
        t = torch.linspace(0, 1, seq_len)[None, :, None]  # (1, L, 1), z's first feature
        if lr_pos_emb == 0.0:
            self.register_buffer("z", z)
        else:
            self.z = nn.Parameter(z)
            self.z._optim = {"lr": lr_pos_emb, "weight_decay": 0.0}  # genodiff.training.optim
        self.register_buffer("t", t)

    @staticmethod
    def features(emb_dim: int, seq_len: int) -> torch.Tensor:
        """z (1, L, emb_dim) = [t, Re exp(-i f w), Im exp(-i f w)]."""
        t = torch.linspace(0, 1, seq_len)[None, :, None]  # (1, L, 1)
        bands = (emb_dim - 1) // 2
        w = 2 * math.pi * torch.linspace(0, seq_len - 1, seq_len)[None, :, None] / seq_len
        f = torch.linspace(1e-4, bands - 1, bands)[None, None]  # (1, 1, bands)
        z = torch.exp(-1j * f * w)  # (1, L, bands) complex
        return torch.cat([t, z.real, z.imag], dim=-1)

    def forward(self, seqlen: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.z[:, :seqlen], self.t[:, :seqlen]  # (1, L, emb_dim), (1, L, 1)


class ExponentialModulation(nn.Module):
    """Window h(t) * (exp(-t |delta_c|) + shift), decay rates delta (1, 1, d) a fixed buffer
    spanning log(target)/slow_decay_pct .. log(target)/fast_decay_pct over the channels."""

    def __init__(
        self,
        d_model: int,
        fast_decay_pct: float = 0.3,
        slow_decay_pct: float = 1.5,
        target: float = 1e-2,
        shift: float = 0.05,
        modulate: bool = True,
    ):
        super().__init__()
        self.modulate, self.shift = modulate, shift
        max_decay = math.log(target) / fast_decay_pct
        min_decay = math.log(target) / slow_decay_pct
        self.register_buffer("deltas", torch.linspace(min_decay, max_decay, d_model)[None, None])

    def forward(self, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """t (1, L, 1), h (1, L, d) -> (1, L, d)."""
        if not self.modulate:
            return h
        return h * (torch.exp(-t * self.deltas.abs()) + self.shift)


class HyenaFilter(nn.Module):
    """Implicit long filter k (d, L) = FFN(z_t) * window(t), plus a per-channel bias (d,).

    The FFN is Linear(emb_dim, order), Sin, [Linear(order, order), Sin] x num_inner_mlps,
    Linear(order, d, bias=False); all its Sin layers are ONE module, so their frequency is one
    Parameter that state_dict lists under every Sin index (implicit_filter.1/.3/.5.freq).
    Every FFN parameter trains with weight decay ``wd`` and learning rate ``lr`` (None: the
    optimizer's), as upstream's ``_optim`` settings, which ``genodiff.training.optim`` honours.
    """

    def __init__(
        self,
        d_model: int,
        emb_dim: int = 5,
        order: int = 64,
        seq_len: int = 1026,
        w: float = 10.0,
        lr: float | None = None,
        wd: float = 0.0,
        lr_pos_emb: float = 0.0,
        num_inner_mlps: int = 2,
        modulate: bool = True,
    ):
        super().__init__()
        if emb_dim % 2 == 0 or emb_dim < 3:
            raise InputValueError(f"emb_dim must be odd and >= 3 (time, cos, sin), got {emb_dim}")
        self.bias = nn.Parameter(torch.randn(d_model))
        self.pos_emb = PositionalEmbedding(emb_dim, seq_len, lr_pos_emb)
        act = Sin(order, w)
        layers = [nn.Linear(emb_dim, order), act]
        for _ in range(num_inner_mlps):
            layers += [nn.Linear(order, order), act]
        layers.append(nn.Linear(order, d_model, bias=False))
        self.implicit_filter = nn.Sequential(*layers)
        self.modulation = ExponentialModulation(d_model, modulate=modulate)
        own = {"weight_decay": wd} if lr is None else {"weight_decay": wd, "lr": lr}
        for p in self.implicit_filter.parameters():
            p._optim = own  # the settings genodiff.training.optim gives this parameter
        self.register_load_state_dict_pre_hook(_fill_shared_freq)

    def filter(self, seqlen: int) -> torch.Tensor:
        """The modulated filter (seqlen, d)."""
        z, t = self.pos_emb(seqlen)
        return self.modulation(t, self.implicit_filter(z))[0]


def _fill_shared_freq(module: HyenaFilter, state_dict: dict, prefix: str, *args) -> None:
    """Checkpoints that store the shared Sin frequency once (implicit_filter.1.freq) load too."""
    sin_keys = [
        f"{prefix}implicit_filter.{i}.freq"
        for i, layer in enumerate(module.implicit_filter)
        if isinstance(layer, Sin)
    ]
    stored = next((state_dict[k] for k in sin_keys if k in state_dict), None)
    if stored is not None:
        for key in sin_keys:
            state_dict.setdefault(key, stored)


class HyenaOperator(nn.Module):
    """Order-2 Hyena mixer (B, L, d) -> (B, L, d); causal, for L <= l_max."""

    #: Ranges of the backbone's ``layer`` keys (see ``genodiff.config_values``).
    config_ranges = {
        "l_max": ">=1",
        "filter_order": ">=1",
        "short_filter_order": ">=1",
        "emb_dim": ">=3; odd: time, cos, sin features",
        "lr": ">=0; the filter FFN's learning rate, null: the optimizer's",
        "wd": ">=0; the filter FFN's weight decay",
        "lr_pos_emb": ">=0; 0 keeps the positional features fixed",
    }

    def __init__(
        self,
        d_model: int,
        l_max: int = 1026,
        filter_order: int = 64,
        short_filter_order: int = 3,
        emb_dim: int = 5,
        modulate: bool = True,
        w: float = 10.0,
        lr: float | None = None,
        wd: float = 0.0,
        lr_pos_emb: float = 0.0,
    ):
        super().__init__()
        self.d_model, self.l_max = d_model, l_max
        width = 3 * d_model  # x0, x1, v
        self.in_proj = nn.Linear(d_model, width)
        self.out_proj = nn.Linear(d_model, d_model)
        self.short_filter = nn.Conv1d(
            width, width, short_filter_order, padding=short_filter_order - 1, groups=width
        )
        self.filter_fn = HyenaFilter(
            d_model,
            emb_dim=emb_dim,
            order=filter_order,
            seq_len=l_max,
            w=w,
            lr=lr,
            wd=wd,
            lr_pos_emb=lr_pos_emb,
            modulate=modulate,
        )

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        seqlen = u.shape[1]
        if seqlen > self.l_max:
            raise InputValueError(
                f"sequence length {seqlen} exceeds the filter length l_max={self.l_max}"
            )
        uc = self.in_proj(u).transpose(1, 2)  # (B, 3d, L)
        uc = self.short_filter(uc)[..., :seqlen]  # causal: keep the first L outputs
        x0, x1, v = uc.split(self.d_model, dim=1)  # each (B, d, L)
        k = self.filter_fn.filter(seqlen).transpose(0, 1)  # (d, L)
        v = fftconv(v * x1, k, self.filter_fn.bias)  # (B, d, L)
        return self.out_proj((v * x0).transpose(1, 2))  # (B, L, d)


class Mlp(nn.Module):
    def __init__(self, d_model: int, d_inner: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner)
        self.fc2 = nn.Linear(d_inner, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    """Upstream's fused-friendly prenorm block, which carries (hidden, residual):
    dropout -> add -> norm1 -> Hyena -> dropout -> add -> norm2 -> MLP."""

    def __init__(
        self,
        d_model: int,
        d_inner: int,
        layer: dict,
        dropout1: float,
        dropout2: float,
        eps: float,
        residual_in_fp32: bool,
    ):
        super().__init__()
        self.residual_in_fp32 = residual_in_fp32
        self.dropout1 = nn.Dropout(dropout1)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.mixer = HyenaOperator(d_model, **layer)
        self.dropout2 = nn.Dropout(dropout2)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.mlp = Mlp(d_model, d_inner)

    def _add_norm(
        self, hidden: torch.Tensor, residual: torch.Tensor | None, norm: nn.LayerNorm
    ) -> tuple[torch.Tensor, torch.Tensor]:
        residual = hidden if residual is None else hidden + residual
        hidden = norm(residual.to(norm.weight.dtype))
        return hidden, residual.float() if self.residual_in_fp32 else residual

    def forward(
        self, hidden: torch.Tensor, residual: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden, residual = self._add_norm(self.dropout1(hidden), residual, self.norm1)
        hidden, residual = self._add_norm(self.dropout2(self.mixer(hidden)), residual, self.norm2)
        return self.mlp(hidden), residual


class Embeddings(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, d_model)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(input_ids)


class LMBackbone(nn.Module):
    """Embedding -> n_layer blocks -> dropout, add, ln_f: ids (B, L) -> (B, L, d). The embedding
    dropout is the first block's dropout1."""

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        d_inner: int,
        vocab_size: int,
        layer: dict,
        resid_dropout: float,
        embed_dropout: float,
        layer_norm_epsilon: float,
        residual_in_fp32: bool,
        num_classes: int = 0,
    ):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, d_model)
        self.label_embedding = label_embedding_for(num_classes, d_model)
        self.layers = nn.ModuleList(
            Block(
                d_model,
                d_inner,
                layer,
                dropout1=embed_dropout if i == 0 else resid_dropout,
                dropout2=resid_dropout,
                eps=layer_norm_epsilon,
                residual_in_fp32=residual_in_fp32,
            )
            for i in range(n_layer)
        )
        self.drop_f = nn.Dropout(resid_dropout)
        self.ln_f = nn.LayerNorm(d_model, eps=layer_norm_epsilon)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        hidden = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        hidden = add_label(hidden, self.label_embedding, labels)  # at every position
        residual = None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        residual = self.drop_f(hidden) + residual
        return self.ln_f(residual.to(self.ln_f.weight.dtype))  # (B, L, d)


@torch.no_grad()
def init_hyena_weights(
    model: nn.Module, initializer_range: float = 0.02, rescale_prenorm_residual: bool = True
) -> None:
    """HyenaDNA's ``_init_weights`` (``initializer_cfg``; GPT-2): every Linear (filter FFN
    included) and every embedding of ``model`` N(0, initializer_range), Linear biases zero; the
    out_proj and fc2 weights of each block in ``model.backbone.layers``
    N(0, initializer_range / sqrt(2 n_layer)). Convs, norms, Sin and filter bias keep theirs."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if rescale_prenorm_residual:
        blocks = model.backbone.layers
        std = initializer_range / math.sqrt(2 * len(blocks))
        for block in blocks:
            nn.init.normal_(block.mixer.out_proj.weight, std=std)
            nn.init.normal_(block.mlp.fc2.weight, std=std)


@register_backbone("hyena")
class HyenaDNA(LMBackboneBase):
    """HyenaDNA backbone + tied LM head. Arguments use the upstream config field names.

    ``layer`` is the upstream Hyena layer dict: emb_dim, filter_order, short_filter_order (or
    its config alias local_order), l_max, modulate, w, lr, wd, lr_pos_emb; ``_name_`` is
    accepted and unused. As upstream, the implicit filter's FFN trains with learning rate
    ``lr`` (None: the optimizer's, as upstream's configs' ``lr: ${optimizer.lr}``) and weight
    decay ``wd`` (0: none), and lr_pos_emb != 0 makes the positional features trainable with
    that learning rate and no weight decay; the optimizer puts them in groups of their own
    (``genodiff.training.optim.parameter_groups``), the schedule scaling each group's lr.
    """

    # Checked when a config is loaded (genodiff.config_values); d_model, n_layer, ... on the base.
    config_ranges = {
        "d_inner": ">=1",
        "resid_dropout": "[0, 1)",
        "embed_dropout": "[0, 1)",
        "layer_norm_epsilon": ">0",
    }
    # layer holds the Hyena operator's keyword arguments (and upstream's unused _name_),
    # initializer_cfg those of the weight initialisation.
    config_mappings = {
        "layer": Keywords(
            HyenaOperator, exclude=("d_model",), extra={"_name_": str, "local_order": int}
        ),
        "initializer_cfg": Keywords(
            init_hyena_weights, exclude=("model",), ranges={"initializer_range": ">=0"}
        ),
    }

    def __init__(
        self,
        d_model: int,
        n_layer: int,
        vocab_size: int,
        d_inner: int | None = None,
        layer: dict | None = None,
        resid_dropout: float = 0.0,
        embed_dropout: float = 0.1,
        layer_norm_epsilon: float = 1e-5,
        residual_in_fp32: bool = False,
        pad_vocab_size_multiple: int = 8,
        initializer_cfg: dict | None = None,
        num_classes: int = 0,
    ):
        super().__init__()
        self.d_model, self.n_layer = d_model, n_layer
        self.vocab_size = math.ceil(vocab_size / pad_vocab_size_multiple) * pad_vocab_size_multiple
        layer = dict(layer or {})
        layer.pop("_name_", None)
        if "local_order" in layer:
            layer["short_filter_order"] = layer.pop("local_order")
        self.backbone = LMBackbone(
            d_model,
            n_layer,
            d_inner if d_inner is not None else 4 * d_model,
            self.vocab_size,
            layer,
            resid_dropout,
            embed_dropout,
            layer_norm_epsilon,
            residual_in_fp32,
            num_classes,
        )
        self.capabilities = Capabilities(
            vocab_size=self.vocab_size,
            hidden_size=d_model,
            causal=True,
            class_conditioning=num_classes > 0,
            max_length=self.backbone.layers[0].mixer.l_max,  # every layer's filter is as long
            max_length_key="layer.l_max",
        )
        init_hyena_weights(self, **(initializer_cfg or {}))

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head tied to the embedding: (B, L, d) -> (B, L, vocab_size); causal."""
        return F.linear(hidden, self.backbone.embeddings.word_embeddings.weight)


# ----------------------------------------------------------------------------- checkpoints
# HazyResearch/hyena-dna folders: a "layer" dict with the Hyena settings, keys "backbone.*"
# (original releases: a Lightning weights.ckpt with "model.backbone.*" keys).

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


def _write_hyena_config(model: HyenaDNA, cfg: dict) -> dict:
    fields = {k: cfg[k] for k in HYENA_FIELDS}
    fields["vocab_size"] = model.vocab_size
    fields["d_inner"] = cfg["d_inner"] if cfg["d_inner"] is not None else 4 * model.d_model
    layer = dict(cfg["layer"] or {})
    if "local_order" in layer:
        layer["short_filter_order"] = layer.pop("local_order")
    layer = {**constructor_defaults(HyenaOperator.__init__), **layer}
    if layer["lr"] is None:  # the optimizer's: left out, as upstream's configs hold no null
        del layer["lr"]
    fields["layer"] = {"_name_": "hyena", **layer}
    fields.update(conditioning_fields(cfg))
    return fields


HyenaDNA.checkpoint_layouts = (
    CheckpointLayout(
        name="hyena",
        matches=lambda c: isinstance(c.get("layer"), dict) and "d_inner" in c,
        read_config=lambda c: pick(c, HYENA_FIELDS + CONDITIONING_FIELDS),
        write_config=_write_hyena_config,
        to_genodiff=lambda name: name.removeprefix("hyena."),
    ),
)

"""The pieces of MDLM's text transformers (kuleshov-group/mdlm ``models/dit.py`` and
``models/autoregressive.py``), shared by ``DIT`` and ``ARTransformer``.

Parameter names are upstream's (the core repository's docs/architecture.md §10):
``vocab_embed.embedding``, ``sigma_map.mlp.{0,2}``, ``rotary_emb.inv_freq``,
``blocks.{i}.{norm1,attn_qkv,attn_out,norm2,mlp.0,mlp.2,adaLN_modulation}``,
``output_layer.{norm_final,adaLN_modulation,linear}``. Modules are registered in upstream's
order, so ``parameters()`` yields them in the order of upstream's EMA ``shadow_params``.

Precision: on CUDA the forward runs under bf16 autocast (as upstream trains), and on any other
device under autocast to the weights' dtype when they are bf16 or fp16 (``genodiff sample
--dtype``); the LayerNorms and the rotary rotation are computed in fp32 at least (float64 stays
float64), the DiT's conditioning vector in the weights' dtype (upstream computes it outside its
bf16 region), and the residual stream of fp32 weights stays fp32.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from genodiff.backbones.meta_build import computed_on_cpu
from genodiff.errors import InputValueError

LAYER_NORM_EPS = 1e-5
FREQUENCY_FEATURES = 256  # sinusoidal features of sigma fed to the timestep embedder
MAX_PERIOD = 10_000.0  # of the timestep features
ROTARY_BASE = 10_000.0
MLP_RATIO = 4
KV_CACHE_START = 64  # positions a key/value cache holds before it first grows

Rotary = tuple[Tensor, Tensor]  # cos, sin: (L, head_dim / 2) each


def at_least_fp32(x: Tensor) -> Tensor:
    """``x`` in float32, unless it already is float32 or float64."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def autocast_for(
    device: torch.device, weight_dtype: torch.dtype
) -> contextlib.AbstractContextManager:
    """bf16 autocast for CUDA inputs (upstream trains in bf16). Elsewhere autocast to the
    weights' dtype when they are bf16 or fp16 (a model cast with ``genodiff sample --dtype``):
    the fp32 LayerNorm outputs then meet half-precision linears. Nothing otherwise."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if weight_dtype in (torch.bfloat16, torch.float16):
        return torch.autocast(device.type, dtype=weight_dtype)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- conditioning


def timestep_features(sigma: Tensor, dim: int = FREQUENCY_FEATURES) -> Tensor:
    """(B,) -> (B, dim): cat(cos(sigma f), sin(sigma f)), f_i = exp(-ln(10000) i / (dim/2))."""
    half = dim // 2
    sigma = at_least_fp32(sigma)
    i = torch.arange(half, dtype=sigma.dtype, device=sigma.device)
    freqs = torch.exp(-math.log(MAX_PERIOD) * i / half)  # (half,)
    args = sigma[:, None] * freqs  # (B, half)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)  # (B, dim)


class TimestepEmbedder(nn.Module):
    """sigma (B,) -> (B, cond_dim): Linear(256, cond) -> SiLU -> Linear(cond, cond) of the
    sinusoidal features. (The model applies one more SiLU to get its conditioning vector.)"""

    def __init__(self, cond_dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(FREQUENCY_FEATURES, cond_dim),
            nn.SiLU(),
            nn.Linear(cond_dim, cond_dim),
        )

    def forward(self, sigma: Tensor) -> Tensor:
        weight = self.mlp[0].weight
        precise = torch.promote_types(at_least_fp32(sigma).dtype, weight.dtype)
        features = timestep_features(sigma.to(precise))  # (B, 256)
        return self.mlp(features.to(weight.dtype))  # (B, cond)


# ----------------------------------------------------------------------------- positions


class RotaryEmbedding(nn.Module):
    """Rotation angles position * inv_freq, inv_freq_i = 1 / 10000^(2i / head_dim)."""

    inv_freq: Tensor

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        # Evaluated in float64 and stored rounded to float32 (upstream's buffer is float32).
        inv_freq = computed_on_cpu(self.inverse_frequencies, head_dim)
        self.register_buffer("inv_freq", inv_freq)  # (hd / 2,)

    @staticmethod
    def inverse_frequencies(head_dim: int) -> Tensor:
        exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        return (1.0 / ROTARY_BASE**exponent).float()  # (hd / 2,)

    def forward(self, length: int, offset: int = 0) -> Rotary:
        """cos and sin for positions offset .. offset + length - 1: (length, head_dim / 2) each,
        in the buffer's dtype (fp32, or float64 for a float64 model)."""
        inv_freq = self.inv_freq
        positions = torch.arange(offset, offset + length, device=inv_freq.device)
        angles = positions.to(inv_freq.dtype)[:, None] * inv_freq  # (L, head_dim / 2)
        return angles.cos(), angles.sin()


def apply_rotary(x: Tensor, rotary: Rotary) -> Tensor:
    """Rotate queries or keys (B, H, L, head_dim) by their positions, half-split convention:
    x1, x2 = the first and second halves, -> (x1 cos - x2 sin, x1 sin + x2 cos). Computed in fp32
    at least, returned in ``x``'s dtype."""
    cos, sin = rotary  # (L, head_dim / 2) each
    x1, x2 = at_least_fp32(x).chunk(2, dim=-1)  # (B, H, L, head_dim / 2) each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


# ----------------------------------------------------------------------------- layers


class TokenEmbedding(nn.Module):
    """ids (B, L) -> (B, L, D): rows of a bare (vocab, D) parameter ``embedding``."""

    def __init__(self, dim: int, vocab_size: int) -> None:
        super().__init__()
        self.embedding = nn.Parameter(torch.empty(vocab_size, dim))
        nn.init.kaiming_uniform_(self.embedding, a=math.sqrt(5))

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.embedding[input_ids]


class LayerNorm(nn.Module):
    """LayerNorm with a weight and no bias, eps 1e-5, computed in fp32 even under autocast."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        with torch.autocast(x.device.type, enabled=False):
            normed = F.layer_norm(at_least_fp32(x), x.shape[-1:], eps=LAYER_NORM_EPS)
        return normed * self.weight  # (..., D), fp32 at least


def modulate(x: Tensor, shift: Tensor | None, scale: Tensor | None) -> Tensor:
    """adaLN: x (1 + scale) + shift, with shift and scale (B, 1, D); ``x`` itself without."""
    return x if shift is None else x * (1 + scale) + shift


def gated(branch: Tensor, gate: Tensor | None) -> Tensor:
    """adaLN's gate (B, 1, D) times a residual branch; the branch itself without."""
    return branch if gate is None else gate * branch


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> Tensor:
    """softmax(q k^T / sqrt(head_dim)) v: queries (B, H, Lq, hd) over keys and values
    (B, H, Lk, hd) -> (B, H, Lq, hd). ``causal``: query i sees keys <= i (needs Lq == Lk).

    Every attention call of the models goes through this function (looked up at call time),
    so a benchmark can swap in another implementation.
    """
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


class KVCache:
    """One block's keys and values for the positions fed so far, (n, H, length, hd) each.

    Storage is allocated on the first ``append`` (in the dtype the keys come in, bf16 under
    autocast) and doubles when full, so growing to L positions copies O(L) entries in all.
    """

    def __init__(self, batch_size: int, capacity: int = KV_CACHE_START) -> None:
        self.batch_size = batch_size
        self.capacity = capacity
        self.length = 0
        self.keys: Tensor | None = None  # (n, H, capacity, hd)
        self.values: Tensor | None = None

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v (n, H, t, hd); -> all keys and values so far, (n, H, length + t, hd)."""
        if k.shape[0] != self.batch_size:
            raise ValueError(f"cache holds {self.batch_size} sequences, got {k.shape[0]}")
        end = self.length + k.shape[2]
        if self.keys is None or end > self.keys.shape[2]:
            self._grow(k, max(end, 2 * self.length, self.capacity))
        self.keys[:, :, self.length : end] = k
        self.values[:, :, self.length : end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def _grow(self, like: Tensor, capacity: int) -> None:
        n, heads, _, head_dim = like.shape
        keys, values = (like.new_empty(n, heads, capacity, head_dim) for _ in range(2))
        if self.keys is not None:
            keys[:, :, : self.length] = self.keys[:, :, : self.length]
            values[:, :, : self.length] = self.values[:, :, : self.length]
        self.keys, self.values = keys, values


class TransformerBlock(nn.Module):
    """Pre-norm transformer block, with adaLN (DiT: ``cond_dim`` given) or without (AR):

        x = x + gate_msa * dropout(attn_out(attention(modulate(norm1(x), shift_msa, scale_msa))))
        x = x + gate_mlp * dropout(mlp(modulate(norm2(x), shift_mlp, scale_mlp)))

    ``adaLN_modulation`` (zero-initialised, adaLN-zero) maps the conditioning vector c to
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp in that order. Attention is
    bidirectional, or causal with ``causal=True``; rotary positions on q and k.
    """

    def __init__(
        self, dim: int, n_heads: int, cond_dim: int | None, dropout: float, causal: bool
    ) -> None:
        super().__init__()
        if dim % n_heads:
            raise InputValueError(f"hidden_dim={dim} is not a multiple of n_heads={n_heads}")
        if (dim // n_heads) % 2:
            raise InputValueError(
                f"hidden_dim / n_heads = {dim // n_heads} is odd: the rotary embedding rotates "
                "pairs of each head's dimensions; pick hidden_dim and n_heads with an even ratio"
            )
        self.n_heads = n_heads
        self.causal = causal
        # Registered in upstream's order (its parameters() order).
        self.norm1 = LayerNorm(dim)
        self.attn_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.attn_out = nn.Linear(dim, dim, bias=False)
        self.norm2 = LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, MLP_RATIO * dim),
            nn.GELU(approximate="tanh"),
            nn.Linear(MLP_RATIO * dim, dim),
        )
        self.branch_dropout = nn.Dropout(dropout)
        self.adaLN_modulation = None
        if cond_dim is not None:
            self.adaLN_modulation = nn.Linear(cond_dim, 6 * dim)
            nn.init.zeros_(self.adaLN_modulation.weight)
            nn.init.zeros_(self.adaLN_modulation.bias)

    def forward(
        self, x: Tensor, rotary: Rotary, c: Tensor | None = None, kv_cache: KVCache | None = None
    ) -> Tensor:
        """x (B, L, D), c (B, cond) -> (B, L, D). With ``kv_cache`` (causal decoding) the L
        new positions follow the cached ones, and only L = 1 is supported."""
        if self.adaLN_modulation is None:
            shift_msa = scale_msa = gate_msa = shift_mlp = scale_mlp = gate_mlp = None
        else:
            modulation = self.adaLN_modulation(c)[:, None]  # (B, 1, 6D)
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = modulation.chunk(
                6, dim=-1
            )  # (B, 1, D) each
        h = self.self_attention(modulate(self.norm1(x), shift_msa, scale_msa), rotary, kv_cache)
        x = x + gated(self.branch_dropout(h), gate_msa)
        h = self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        return x + gated(self.branch_dropout(h), gate_mlp)

    def self_attention(self, x: Tensor, rotary: Rotary, kv_cache: KVCache | None) -> Tensor:
        """(B, L, D) normed input -> (B, L, D) attention output, after ``attn_out``."""
        B, L, D = x.shape
        qkv = self.attn_qkv(x).view(B, L, 3, self.n_heads, D // self.n_heads)  # (B, L, 3, H, hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, hd) each
        q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        causal = self.causal
        if kv_cache is not None:
            if L != 1:
                raise ValueError(f"decoding with a key/value cache takes one token, got {L}")
            k, v = kv_cache.append(k, v)  # (B, H, cached + 1, hd): the query sees them all
            causal = False
        out = attention(q, k, v, causal)  # (B, H, L, hd)
        return self.attn_out(out.transpose(1, 2).reshape(B, L, D))


class FinalLayer(nn.Module):
    """norm_final (+ adaLN shift, scale when ``cond_dim`` is given), then ``linear`` to the
    vocabulary: ``Transformer.final_hidden`` ends with ``normed``, the models apply ``linear``.
    ``linear`` and ``adaLN_modulation`` are zero-initialised, as upstream."""

    def __init__(self, dim: int, vocab_size: int, cond_dim: int | None) -> None:
        super().__init__()
        self.norm_final = LayerNorm(dim)
        self.linear = nn.Linear(dim, vocab_size)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        self.adaLN_modulation = None
        if cond_dim is not None:
            self.adaLN_modulation = nn.Linear(cond_dim, 2 * dim)
            nn.init.zeros_(self.adaLN_modulation.weight)
            nn.init.zeros_(self.adaLN_modulation.bias)

    def normed(self, x: Tensor, c: Tensor | None = None) -> Tensor:
        """(B, L, D) -> the (modulated) normed hidden states the linear reads, (B, L, D)."""
        if self.adaLN_modulation is None:
            return self.norm_final(x)
        shift, scale = self.adaLN_modulation(c)[:, None].chunk(2, dim=-1)  # (B, 1, D) each
        return modulate(self.norm_final(x), shift, scale)


# ----------------------------------------------------------------------------- trunk


class Transformer(nn.Module):
    """The body both text models share: token embedding, (timestep embedder when
    ``cond_dim`` is given), rotary embedding, ``n_blocks`` blocks, final layer."""

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int,
        n_blocks: int,
        n_heads: int,
        dropout: float,
        cond_dim: int | None,
        causal: bool,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.hidden_dim = hidden_dim
        # Registered in upstream's order (its parameters() order).
        self.vocab_embed = TokenEmbedding(hidden_dim, vocab_size)
        if cond_dim is not None:
            self.sigma_map = TimestepEmbedder(cond_dim)
        self.rotary_emb = RotaryEmbedding(hidden_dim // n_heads)
        self.blocks = nn.ModuleList(
            TransformerBlock(hidden_dim, n_heads, cond_dim, dropout, causal)
            for _ in range(n_blocks)
        )
        self.output_layer = FinalLayer(hidden_dim, vocab_size, cond_dim)

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """``autocast_for`` inputs on ``device`` and this model's weights."""
        return autocast_for(device, self.vocab_embed.embedding.dtype)

    def final_hidden(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None = None,
        c: Tensor | None = None,
        kv_caches: list[KVCache] | None = None,
    ) -> Tensor:
        """ids (B, L) or embeddings (B, L, D) -> the final normed hidden states (B, L, D).
        With ``kv_caches`` (one per block) the tokens follow the cached positions."""
        x = self.vocab_embed(input_ids) if inputs_embeds is None else inputs_embeds  # (B, L, D)
        offset = 0 if kv_caches is None else kv_caches[0].length
        rotary = self.rotary_emb(x.shape[1], offset)
        for i, block in enumerate(self.blocks):
            x = block(x, rotary, c, None if kv_caches is None else kv_caches[i])
        return self.output_layer.normed(x, c)


def input_device(input_ids: Tensor | None, inputs_embeds: Tensor | None) -> torch.device:
    return (input_ids if inputs_embeds is None else inputs_embeds).device

"""MDLM's DiT (genodiff_text DIT) against an independent float64 computation written here.

The reference below follows docs/architecture.md §10 (genodiff repository) line by line:
sinusoidal timestep features, the weight-only LayerNorm, adaLN modulation, per-head attention
with a Python loop over heads and the half-split rotary rotation written out per position,
GELU(tanh). ``test_text_ar.py`` reuses it.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from genodiff_text.models.ar import ARTransformer
from genodiff_text.models.dit import DIT

from genodiff.backbones.capabilities import Capabilities, capabilities_of
from genodiff.config import ConfigError
from genodiff.errors import InputValueError
from genodiff.model import check_time_conditioning
from genodiff.objectives import MDLM

F64 = torch.float64
VOCAB, HIDDEN, COND, BLOCKS, HEADS = 11, 32, 16, 2, 2
TOL = {"rtol": 1e-10, "atol": 1e-10}


# ----------------------------------------------------------------------------- reference


def layer_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased, as LayerNorm
    return (x - mean) / torch.sqrt(var + 1e-5) * weight


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + torch.exp(-x))


def softmax(scores: torch.Tensor) -> torch.Tensor:
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def linear(W: dict, name: str, x: torch.Tensor, bias: bool = True) -> torch.Tensor:
    y = x @ W[f"{name}.weight"].T
    return y + W[f"{name}.bias"] if bias else y


def sinusoidal(sigma: torch.Tensor) -> torch.Tensor:
    """(B,) -> (B, 256): cat(cos(sigma f), sin(sigma f)), f_i = exp(-ln(10000) i / 128)."""
    f = torch.tensor([math.exp(-math.log(10000) * i / 128) for i in range(128)], dtype=F64)
    return torch.cat([torch.cos(sigma[:, None] * f), torch.sin(sigma[:, None] * f)], dim=-1)


def rotary_inv_freq(head_dim: int) -> torch.Tensor:
    """1 / 10000^(2i / head_dim), rounded to float32: the buffer is stored in float32, as
    upstream's."""
    exact = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim)
    return exact.float().double()


def rotate(vec: torch.Tensor, position: int, inv_freq: torch.Tensor) -> torch.Tensor:
    """One head's query or key (hd,) at ``position``, half-split: first half x1, second x2."""
    half = vec.shape[0] // 2
    x1, x2 = vec[:half], vec[half:]
    angle = position * inv_freq
    return torch.cat([x1 * torch.cos(angle) - x2 * torch.sin(angle),
                      x1 * torch.sin(angle) + x2 * torch.cos(angle)])  # fmt: skip


def reference_attention(
    W: dict, prefix: str, h: torch.Tensor, n_heads: int, causal: bool
) -> torch.Tensor:
    """attn_out(multi-head attention) of the normed input h (B, L, D), head by head."""
    B, L, D = h.shape
    hd = D // n_heads
    inv_freq = rotary_inv_freq(hd)
    qkv = h @ W[f"{prefix}attn_qkv.weight"].T  # (B, L, 3D) as (three, heads, head_dim)
    out = torch.zeros(B, L, D, dtype=F64)
    for head in range(n_heads):
        cols = slice(head * hd, (head + 1) * hd)
        q, k, v = (qkv[..., j * D : (j + 1) * D][..., cols] for j in range(3))  # (B, L, hd)
        q = torch.stack([torch.stack([rotate(q[b, p], p, inv_freq) for p in range(L)])
                         for b in range(B)])  # fmt: skip
        k = torch.stack([torch.stack([rotate(k[b, p], p, inv_freq) for p in range(L)])
                         for b in range(B)])  # fmt: skip
        scores = q @ k.transpose(1, 2) / math.sqrt(hd)  # (B, L, L)
        if causal:
            later = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(later, -math.inf)
        out[..., cols] = softmax(scores) @ v
    return out @ W[f"{prefix}attn_out.weight"].T


def reference_conditioning(
    W: dict, sigma: torch.Tensor, labels: torch.Tensor | None = None
) -> torch.Tensor:
    """c = SiLU(mlp(features(sigma))) [+ SiLU(label embedding row)]: (B, cond), float64."""
    t = linear(W, "sigma_map.mlp.2", silu(linear(W, "sigma_map.mlp.0", sinusoidal(sigma))))
    c = silu(t)  # (B, cond)
    if labels is not None:
        c = c + silu(W["label_embedding.embedding.weight"][labels])
    return c


def reference_logits(
    model: torch.nn.Module,
    ids: torch.Tensor,
    n_heads: int,
    sigma: torch.Tensor | None = None,
    causal: bool = False,
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits (B, L, V) in float64 from the model's weights. With ``sigma`` (B,): the DiT
    (adaLN conditioning on c = SiLU(mlp(features(sigma)))); without: no adaLN at all (AR).
    With ``labels`` (B,) too: c += SiLU(label embedding row), as Schiff et al.'s DiT."""
    W = {k: v.detach().double() for k, v in model.state_dict().items()}
    D = W["vocab_embed.embedding"].shape[1]
    x = W["vocab_embed.embedding"][ids]  # (B, L, D)
    c = None if sigma is None else reference_conditioning(W, sigma, labels)  # (B, cond)
    n_blocks = len({k.split(".")[1] for k in W if k.startswith("blocks.")})
    for i in range(n_blocks):
        p = f"blocks.{i}."
        if c is None:
            zero, one = torch.zeros(D, dtype=F64), torch.ones(D, dtype=F64)
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
                zero, zero, one, zero, zero, one
            )  # fmt: skip
        else:
            m = linear(W, f"{p}adaLN_modulation", c)[:, None, :]  # (B, 1, 6D)
            shift_msa, scale_msa, gate_msa = m[..., :D], m[..., D : 2 * D], m[..., 2 * D : 3 * D]
            shift_mlp, scale_mlp = m[..., 3 * D : 4 * D], m[..., 4 * D : 5 * D]
            gate_mlp = m[..., 5 * D :]
        h = layer_norm(x, W[f"{p}norm1.weight"]) * (1 + scale_msa) + shift_msa
        x = x + gate_msa * reference_attention(W, p, h, n_heads, causal)
        h = layer_norm(x, W[f"{p}norm2.weight"]) * (1 + scale_mlp) + shift_mlp
        x = x + gate_mlp * linear(W, f"{p}mlp.2", gelu_tanh(linear(W, f"{p}mlp.0", h)))
    h = layer_norm(x, W["output_layer.norm_final.weight"])
    if c is not None:
        m = linear(W, "output_layer.adaLN_modulation", c)[:, None, :]  # (B, 1, 2D)
        h = h * (1 + m[..., D:]) + m[..., :D]  # shift first, then scale
    return linear(W, "output_layer.linear", h)


def randomise(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Non-zero random weights everywhere (upstream zero-initialises every adaLN and the output
    linear, which would make any comparison trivial); norm weights around 1."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=F64).to(p.dtype)
            p.copy_(1 + 0.2 * noise if "norm" in name else 0.3 * noise)
    return model


# ----------------------------------------------------------------------------- tests


def tiny_dit(**kwargs) -> DIT:
    torch.manual_seed(0)
    model = DIT(
        vocab_size=VOCAB, hidden_dim=HIDDEN, cond_dim=COND, n_blocks=BLOCKS, n_heads=HEADS, **kwargs
    )
    return randomise(model.double()).eval()


IDS = torch.tensor([[1, 5, 3, 10, 0, 7, 2], [4, 4, 9, 1, 6, 8, 10]])
SIGMA = torch.tensor([0.37, 2.5], dtype=F64)


def test_a_class_conditional_dit_adds_the_label_to_the_adaln_conditioning():
    model = tiny_dit(num_classes=3)
    assert model.capabilities.class_conditioning and not tiny_dit().capabilities.class_conditioning
    labels = torch.tensor([0, 3])  # a class and the null label
    logits = model(IDS, SIGMA, labels=labels)
    reference = reference_logits(model, IDS, HEADS, SIGMA, labels=labels)
    torch.testing.assert_close(logits, reference, **TOL)
    torch.testing.assert_close(model(IDS, SIGMA), model(IDS, SIGMA, labels=torch.tensor([3, 3])))
    assert (logits - model(IDS, SIGMA, labels=torch.tensor([2, 1]))).abs().max() > 1e-3


def test_logits_match_the_float64_reference_with_sigma():
    model = tiny_dit()
    logits = model(IDS, SIGMA)
    assert logits.shape == (2, 7, VOCAB) and logits.dtype == F64
    torch.testing.assert_close(logits, reference_logits(model, IDS, HEADS, SIGMA), **TOL)
    # sigma matters: the comparison above is not one a sigma-blind model passes
    assert (logits - model(IDS, torch.zeros(2, dtype=F64))).abs().max() > 1e-3


def test_sigma_none_conditions_on_sigma_zero():
    model = tiny_dit()
    zero = torch.zeros(2, dtype=F64)
    torch.testing.assert_close(model(IDS), reference_logits(model, IDS, HEADS, zero), **TOL)
    torch.testing.assert_close(model(IDS), model(IDS, zero), rtol=0, atol=0)


def test_not_time_conditioned_ignores_sigma_and_says_so():
    model = tiny_dit(time_conditioning=False)
    zero = torch.zeros(2, dtype=F64)
    torch.testing.assert_close(model(IDS, SIGMA), reference_logits(model, IDS, HEADS, zero), **TOL)
    assert not capabilities_of(model).time_conditioning
    with pytest.raises(ConfigError, match="not time-conditioned"):
        check_time_conditioning(SimpleNamespace(time_conditioning=True), model)


def test_inputs_embeds_and_hidden_states():
    model = tiny_dit()
    embeds = model.vocab_embed.embedding[IDS]  # (B, L, D)
    torch.testing.assert_close(model(None, SIGMA, inputs_embeds=embeds), model(IDS, SIGMA))
    hidden = model.hidden_states(IDS)
    assert hidden.shape == (2, 7, HIDDEN)
    torch.testing.assert_close(model.output_layer.linear(hidden), model(IDS), **TOL)
    torch.testing.assert_close(model.hidden_states(None, inputs_embeds=embeds), hidden)


def test_parameter_names_are_upstreams():
    model = DIT(vocab_size=VOCAB, hidden_dim=HIDDEN, cond_dim=COND, n_blocks=1, n_heads=HEADS)
    expected = {
        "vocab_embed.embedding",
        "sigma_map.mlp.0.weight", "sigma_map.mlp.0.bias",
        "sigma_map.mlp.2.weight", "sigma_map.mlp.2.bias",
        "rotary_emb.inv_freq",
        "blocks.0.norm1.weight", "blocks.0.norm2.weight",
        "blocks.0.attn_qkv.weight", "blocks.0.attn_out.weight",
        "blocks.0.mlp.0.weight", "blocks.0.mlp.0.bias",
        "blocks.0.mlp.2.weight", "blocks.0.mlp.2.bias",
        "blocks.0.adaLN_modulation.weight", "blocks.0.adaLN_modulation.bias",
        "output_layer.norm_final.weight",
        "output_layer.adaLN_modulation.weight", "output_layer.adaLN_modulation.bias",
        "output_layer.linear.weight", "output_layer.linear.bias",
    }  # fmt: skip
    state = model.state_dict()
    assert set(state) == expected
    assert state["vocab_embed.embedding"].shape == (VOCAB, HIDDEN)
    assert state["blocks.0.attn_qkv.weight"].shape == (3 * HIDDEN, HIDDEN)
    assert state["blocks.0.adaLN_modulation.weight"].shape == (6 * HIDDEN, COND)
    assert state["sigma_map.mlp.0.weight"].shape == (COND, 256)
    assert state["output_layer.adaLN_modulation.weight"].shape == (2 * HIDDEN, COND)
    inv_freq = 1.0 / 10000 ** (torch.arange(0, HIDDEN // HEADS, 2, dtype=F64) / (HIDDEN // HEADS))
    torch.testing.assert_close(state["rotary_emb.inv_freq"], inv_freq.float(), rtol=0, atol=0)


def test_upstream_init_is_adaln_zero():
    torch.manual_seed(0)
    model = DIT(vocab_size=VOCAB, hidden_dim=HIDDEN, cond_dim=COND, n_blocks=BLOCKS, n_heads=HEADS)
    for name, p in model.named_parameters():
        if "adaLN_modulation" in name or name.startswith("output_layer.linear"):
            assert not p.any(), name
        elif "norm" in name:
            assert torch.equal(p, torch.ones_like(p)), name
    assert model.vocab_embed.embedding.std() > 0
    assert not model(IDS, SIGMA.float()).any()  # zero output layer: all-zero logits


@pytest.mark.parametrize(
    ("vocab", "width", "blocks", "heads", "expected"),
    [
        (30_522, 768, 12, 12, 139_292_986),
        (50_258, 768, 12, 12, 169_627_218),
        (30_522, 1024, 24, 16, 384_037_946),
        (50_258, 1024, 24, 16, 424_477_010),
    ],
)
def test_parameter_counts_of_the_paper_sizes(vocab, width, blocks, heads, expected):
    with torch.device("meta"):
        model = DIT(vocab_size=vocab, hidden_dim=width, n_blocks=blocks, n_heads=heads)
    assert sum(p.numel() for p in model.parameters()) == expected


@pytest.mark.parametrize("model_class", [DIT, ARTransformer])
def test_an_odd_head_dimension_is_refused_when_the_model_is_built(model_class):
    """The rotary embedding rotates pairs of a head's dimensions (mdlm ``models/dit.py``
    ``Rotary``: inv_freq over arange(0, head_dim, 2)); an odd head_dim (30 / 2 = 15) was a
    shape-mismatch RuntimeError at the first forward."""
    with pytest.raises(InputValueError, match=r"hidden_dim / n_heads = 15 is odd"):
        model_class(vocab_size=VOCAB, hidden_dim=30, n_blocks=1, n_heads=2)


def test_capabilities_and_the_time_conditioning_check():
    model = tiny_dit()
    assert model.capabilities == Capabilities(
        vocab_size=VOCAB, hidden_size=HIDDEN, time_conditioning=True
    )
    objective = MDLM(mask_id=10, pad_id=0, time_conditioning=True)
    check_time_conditioning(objective, model)  # accepted: no error


def test_mdlm_loss_with_time_conditioning_trains_the_timestep_embedder():
    model = randomise(DIT(vocab_size=VOCAB, hidden_dim=HIDDEN, cond_dim=COND, n_blocks=1,
                          n_heads=HEADS, dropout=0.0))  # fmt: skip
    objective = MDLM(mask_id=10, pad_id=0, time_conditioning=True)
    nelbo, tokens = objective.loss(model, IDS.clamp_max(9), torch.Generator().manual_seed(0))
    assert torch.isfinite(nelbo).all() and tokens.tolist() == [6, 7]
    nelbo.sum().backward()
    assert model.sigma_map.mlp[0].weight.grad.abs().sum() > 0


def test_dropout_acts_in_training_only():
    model = tiny_dit(dropout=0.5)
    assert torch.equal(model(IDS, SIGMA), model(IDS, SIGMA))  # eval: deterministic
    model.train()
    torch.manual_seed(0)
    first = model(IDS, SIGMA)
    assert not torch.allclose(first, model(IDS, SIGMA))


@pytest.mark.parametrize("num_classes", [0, 3])
def test_the_conditioning_vector_stays_float32_under_bf16_autocast(num_classes):
    """Upstream computes c = SiLU(sigma_map(sigma)) outside its bf16 autocast region (mdlm
    ``models/dit.py`` ``DIT.forward``; ``diffusion.py`` runs the backbone under fp32 autocast):
    only the blocks and the final layer run in bf16. CPU bf16 autocast stands in for the CUDA
    one the model enters on a GPU (was: c in bf16, the sinusoidal features rounded to 8 bits,
    so nearby noise levels got the same conditioning)."""
    model = tiny_dit(num_classes=num_classes).float()
    sigma = torch.tensor([1e-3, 0.37, 2.5, 9.2])
    labels = torch.tensor([0, 1, 2, 3]) if num_classes else None
    W = {k: v.detach().double() for k, v in model.state_dict().items()}
    expected = reference_conditioning(W, sigma.double(), labels)  # (4, cond)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = model.conditioning(sigma, 4, sigma.device, labels)
    assert c.dtype == torch.float32
    torch.testing.assert_close(c.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_runs_in_bf16_autocast_and_returns_float32():
    model = tiny_dit().float()
    expected = model(IDS, SIGMA.float())
    cuda = model.cuda()
    logits = cuda(IDS.cuda(), SIGMA.float().cuda())
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits.cpu(), expected, rtol=0.05, atol=0.1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_model_cast_to_half_precision_runs_on_cpu(dtype):
    """``genodiff sample --dtype bfloat16`` casts the weights: the fp32 LayerNorm outputs must
    still reach the half-precision linears (was: a dtype-mismatch RuntimeError on CPU)."""
    model, sigma = tiny_dit().to(dtype), SIGMA.to(dtype)
    expected = reference_logits(model, IDS, HEADS, sigma=sigma.double())  # the rounded weights
    logits = model(IDS, sigma)
    assert logits.dtype == torch.float32
    # bf16 keeps 8 significant bits: within 5% of the largest logit (|logit| up to 16 here)
    scale = expected.abs().max().item()
    torch.testing.assert_close(logits.double(), expected, rtol=0, atol=0.05 * scale)

"""MDLM's AR baseline (genodiff_text ARTransformer): the float64 reference of test_text_dit.py
with causal attention and no adaLN, causality, the key/value cache, the AR objective's sampler."""

from __future__ import annotations

import pytest
import torch
from genodiff_text.models.ar import ARTransformer
from test_text_dit import randomise, reference_logits

from genodiff.backbones.capabilities import Capabilities
from genodiff.objectives import AR
from genodiff.objectives.ar import check_causal
from genodiff.samplers.request import SampleRequest

F64 = torch.float64
VOCAB, HIDDEN, BLOCKS, HEADS, MASK = 11, 32, 2, 2, 10
TOL = {"rtol": 1e-10, "atol": 1e-10}
IDS = torch.tensor([[1, 5, 3, 10, 0, 7, 2, 9], [4, 4, 9, 1, 6, 8, 10, 3]])


def tiny_ar(mask_index: int | None = MASK, **kwargs) -> ARTransformer:
    torch.manual_seed(0)
    model = ARTransformer(
        vocab_size=VOCAB,
        hidden_dim=HIDDEN,
        n_blocks=BLOCKS,
        n_heads=HEADS,
        mask_index=mask_index,
        **kwargs,
    )
    return randomise(model.double()).eval()


def reference_log_probs(model, ids, mask_index):
    logits = reference_logits(model, ids, HEADS, sigma=None, causal=True)  # (B, L, V)
    if mask_index is not None:
        logits[..., mask_index] = -1000.0
    top = logits.max(-1, keepdim=True).values
    return logits - top - torch.log(torch.exp(logits - top).sum(-1, keepdim=True))


@pytest.mark.parametrize("mask_index", [MASK, None])
def test_log_probs_match_the_float64_reference(mask_index):
    model = tiny_ar(mask_index)
    out = model(IDS)
    assert out.shape == (2, 8, VOCAB) and out.dtype == F64
    torch.testing.assert_close(out, reference_log_probs(model, IDS, mask_index), **TOL)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2, 8, dtype=F64))
    if mask_index is None:
        assert out[..., MASK].max() > -30  # no column forced
    else:
        assert out[..., MASK].max() < -900


def test_no_adaln_and_upstream_names():
    model = ARTransformer(vocab_size=VOCAB, hidden_dim=HIDDEN, n_blocks=1, n_heads=HEADS)
    expected = {
        "vocab_embed.embedding", "rotary_emb.inv_freq",
        "blocks.0.norm1.weight", "blocks.0.norm2.weight",
        "blocks.0.attn_qkv.weight", "blocks.0.attn_out.weight",
        "blocks.0.mlp.0.weight", "blocks.0.mlp.0.bias",
        "blocks.0.mlp.2.weight", "blocks.0.mlp.2.bias",
        "output_layer.norm_final.weight",
        "output_layer.linear.weight", "output_layer.linear.bias",
    }  # fmt: skip
    assert set(model.state_dict()) == expected


def test_causal_a_token_changes_no_earlier_position():
    model = tiny_ar()
    base = model(IDS)
    for j in range(IDS.shape[1]):
        changed = IDS.clone()
        changed[:, j] = (changed[:, j] + 3) % VOCAB
        out = model(changed)
        assert torch.equal(out[:, :j], base[:, :j]), j
        assert (out[:, j:] - base[:, j:]).abs().amax(-1).min() > 1e-6, j  # and later ones move
    check_causal(model, bos_id=1, token_ids=[2, 3, 4, 5])  # the AR objective's own probe


def test_kv_cache_steps_equal_the_full_forward_at_every_position():
    model = tiny_ar()
    full = model(IDS)  # (2, 8, V)
    cache = model.allocate_inference_cache(2, max_length=3)  # grows twice on the way
    steps = torch.stack([model.step(IDS[:, i], cache) for i in range(IDS.shape[1])], dim=1)
    torch.testing.assert_close(steps, full, **TOL)
    assert cache[0].length == IDS.shape[1] and cache[0].keys.shape[2] >= IDS.shape[1]
    # ids given as (n, 1) work the same
    cache = model.allocate_inference_cache(2)
    torch.testing.assert_close(model.step(IDS[:, :1], cache), full[:, 0], **TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_model_cast_to_half_precision_runs_and_steps_on_cpu(dtype):
    """``genodiff sample --dtype`` on an AR checkpoint: the full forward and the cached steps
    (was: a dtype-mismatch RuntimeError on CPU)."""
    half = tiny_ar().to(dtype)
    expected = reference_log_probs(half, IDS, MASK)  # of the rounded weights
    cache = half.allocate_inference_cache(2)
    steps = torch.stack([half.step(IDS[:, i], cache) for i in range(IDS.shape[1])], dim=1)
    for log_probs in (half(IDS), steps):
        assert log_probs.dtype == torch.float32
        # the mask column (-1000 before the log-softmax) aside: within 5% of the largest value
        kept = expected[..., :MASK]
        scale = kept.abs().max().item()
        torch.testing.assert_close(log_probs[..., :MASK].double(), kept, rtol=0, atol=0.05 * scale)


def test_capabilities_and_parameter_count():
    assert tiny_ar().capabilities == Capabilities(
        vocab_size=VOCAB, hidden_size=HIDDEN, causal=True, recurrent_step=True
    )
    with torch.device("meta"):
        small = ARTransformer(vocab_size=30_522)
    assert sum(p.numel() for p in small.parameters()) == 131_912_250


def test_hidden_states_feed_the_output_layer():
    model = tiny_ar()
    hidden = model.hidden_states(IDS)
    assert hidden.shape == (2, 8, HIDDEN)
    torch.testing.assert_close(model.log_probs(model.output_layer.linear(hidden)), model(IDS))


class FullPrefixOnly(torch.nn.Module):
    """The same model, declaring no recurrent step: the AR sampler recomputes the prefix."""

    def __init__(self, model: ARTransformer) -> None:
        super().__init__()
        self.model = model
        self.capabilities = Capabilities(vocab_size=VOCAB, hidden_size=HIDDEN, causal=True)

    def forward(self, input_ids, sigma=None):
        return self.model(input_ids)


def test_ar_objective_samples_with_the_cache_in_linear_time():
    model = tiny_ar()
    objective = AR(bos_id=1, pad_id=0, sample_ids=[2, 3, 4, 5, 6, 7])
    request = SampleRequest(num_samples=3, length=12, temperature=1.5)
    fed = []  # positions each call of the first block processes
    hook = model.blocks[0].register_forward_hook(lambda m, args, out: fed.append(args[0].shape[1]))
    cached = objective.sample(model, request, torch.Generator().manual_seed(7))
    assert sum(fed) == request.length  # BOS + 11 tokens, one position each: O(L)
    fed.clear()
    recomputed = objective.sample(FullPrefixOnly(model), request, torch.Generator().manual_seed(7))
    assert sum(fed) == request.length * (request.length + 1) // 2  # O(L^2) without the cache
    hook.remove()
    assert cached.shape == (3, 12) and set(cached.unique().tolist()) <= {2, 3, 4, 5, 6, 7}
    assert torch.equal(cached, recomputed)


@torch.no_grad()
def test_ar_objective_loss_is_the_sum_of_step_log_probs():
    model = tiny_ar()
    objective = AR(bos_id=1, pad_id=0, sample_ids=[2, 3, 4, 5])
    x = IDS[:, 1:].clamp(2, 9)
    nelbo, tokens = objective.loss(model, x)
    cache = model.allocate_inference_cache(2)
    log_p = model.step(torch.tensor([1, 1]), cache)
    total = torch.zeros(2, dtype=F64)
    for i in range(x.shape[1]):
        total -= log_p.gather(1, x[:, i : i + 1]).squeeze(1)
        log_p = model.step(x[:, i], cache)
    torch.testing.assert_close(nelbo.double(), total, rtol=1e-6, atol=1e-6)  # float32 loss
    assert tokens.tolist() == [7, 7]


def test_mask_index_must_be_in_the_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ARTransformer(vocab_size=VOCAB, hidden_dim=HIDDEN, n_blocks=1, n_heads=HEADS, mask_index=11)

"""The autoregressive objective: exact NLL against hand computations, and its sampler."""

import math

import pytest
import torch
from torch import nn

from genodiff import backbones
from genodiff.backbones import Capabilities
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import ar

TOK = DNATokenizer()
BASES = torch.tensor(TOK.base_ids)


def tiny(name: str) -> nn.Module:
    torch.manual_seed(0)
    configs = {
        "mamba": {"d_model": 16, "n_layer": 2},
        "hyena": {"d_model": 16, "n_layer": 1, "d_inner": 32, "layer": {"l_max": 64}},
        "caduceus": {"d_model": 16, "n_layer": 1},
    }
    return backbones.build(name=name, vocab_size=TOK.vocab_size, **configs[name]).eval()


class FixedDistribution(nn.Module):
    """Logits log p[v] at every position whatever the input (a causal model trivially)."""

    def __init__(self, logits: dict[int, float], vocab: int = 16) -> None:
        super().__init__()
        self.capabilities = Capabilities(vocab_size=vocab, causal=True)
        table = torch.full((vocab,), -1e9)
        for token, value in logits.items():
            table[token] = value
        self.logits = nn.Parameter(table)

    def forward(self, input_ids, sigma=None):
        return self.logits.expand(*input_ids.shape, -1)


def random_dna(n: int, length: int, seed: int) -> torch.Tensor:
    return BASES[torch.randint(0, 4, (n, length), generator=torch.Generator().manual_seed(seed))]


def test_loss_is_the_next_token_nll_of_bos_plus_the_window():
    model = tiny("mamba")
    x = random_dna(3, 12, seed=1)
    x[1, 4] = x[2, 0] = x[2, 11] = TOK.pad_id  # N bases: context, never targets
    with torch.no_grad():
        nelbo, tokens = ar().loss(model, x)

    # Reference: run the model on [BOS] + the whole window; the logits at position i predict
    # token i (0-based) of the window; the last logits (after x[-1]) are not used.
    with torch.no_grad():
        full = torch.cat([torch.full((3, 1), TOK.bos_id), x], dim=1)  # (3, 13)
        log_p = torch.log_softmax(model(full).double(), dim=-1)
    for b in range(3):
        targets = [(i, int(t)) for i, t in enumerate(x[b]) if t != TOK.pad_id]
        assert int(tokens[b]) == len(targets)
        expected = -sum(log_p[b, i, t] for i, t in targets)
        assert float(nelbo[b]) == pytest.approx(float(expected), rel=1e-5)


def test_loss_equals_the_sum_of_recurrent_step_log_probs():
    # Independent of the shift: feed BOS, x_1, ... one at a time through Mamba's step.
    model = tiny("mamba")
    x = random_dna(2, 10, seed=2)
    nelbo, _ = ar().loss(model, x)
    with torch.no_grad():
        cache = model.allocate_inference_cache(2)
        logits = model.step(torch.full((2,), TOK.bos_id), cache)
        total = torch.zeros(2, dtype=torch.float64)
        for i in range(10):
            total -= logits.double().log_softmax(-1).gather(1, x[:, i : i + 1]).squeeze(1)
            logits = model.step(x[:, i], cache)
    torch.testing.assert_close(nelbo.double(), total, rtol=1e-4, atol=1e-4)


def test_a_window_led_by_bos_is_read_as_it_is_and_scores_n_minus_1_tokens():
    # Upstream MDLM's AR: [CLS] (the BOS) leads each text window, is never predicted, and no
    # second BOS is prepended; other rows of the same batch (no BOS) keep theirs.
    model = tiny("mamba")
    x = random_dna(3, 12, seed=4)
    x[0, 0] = x[1, 0] = TOK.bos_id
    x[1, 9:] = TOK.pad_id  # a padded sentence: the padding is never a target
    with torch.no_grad():
        nll, tokens = ar().loss(model, x)
        log_p = torch.log_softmax(model(x[:2]).double(), dim=-1)  # the windows themselves
        shifted = torch.cat([torch.full((1, 1), TOK.bos_id), x[2:, :-1]], dim=1)
        log_p_2 = torch.log_softmax(model(shifted).double(), dim=-1)[0]
    assert tokens.tolist() == [11, 8, 12]  # n - 1, n - 1 - padding, n
    for b in range(2):
        expected = -sum(
            log_p[b, i - 1, int(x[b, i])] for i in range(1, 12) if x[b, i] != TOK.pad_id
        )
        assert float(nll[b]) == pytest.approx(float(expected), rel=1e-5)
    expected = -sum(log_p_2[i, int(x[2, i])] for i in range(12))
    assert float(nll[2]) == pytest.approx(float(expected), rel=1e-5)


def test_sampling_a_template_led_by_bos_reads_no_second_bos():
    seen = []

    class Recorder(FixedDistribution):
        def forward(self, input_ids, sigma=None):
            seen.append(input_ids[0].tolist())
            return super().forward(input_ids, sigma)

    model = Recorder({i: 0.0 for i in TOK.base_ids})
    template = torch.tensor([TOK.bos_id, TOK.base_ids[0], TOK.mask_id, TOK.mask_id])
    given = template != TOK.mask_id
    request = SampleRequest(num_samples=1, length=4, template=template, given=given)
    x = ar().sample(model, request, torch.Generator().manual_seed(0))
    assert x[0, :2].tolist() == template[:2].tolist()
    assert [len(s) for s in seen] == [2, 3] and seen[0] == template[:2].tolist()


def test_uniform_model_scores_log4_per_base_and_skips_pad():
    model = FixedDistribution({i: 0.0 for i in TOK.base_ids})  # specials get -1e9
    x = random_dna(4, 20, seed=3)
    x[0, :5] = TOK.pad_id
    nelbo, tokens = ar().loss(model, x)
    assert tokens.tolist() == [15, 20, 20, 20]
    torch.testing.assert_close(nelbo, tokens * math.log(4))


def test_a_bidirectional_backbone_is_refused():
    with pytest.raises(ValueError, match="causal backbone"):
        ar().loss(tiny("caduceus"), random_dna(2, 8, seed=0))


def greedy_by_full_forwards(model: nn.Module, template: torch.Tensor, given: torch.Tensor):
    """Reference decoder: argmax over A/C/G/T of a full forward pass on [BOS] + prefix."""
    x = template.clone()[None]  # (1, L)
    with torch.no_grad():
        for i in range(x.shape[1]):
            if not given[i]:
                inputs = torch.cat([torch.tensor([[TOK.bos_id]]), x[:, :i]], dim=1)
                x[0, i] = BASES[model(inputs)[0, -1, BASES].argmax()]
    return x[0]


@pytest.mark.parametrize("name", ["mamba", "hyena"])
@pytest.mark.parametrize("prefix", [0, 5])
def test_nucleus_tiny_is_greedy_decoding_with_the_prefix_as_prompt(name, prefix):
    model = tiny(name)
    length = 12
    template = random_dna(1, length, seed=4)[0]
    given = torch.arange(length) < prefix
    request = SampleRequest(
        num_samples=2, length=length, top_p=1e-9, template=template, given=given
    )
    out = ar().sample(model, request, torch.Generator().manual_seed(0))
    expected = greedy_by_full_forwards(model, template, given)
    assert torch.equal(out, expected.expand(2, -1))


def test_sampling_is_seeded():
    model, request = tiny("mamba"), SampleRequest(num_samples=4, length=16)
    draw = lambda seed: ar().sample(model, request, torch.Generator().manual_seed(seed))  # noqa: E731
    assert torch.equal(draw(5), draw(5))
    assert not torch.equal(draw(5), draw(6))


@pytest.mark.parametrize("name", ["mamba", "hyena"])
def test_given_positions_are_kept_and_only_bases_are_drawn(name):
    length = 16
    template = torch.full((length,), TOK.n_id)  # N is never drawn, so a leak would show
    given = torch.zeros(length, dtype=torch.bool)
    given[[0, 7, 8, 12, 15]] = True
    template[given] = random_dna(1, 5, seed=7)[0]
    request = SampleRequest(num_samples=3, length=length, template=template, given=given)
    out = ar().sample(tiny(name), request, torch.Generator().manual_seed(1))
    assert torch.equal(out[:, given], template[given].expand(3, -1))
    assert torch.isin(out[:, ~given], BASES).all()


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_marginals_of_a_fixed_distribution_within_standard_errors(temperature):
    # Special tokens and N get large logits: the draw must renormalise over A/C/G/T only.
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    logits = {int(b): math.log(q) for b, q in zip(BASES, p, strict=True)}
    logits.update({TOK.mask_id: 3.0, TOK.n_id: 3.0, TOK.eos_id: 3.0})
    model = FixedDistribution(logits)
    request = SampleRequest(num_samples=1000, length=8, temperature=temperature)
    out = ar().sample(model, request, torch.Generator().manual_seed(2))
    assert torch.isin(out, BASES).all()
    counts = torch.stack([(out == b).sum() for b in BASES]).double()
    n = counts.sum()
    target = p ** (1 / temperature) / (p ** (1 / temperature)).sum()
    se = (target * (1 - target) / n).sqrt()
    assert ((counts / n - target).abs() < 5 * se).all()
    # Power: at T = 0.5 the untempered p differs from p^2 / sum(p^2) by >= 0.07, > 12 SE.
    assert (se < 0.006).all()

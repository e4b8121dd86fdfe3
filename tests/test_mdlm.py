"""MDLM objective and sampler against analytic values."""

import math

import pytest
import torch
from torch import nn

from genodiff.objectives import MDLM
from genodiff.sampling import SampleRequest, sample_categorical
from genodiff.tokenizers import DNATokenizer

TOK = DNATokenizer()


class FixedDistribution(nn.Module):
    """Predicts the same base distribution at every position, whatever the input."""

    def __init__(self, probs: dict[int, float], vocab: int = 16) -> None:
        super().__init__()
        logits = torch.full((vocab,), -1e9)
        for token, p in probs.items():
            logits[token] = math.log(p)
        self.logits = nn.Parameter(logits)
        self.seen_sigma = []

    def forward(self, input_ids, sigma=None):
        self.seen_sigma.append(sigma)
        return self.logits.expand(*input_ids.shape, -1)


def test_uniform_model_has_expected_nelbo_one_minus_eps_log4():
    # For the log-linear schedule the weight dsigma/expm1(sigma) is 1/t and a token is masked
    # with probability (1 - eps) t, so a uniform-over-ACGT model scores (1 - eps) log 4.
    objective = MDLM()
    model = FixedDistribution({i: 0.25 for i in TOK.base_ids})
    generator = torch.Generator().manual_seed(0)
    x0 = torch.randint(7, 11, (256, 128), generator=generator)
    estimates = []
    for _ in range(40):
        nelbo, tokens = objective.loss(model, x0, generator=generator)
        estimates.append((nelbo.sum() / tokens.sum()).item())
    estimates = torch.tensor(estimates, dtype=torch.float64)
    stderr = estimates.std() / math.sqrt(len(estimates))
    expected = (1 - 1e-3) * math.log(4)
    assert abs(estimates.mean() - expected) < 4 * stderr
    assert stderr < 0.01  # the test has the power to see a wrong weight


def test_loss_matches_explicit_computation_for_a_fixed_draw():
    objective = MDLM(low_discrepancy=False)
    model = FixedDistribution({7: 0.1, 8: 0.2, 9: 0.3, 10: 0.4})
    x0 = torch.tensor([[7, 8, 9, 10, 4, 7], [10, 10, 9, 4, 4, 8]])
    nelbo, tokens = objective.loss(model, x0, generator=torch.Generator().manual_seed(3))

    # Replay the same random draws and compute the NELBO by hand.
    g = torch.Generator().manual_seed(3)
    t = (1 - 1e-3) * torch.rand(2, generator=g) + 1e-3
    draw = torch.rand(2, 6, generator=g)
    expected = 0.0
    for b in range(2):
        for i in range(6):
            token = int(x0[b, i])
            if token != TOK.pad_id and draw[b, i] < (1 - 1e-3) * t[b]:
                expected += -math.log({7: 0.1, 8: 0.2, 9: 0.3, 10: 0.4}[token]) / t[b].item()
    assert tokens.tolist() == [5, 4]  # [PAD] positions are not scored
    assert nelbo.sum().item() == pytest.approx(expected, rel=1e-5)


def test_pad_positions_are_never_masked_and_no_time_conditioning_by_default():
    objective = MDLM()
    seen = []

    class Spy(FixedDistribution):
        def forward(self, input_ids, sigma=None):
            seen.append(input_ids.clone())
            return super().forward(input_ids, sigma)

    model = Spy({7: 1.0})
    x0 = torch.full((64, 32), TOK.pad_id)
    x0[:, ::2] = 7
    objective.loss(model, x0)
    assert (seen[0][:, 1::2] == TOK.pad_id).all()
    assert (seen[0] == TOK.mask_id).any()
    assert model.seen_sigma == [None]


def test_low_discrepancy_times_cover_each_stratum_once():
    t = MDLM().sample_t(64, torch.device("cpu"), torch.Generator().manual_seed(1))
    u = (t - 1e-3) / (1 - 1e-3)
    strata = torch.floor(u * 64).long().sort().values
    assert torch.equal(strata, torch.arange(64))


def test_sample_categorical_matches_probabilities():
    probs = torch.tensor([0.5, 0.0, 0.2, 0.3], dtype=torch.float64)
    draws = sample_categorical(probs.expand(200_000, 4), torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).double() / draws.numel()
    assert freq[1] == 0
    sd = torch.sqrt(probs * (1 - probs) / draws.numel())
    assert ((freq - probs).abs() <= 5 * sd + 1e-12).all()


def test_ancestral_sampler_marginals_and_no_mask_left():
    objective = MDLM()
    probs = {7: 0.7, 9: 0.2, 10: 0.1}
    model = FixedDistribution(probs)
    samples = objective.sample(
        model, SampleRequest(64, 200, steps=20), generator=torch.Generator().manual_seed(0)
    )
    assert samples.shape == (64, 200)
    assert not (samples == TOK.mask_id).any()
    freq = torch.bincount(samples.flatten(), minlength=16).double() / samples.numel()
    for token, p in probs.items():
        assert abs(freq[token] - p) < 5 * math.sqrt(p * (1 - p) / samples.numel())
    again = objective.sample(
        model, SampleRequest(64, 200, steps=20), generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(samples, again)


def test_sampler_unmasks_gradually():
    # With T steps, the expected fraction still masked after step k is the schedule's
    # mask probability at t_k: check the count after the first of 4 steps.
    objective = MDLM()
    calls = []

    class Recorder(FixedDistribution):
        def forward(self, input_ids, sigma=None):
            calls.append((input_ids == TOK.mask_id).double().mean().item())
            return super().forward(input_ids, sigma)

    objective.sample(
        Recorder({7: 1.0}), SampleRequest(32, 512, steps=4), torch.Generator().manual_seed(0)
    )
    assert calls[0] == 1.0
    expected_after_first = (1 - 1e-3) * (1 - (1 - 1e-3) / 4) / (1 - 1e-3)
    assert calls[1] == pytest.approx(expected_after_first, abs=0.01)

"""SEDD (absorbing) against MDLM, analytic values and the exact masked-diffusion posterior."""

import math

import pytest
import torch
from torch import nn

from genodiff.samplers.request import SampleRequest
from genodiff.samplers.score_entropy import transition_probs
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import mdlm, sedd

TOK = DNATokenizer()
VOCAB = 16  # padded vocabulary: 15 real (non-[MASK]) categories


class FixedScores(nn.Module):
    """Outputs log p(y) + log(V - 1) for a fixed distribution p over the 15 real categories:
    after SEDD's scaling the scores are r p(y), i.e. normalised (they sum to r)."""

    def __init__(self, probs: dict[int, float] | None = None) -> None:
        super().__init__()
        out = torch.full((VOCAB,), -1e9)
        for token, p in (probs or {}).items():
            out[token] = math.log(p) + math.log(VOCAB - 1)
        self.out = nn.Parameter(out if probs else torch.zeros(VOCAB))
        self.seen_sigma, self.seen_inputs = [], []

    def forward(self, input_ids, sigma=None):
        self.seen_sigma.append(sigma)
        self.seen_inputs.append(input_ids.clone())
        return self.out.expand(*input_ids.shape, -1)


class RandomLogProbs(nn.Module):
    """Position-dependent normalised log-probabilities over the 15 real categories."""

    def __init__(self, length: int, offset: float) -> None:
        super().__init__()
        logits = torch.randn(length, VOCAB, generator=torch.Generator().manual_seed(5))
        logits[:, TOK.mask_id] = -1e9
        self.log_p = nn.Parameter(logits.log_softmax(-1))
        self.offset = offset

    def forward(self, input_ids, sigma=None):
        return (self.log_p + self.offset).expand(input_ids.shape[0], -1, -1)


def test_normalised_scores_give_exactly_the_mdlm_loss_per_sequence():
    x0 = torch.randint(7, 11, (32, 48), generator=torch.Generator().manual_seed(0))
    x0[:, ::7] = TOK.pad_id
    sedd_model = RandomLogProbs(48, offset=math.log(VOCAB - 1))
    mdlm_model = RandomLogProbs(48, offset=0.0)
    sedd_nelbo, sedd_tokens = sedd().loss(sedd_model, x0, torch.Generator().manual_seed(11))
    mdlm_nelbo, mdlm_tokens = mdlm().loss(mdlm_model, x0, torch.Generator().manual_seed(11))
    assert torch.equal(sedd_tokens, mdlm_tokens)
    assert (mdlm_nelbo > 0).sum() > 24  # most sequences have masked tokens
    torch.testing.assert_close(sedd_nelbo, mdlm_nelbo, rtol=2e-5, atol=1e-3)
    # A wrong real-category count (V - 1) would break the equality: the test can fail.
    off, _ = sedd().loss(RandomLogProbs(48, math.log(11)), x0, torch.Generator().manual_seed(11))
    assert (off - mdlm_nelbo).abs().max() > 1.0


def test_zero_output_model_gives_the_closed_form_per_masked_token():
    # All 15 scores equal r / 15: sum s = r, so the entropy is r log 15 per masked token,
    # times sigma'(t): log(15) sigma'(t) / expm1(sigma(t)) = log(15) / t for log-linear.
    model = FixedScores()
    x0 = torch.tensor([[7, 8, 9, 10, 4, 7, 7, 8], [10, 10, 9, 4, 4, 8, 9, 9]])
    nelbo, tokens = sedd(low_discrepancy=False).loss(model, x0, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    t = (1 - 1e-3) * torch.rand(2, generator=g, dtype=torch.float32) + 1e-3
    draw = torch.rand(2, 8, generator=g)
    for b in range(2):
        t_b = t[b].double().item()
        p_t = ((1 - 1e-3) * t[b].double()).float()  # mask probability, rounded as drawn
        n_masked = sum(int(x0[b, i]) != TOK.pad_id and bool(draw[b, i] < p_t) for i in range(8))
        assert n_masked > 0
        expected = (
            n_masked
            * math.log(15)
            * (1 - 1e-3)
            / (1 - (1 - 1e-3) * t_b)
            / (1 / (1 - (1 - 1e-3) * t_b) - 1)
        )
        assert nelbo[b].item() == pytest.approx(expected, rel=1e-4)
    assert tokens.tolist() == [7, 6]
    pad = x0 == TOK.pad_id
    assert (model.seen_inputs[0][pad] == TOK.pad_id).all()  # [PAD] is never masked
    # sigma reaches the scaling although the network got no time conditioning
    assert model.seen_sigma == [None]


def test_time_conditioning_passes_sigma_to_the_network():
    model = FixedScores()
    sedd(time_conditioning=True).loss(model, torch.full((4, 8), 7))
    assert model.seen_sigma[0] is not None and model.seen_sigma[0].shape == (4,)


@pytest.mark.parametrize("t,s", [(1.0, 0.75), (0.5, 0.3), (0.05, 1e-3)])
def test_analytic_step_is_the_exact_masked_diffusion_posterior(t, s):
    probs = {7: 0.1, 8: 0.2, 9: 0.3, 10: 0.4}
    objective = sedd()
    x = torch.full((1, 3), TOK.mask_id)
    log_score = objective.log_score(FixedScores(probs), x, torch.tensor([t]))
    q = transition_probs(
        objective.process,
        log_score,
        torch.tensor(t, dtype=torch.float64),
        torch.tensor(s, dtype=torch.float64),
        "analytic",
        SampleRequest(1, 3),
    )[0, 0]
    # Independent: alpha = 1 - (1 - eps) t; P(unmask between t and s | masked at t) =
    # (alpha_s - alpha_t) / (1 - alpha_t), then x0 ~ p.
    alpha_t, alpha_s = 1 - (1 - 1e-3) * t, 1 - (1 - 1e-3) * s
    unmask = (alpha_s - alpha_t) / (1 - alpha_t)
    expected = torch.zeros(VOCAB, dtype=torch.float64)
    for token, p in probs.items():
        expected[token] = p * unmask
    expected[TOK.mask_id] = 1 - unmask
    # float32 schedule: 1 - (1 - eps) t loses ~1e-4 relative near t = 1 (as in MDLM)
    torch.testing.assert_close(q, expected, rtol=1e-4, atol=1e-7)


def test_euler_step_is_first_order():
    # Geometric schedule sigma(t) = a^(1-t) b^t, where Euler and the analytic rule differ
    # (for log-linear they coincide): jump mass r * sigma'(t) dt vs r * expm1(sigma_t - sigma_s).
    a, b = 1e-4, 20.0
    objective = sedd(noise_schedule="geometric", sigma_min=a, sigma_max=b)
    x = torch.full((1, 1), TOK.mask_id)
    log_score = objective.log_score(FixedScores({7: 1.0}), x, torch.tensor([0.5]))
    t, s = torch.tensor(0.5, dtype=torch.float64), torch.tensor(0.45, dtype=torch.float64)
    request = SampleRequest(1, 1)
    euler = transition_probs(objective.process, log_score, t, s, "euler", request)[0, 0]
    analytic = transition_probs(objective.process, log_score, t, s, "analytic", request)[0, 0]
    sigma = lambda u: a ** (1 - u) * b**u  # noqa: E731
    r = 1 / math.expm1(sigma(0.5))
    assert euler[7].item() == pytest.approx(r * sigma(0.5) * math.log(b / a) * 0.05, rel=1e-4)
    assert analytic[7].item() == pytest.approx(r * math.expm1(sigma(0.5) - sigma(0.45)), rel=1e-4)
    assert euler[TOK.mask_id].item() == pytest.approx(1 - euler[7].item(), rel=1e-6)
    assert abs(euler[7].item() - analytic[7].item()) > 0.01


@pytest.mark.parametrize("sampler", ["analytic", "euler"])
def test_sampler_marginals_match_the_model(sampler):
    probs = {7: 0.6, 9: 0.3, 10: 0.1}
    request = SampleRequest(48, 200, steps=16, sampler=sampler)
    samples = sedd().sample(FixedScores(probs), request, torch.Generator().manual_seed(0))
    assert samples.shape == (48, 200)
    counts = torch.bincount(samples.flatten(), minlength=VOCAB).double()
    n = samples.numel()
    assert counts.sum() == sum(counts[k] for k in probs)  # nothing else, no [MASK] left
    chi2 = sum((counts[k] - n * p) ** 2 / (n * p) for k, p in probs.items())
    assert chi2 < 13.8  # chi-square, 2 degrees of freedom, p = 0.001


def test_sampler_unmasks_gradually_and_keeps_given_positions():
    model = FixedScores({8: 1.0})
    template = torch.full((32,), TOK.mask_id)
    given = torch.zeros(32, dtype=torch.bool)
    template[:5], given[:5] = torch.tensor([7, 9, 10, 10, 7]), True
    template[20], given[20] = 9, True
    request = SampleRequest(64, 32, steps=4, sampler="analytic", template=template, given=given)
    out = sedd().sample(model, request, torch.Generator().manual_seed(1))
    assert (out[:, given] == template[given]).all()
    assert (out[:, ~given] == 8).all()
    for seen in model.seen_inputs:
        assert (seen[:, given] == template[given]).all()
    free = ~given
    masked_after_first = (model.seen_inputs[1][:, free] == TOK.mask_id).double().mean().item()
    assert masked_after_first == pytest.approx(1 - (1 - 1e-3) / 4, abs=0.04)


def test_top_p_keeps_only_the_most_likely_token():
    request = SampleRequest(8, 64, steps=4, sampler="euler", top_p=0.5)
    out = sedd().sample(FixedScores({7: 0.6, 9: 0.4}), request, torch.Generator().manual_seed(2))
    assert (out == 7).all()


def test_infinite_sigma_at_t_1_is_a_clear_error():
    with pytest.raises(ValueError, match="noise_eps > 0"):
        sedd(noise_eps=0.0)


def test_unknown_sampler_is_a_clear_error():
    with pytest.raises(ValueError, match="analytic, euler"):
        sedd().sample(FixedScores(), SampleRequest(1, 4, sampler="ancestral"))

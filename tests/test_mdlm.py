"""MDLM objective and sampler against analytic values."""

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from genodiff.samplers.categorical import sample_categorical
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import mdlm

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
    objective = mdlm()
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
    objective = mdlm(low_discrepancy=False)
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
    objective = mdlm()
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
    t = mdlm().process.sample_t(64, torch.device("cpu"), torch.Generator().manual_seed(1))
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


@pytest.mark.parametrize("leading", [False, True])  # both ways of summing (True: CUDA's)
def test_sample_categorical_inverts_each_uniform_as_a_sorted_search(leading, monkeypatch):
    # Against numpy's searchsorted over numpy's running sum: the first category whose
    # cumulative mass exceeds u * total; zero-mass categories never, boundaries included.
    import numpy as np

    from genodiff.samplers import categorical

    monkeypatch.setattr(categorical, "leading_axis_sum", lambda probs: leading)
    categories = 6

    g = torch.Generator().manual_seed(0)
    probs = torch.rand(500, categories, generator=g, dtype=torch.float64)
    probs[:, 2] = 0.0  # never drawn
    probs[:100] *= 3.7  # unnormalised rows
    u = torch.rand(500, 1, generator=g, dtype=torch.float64)
    cdf = np.cumsum(probs.numpy(), axis=-1)
    u[:50, 0] = torch.from_numpy(cdf[:50, 1] / cdf[:50, -1])  # on a boundary
    u[50:60, 0] = 0.0
    draws = sample_categorical(probs, u=u)
    expected = [
        min(np.searchsorted(row, x * row[-1], side="right"), categories - 1)
        for row, x in zip(cdf, u[:, 0].numpy(), strict=True)
    ]
    assert draws.tolist() == expected and 2 not in draws.tolist()
    batched = sample_categorical(probs.view(50, 10, -1), u=u.view(50, 10, 1))  # (..., V)
    assert torch.equal(batched.view(-1), draws)


def test_ancestral_sampler_marginals_and_no_mask_left():
    objective = mdlm()
    probs = {7: 0.7, 9: 0.2, 10: 0.1}
    model = FixedDistribution(probs)
    samples = objective.sample(
        model, SampleRequest(64, 200, steps=20), noise=torch.Generator().manual_seed(0)
    )
    assert samples.shape == (64, 200)
    assert not (samples == TOK.mask_id).any()
    freq = torch.bincount(samples.flatten(), minlength=16).double() / samples.numel()
    for token, p in probs.items():
        assert abs(freq[token] - p) < 5 * math.sqrt(p * (1 - p) / samples.numel())
    again = objective.sample(
        model, SampleRequest(64, 200, steps=20), noise=torch.Generator().manual_seed(0)
    )
    assert torch.equal(samples, again)


def test_sampler_unmasks_gradually():
    # With T steps, the expected fraction still masked after step k is the schedule's
    # mask probability at t_k: check the count after the first of 4 steps.
    objective = mdlm()
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


# ---------------------------------------------------------------------------------------------
# Exact expectations with an oracle model (the bound tests and the ablation flags)
# ---------------------------------------------------------------------------------------------

BASE_IDS = torch.tensor(TOK.base_ids)  # A C G T


class JointOracle(nn.Module):
    """x_theta = the exact conditionals p(x0_i | unmasked tokens of x_t) of an explicit joint
    table over ACGT^L (one-hot at unmasked positions). ``mask_mass`` puts that much
    probability on [MASK] (the rest scaled by 1 - mask_mass), to test zero masking."""

    def __init__(self, joint: torch.Tensor, mask_mass: float = 0.0) -> None:
        super().__init__()
        length = joint.dim()
        cells = torch.tensor(list(itertools.product(range(4), repeat=length)))  # (4^L, L)
        self.register_buffer("cells", cells)
        self.register_buffer("probs", joint.reshape(-1).double())  # (4^L,)
        self.mask_mass = mask_mass
        self.anchor = nn.Parameter(torch.zeros(()))  # samplers look up the device here

    def forward(self, input_ids, sigma=None):
        base = (input_ids[..., None] == BASE_IDS).long().argmax(-1)  # (B, L) 0..3
        masked = input_ids == TOK.mask_id
        consistent = ((self.cells[None] == base[:, None]) | masked[:, None]).all(-1)  # (B, N)
        weights = self.probs[None] * consistent  # (B, N)
        onehot = torch.nn.functional.one_hot(self.cells, 4).double()  # (N, L, 4)
        post = torch.einsum("bn,nlv->blv", weights, onehot)
        post = post / post.sum(-1, keepdim=True)  # (B, L, 4)
        probs = torch.zeros(*input_ids.shape, 16, dtype=torch.float64)
        probs[..., BASE_IDS] = post * (1 - self.mask_mass)
        probs[..., TOK.mask_id] = self.mask_mass
        return probs.clamp_min(1e-300).log().clamp_min(-1e4).float()


def random_joint(length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand((4,) * length, generator=g, dtype=torch.float64) ** 3 + 0.01
    return weights / weights.sum()


def all_sequences(length: int) -> torch.Tensor:
    return BASE_IDS[torch.tensor(list(itertools.product(range(4), repeat=length)))]  # (4^L, L)


def expected_nelbo(objective, model, x0, times, time_weights):
    """sum_k time_weights[k] * E_mask[NELBO | t_k] for every row of x0 (N, L), float64,
    enumerating all 2^L masking patterns with their exact probabilities."""
    n, length = x0.shape
    patterns = torch.tensor(list(itertools.product([False, True], repeat=length)))  # (P, L)
    k, p = len(times), len(patterns)
    t = torch.as_tensor(times, dtype=torch.float32)
    mask_p = objective.process.schedule.mask_probability(t.double())  # (K,)
    m = patterns.sum(-1)  # (P,)
    pattern_prob = mask_p[:, None] ** m * (1 - mask_p[:, None]) ** (length - m)  # (K, P)
    rows_x0 = x0[:, None, None].expand(n, k, p, length).reshape(-1, length)
    rows_t = t[None, :, None].expand(n, k, p).reshape(-1)
    rows_mask = patterns[None, None].expand(n, k, p, length).reshape(-1, length)
    nelbo, _ = objective.nelbo_terms(model, rows_x0, rows_t, rows_mask)
    nelbo = nelbo.double().reshape(n, k, p)
    weights = torch.as_tensor(time_weights, dtype=torch.float64)[:, None] * pattern_prob
    return (nelbo * weights).sum((1, 2))  # (N,)


def continuous_nelbo(objective, model, x0, nodes: int = 16):
    """int_0^1 E_mask[NELBO | t] dt by Gauss-Legendre (exact for polynomial integrands)."""
    u, w = np.polynomial.legendre.leggauss(nodes)
    return expected_nelbo(objective, model, x0, (u + 1) / 2, w / 2)


def discrete_nelbo(objective, model, x0):
    steps = objective.process.num_steps
    grid = torch.arange(1, steps + 1, dtype=torch.float64) / steps
    return expected_nelbo(objective, model, x0, grid, torch.full((steps,), 1 / steps))


def test_continuous_nelbo_of_the_oracle_is_the_nll_and_discrete_decreases_towards_it():
    # With the exact conditionals, the continuous-time NELBO (loglinear, eps = 0) is an
    # any-order autoregressive NLL: exactly -log p(x0) for every sequence. Discrete time is a
    # looser bound (tokens unmask independently within a step) and tightens as T grows; T = 1
    # unmasks everything at once and scores the product of the marginals.
    joint = random_joint(3)
    model, x0 = JointOracle(joint), all_sequences(3)
    p = joint.reshape(-1)
    nll = -p.log()
    cont = continuous_nelbo(mdlm(noise_eps=0.0), model, x0)
    torch.testing.assert_close(cont, nll, rtol=2e-5, atol=2e-5)

    marginals = [joint.sum(dim=tuple(j for j in range(3) if j != i)) for i in range(3)]
    cells = torch.tensor(list(itertools.product(range(4), repeat=3)))
    product_nll = -sum(marginals[i][cells[:, i]].log() for i in range(3))
    expected = []
    for steps in (1, 2, 4, 16):
        disc = discrete_nelbo(mdlm(noise_eps=0.0, num_steps=steps), model, x0)
        if steps == 1:
            torch.testing.assert_close(disc, product_nll, rtol=2e-5, atol=2e-5)
        expected.append(float((p * disc).sum()))
    entropy = float((p * nll).sum())
    assert all(a > b + 1e-4 for a, b in zip(expected, expected[1:], strict=False))
    assert expected[-1] > entropy
    assert expected[-1] - entropy < (expected[0] - entropy) / 8


def test_continuous_nelbo_with_eps_stays_within_the_stated_tolerance_of_the_entropy():
    # docs/architecture.md §7.1: with eps > 0 a fraction eps of the tokens is never masked and
    # goes unscored, so the bound may sit below the NLL; in expectation over the data by at most
    # L * eps * log V (each unscored conditional entropy is <= log V). Per sequence the gap is
    # about eps * NLL, which can exceed that for rare sequences.
    joint = random_joint(3, seed=1)
    eps = 1e-2
    cont = continuous_nelbo(mdlm(noise_eps=eps), JointOracle(joint), all_sequences(3))
    p = joint.reshape(-1)
    entropy = float(-(p * p.log()).sum())
    expected = float((p * cont).sum())
    assert entropy - 3 * eps * math.log(4) <= expected < entropy
    assert expected < entropy - eps * entropy / 2  # eps visibly matters at this size


@pytest.mark.parametrize("steps", [0, 4])
def test_loss_is_an_unbiased_estimate_of_the_exact_expectation(steps):
    # The Monte-Carlo estimator (t draws, Bernoulli masks) against the enumeration above,
    # on data drawn from the joint, with a 5-standard-error tolerance.
    joint = random_joint(3, seed=2)
    model = JointOracle(joint)
    objective = mdlm(noise_eps=0.0, num_steps=steps)
    exact = continuous_nelbo(objective, model, all_sequences(3)) if steps == 0 else None
    if steps:
        exact = discrete_nelbo(objective, model, all_sequences(3))
    target = float((joint.reshape(-1) * exact).sum())
    g = torch.Generator().manual_seed(5)
    index = torch.multinomial(joint.reshape(-1).float(), 20_000, True, generator=g)
    x0 = all_sequences(3)[index]
    nelbo, tokens = objective.loss(model, x0, generator=g)
    assert torch.equal(tokens, torch.full((20_000,), 3))
    stderr = nelbo.double().std() / math.sqrt(len(nelbo))
    assert abs(nelbo.double().mean() - target) < 5 * stderr
    assert stderr < 0.05


def test_discrete_time_uses_the_grid_with_low_discrepancy():
    t = mdlm(num_steps=8).process.sample_t(8, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert sorted((t * 8).round().long().tolist()) == list(range(1, 9))
    t = mdlm(num_steps=8).process.sample_t(
        1000, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    assert torch.allclose(t * 8, (t * 8).round()) and t.min() >= 1 / 8 and t.max() <= 1
    with pytest.raises(ValueError, match="num_steps"):
        mdlm(num_steps=-1)


def test_eq9_weight_for_a_fixed_draw():
    # T * (alpha_s - alpha_t) / (1 - alpha_t) * -log p on masked tokens, by hand.
    objective = mdlm(num_steps=4, noise_eps=1e-2)
    model = FixedDistribution({7: 0.1, 8: 0.2, 9: 0.3, 10: 0.4})
    x0 = torch.tensor([[7, 8, 9, 10]])
    masked = torch.tensor([[True, False, True, True]])
    nelbo, cross_entropy = objective.nelbo_terms(model, x0, torch.tensor([0.75]), masked)
    p_t, p_s = 0.99 * 0.75, 0.99 * 0.5
    nll = -math.log(0.1) - math.log(0.3) - math.log(0.4)
    assert nelbo.item() == pytest.approx(4 * (p_t - p_s) / p_t * nll, rel=1e-5)
    assert cross_entropy.item() == pytest.approx(nll, rel=1e-5)


def explicit_absorbing_kl(x_theta: torch.Tensor, x0: int, alpha_s: float, alpha_t: float):
    """KL(q(x_s | x_t=[MASK], x0) || p_theta(x_s | x_t=[MASK])) from explicit vectors over
    {A, C, G, T, [MASK]} (index 4 = [MASK]); p_theta mixes the posteriors q(x_s | x_t, x0')
    with weights q(x_t=[MASK] | x0') x_theta(x0') (Austin et al.)."""

    def posterior(x0_value: int) -> torch.Tensor:  # q(x_s | x_t = [MASK], x0 = x0_value)
        out = torch.zeros(5, dtype=torch.float64)
        if x0_value == 4:  # [MASK] is absorbing
            out[4] = 1.0
            return out
        out[x0_value] = (alpha_s - alpha_t) / (1 - alpha_t)
        out[4] = (1 - alpha_s) / (1 - alpha_t)
        return out

    lik = torch.tensor([1 - alpha_t] * 4 + [1.0], dtype=torch.float64)  # q(x_t=[MASK] | x0')
    weights = lik * x_theta / (lik * x_theta).sum()
    p = sum(weights[v] * posterior(v) for v in range(5))
    q = posterior(x0)
    keep = q > 0
    return float((q[keep] * (q[keep] / p[keep]).log()).sum())


def test_no_zero_masking_matches_the_explicit_kl_and_costs_more():
    # L = 1, the model p(x0) with mass mu moved to [MASK]: the expected discrete NELBO is
    # sum_t p_t KL_t with KL_t from explicit distributions; zero masking removes mu and
    # gives exactly -log p(x0).
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    mu = 0.2
    model = JointOracle(p, mask_mass=mu)
    x0 = all_sequences(1)
    steps = 5
    without = discrete_nelbo(mdlm(noise_eps=0.0, num_steps=steps, zero_masking=False), model, x0)
    with_zm = discrete_nelbo(mdlm(noise_eps=0.0, num_steps=steps), model, x0)
    x_theta = torch.cat([(1 - mu) * p, torch.tensor([mu], dtype=torch.float64)])
    for v in range(4):
        reference = sum(
            (k / steps) * explicit_absorbing_kl(x_theta, v, 1 - (k - 1) / steps, 1 - k / steps)
            for k in range(1, steps + 1)
        )
        assert without[v].item() == pytest.approx(reference, rel=1e-5)
    torch.testing.assert_close(with_zm, -p.log(), rtol=1e-5, atol=1e-5)
    assert (without > with_zm + 0.05).all()


def test_continuous_time_without_zero_masking_costs_minus_log_one_minus_mu():
    # Continuous time, loglinear eps = 0, L = 1: the extra terms
    # log(Z / t) - mu / Z (Z = t + (1 - t) mu) integrate to zero over [0, 1], so the NELBO is
    # int_0^1 -log((1 - mu) p(x0)) dt = -log p(x0) - log(1 - mu). Quadrature in t = v^4
    # smooths the log(1/t) singularity.
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    mu = 0.3
    v, w = np.polynomial.legendre.leggauss(40)
    v, w = (v + 1) / 2, w / 2
    times, weights = v**4, w * 4 * v**3
    objective = mdlm(noise_eps=0.0, zero_masking=False)
    nelbo = expected_nelbo(
        objective, JointOracle(p, mask_mass=mu), all_sequences(1), times, weights
    )
    torch.testing.assert_close(nelbo, -p.log() - math.log(1 - mu), rtol=1e-4, atol=1e-4)


def test_no_carry_over_adds_the_clean_reconstruction_term():
    # A model that ignores its input (uniform over ACGT) does not copy unmasked tokens:
    # without carry-over each scored token adds -log x_theta(x0 | x0) = log 4, in every draw.
    model = FixedDistribution({i: 0.25 for i in TOK.base_ids})
    x0 = torch.tensor([[7, 8, 9, 10, 4, 7]])
    masked = torch.tensor([[True, False, False, True, False, False]])
    t = torch.tensor([0.4])
    carry, _ = mdlm().nelbo_terms(model, x0, t, masked)
    no_carry, _ = mdlm(carry_over=False).nelbo_terms(model, x0, t, masked)
    assert no_carry.item() == pytest.approx(carry.item() + 5 * math.log(4), rel=1e-6)
    # In expectation: (1 - eps) log 4 + log 4 per token, against (1 - eps) log 4.
    u, w = np.polynomial.legendre.leggauss(4)
    x0 = all_sequences(1)
    no_carry = expected_nelbo(mdlm(carry_over=False), model, x0, (u + 1) / 2, w / 2)
    torch.testing.assert_close(
        no_carry, torch.full((4,), (2 - 1e-3) * math.log(4), dtype=torch.float64)
    )
    # The oracle copies unmasked tokens itself, so carry-over changes nothing for it.
    joint = random_joint(2)
    oracle, x0 = JointOracle(joint), all_sequences(2)
    torch.testing.assert_close(
        continuous_nelbo(mdlm(carry_over=False), oracle, x0),
        continuous_nelbo(mdlm(), oracle, x0),
    )


@pytest.mark.parametrize("carry_over", [True, False])
@pytest.mark.parametrize("zero_masking", [True, False])
def test_x0_log_probs_and_sampling_for_every_flag_combination(carry_over, zero_masking):
    objective = mdlm(carry_over=carry_over, zero_masking=zero_masking, num_steps=8)
    model = JointOracle(random_joint(3), mask_mass=0.3)
    x_t = torch.tensor([[TOK.mask_id, 8, TOK.mask_id]])
    log_p = objective.x0_log_probs(model, x_t, torch.tensor([0.5]))
    assert log_p.shape == (1, 3, 16) and log_p.dtype == torch.float32
    assert log_p.exp()[..., TOK.mask_id].max() == 0  # samplers never draw [MASK] as x0
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(1, 3))
    # At the unmasked position: carried over (one-hot) or the network's own renormalised guess
    assert log_p[0, 1, 8].exp().item() == pytest.approx(1.0)  # the oracle copies too
    samples = objective.sample(model, SampleRequest(8, 3, steps=4), torch.Generator())
    assert ((samples >= 7) & (samples <= 10)).all()


def test_time_conditioning_gets_a_finite_sigma_when_alpha_reaches_zero():
    objective = mdlm(noise_eps=0.0, num_steps=4, time_conditioning=True)
    model = FixedDistribution({7: 0.5, 8: 0.5})
    objective.loss(model, torch.full((4, 8), 7), torch.Generator().manual_seed(0))
    (sigma,) = model.seen_sigma
    assert torch.isfinite(sigma).all() and sigma.max() > 10  # t = 1 is drawn (4 strata)

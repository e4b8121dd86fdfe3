"""UDLM against exact laws on a toy distribution small enough to enumerate: DNA sequences of
length 2 (4 letters, 16 sequences, with dependence between the positions), so that every bound
is computed exactly. Every expected value here is built by enumeration from
the definitions (the forward kernel and Bayes), not from genodiff's formulas:

- the "network" is the exact x0 posterior: p(x | z_t) ∝ p(x) prod_l q(z_t^l | x^l), its
  marginal per position, read from the sigma the objective gives (alpha = exp(-sigma));
- with it the continuous NELBO, averaged over the data, equals H(p) + KL(q(z_1) || uniform)
  (the exact reverse process started from the uniform prior instead of q(z_1)), an upper bound
  on H(p), and a wrong denoiser's is larger;
- the T-step bound decreases to the continuous one as T grows;
- the sampler with that network draws p (chi-square, with a power check);
- corruption marginals, the posterior formula, [PAD] handling.

noise_eps is 0.2 (not 1e-3) so that a schedule used inconsistently (alpha_t = 1 - t somewhere)
changes the numbers well beyond the tolerances.
"""

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from genodiff.config import ConfigError
from genodiff.evaluate import score_windows
from genodiff.model import GenerativeModel
from genodiff.objectives.udlm import UDLM
from genodiff.processes.uniform_posterior import continuous_nelbo_rate
from genodiff.tokenizers import DNATokenizer
from tests import guided

TOK = DNATokenizer()
LETTERS = list(TOK.sample_ids)  # A C G T ids
N, LENGTH, VOCAB = 4, 2, 16
K = N**LENGTH  # 16 sequences
EPS = 0.2
SEQS = torch.tensor(list(itertools.product(range(N), repeat=LENGTH)))  # (K, L) letter indices
IDS = torch.tensor(LETTERS)[SEQS]  # (K, L) token ids


def alpha_of(t: float) -> float:
    return 1 - (1 - EPS) * t  # the log-linear schedule, written out


def toy_law(seed: int) -> torch.Tensor:
    """(K,) a distribution over the K sequences with dependence between positions."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(K, generator=g, dtype=torch.float64) ** 3 + 0.01
    return weights / weights.sum()


def kernel(z: torch.Tensor, x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """q(z_t = z | x) per letter pair: alpha [z = x] + (1 - alpha) / N (broadcasting)."""
    return alpha * (z == x).double() + (1 - alpha) / N


def on_distinct_rows(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ids: torch.Tensor, times: torch.Tensor
) -> torch.Tensor:
    """``fn(ids, times)`` for ids (B, L) and times (B,), computed once per distinct (row of
    ids, time) and spread back to the B rows: a sampler's thousands of rows hold at most K
    distinct sequences at one time."""
    distinct_times, key = torch.unique(times, return_inverse=True)  # (T,), (B,)
    base = int(ids.max()) + 1
    assert len(distinct_times) * base ** ids.shape[1] < 2**63  # the key fits in int64
    for column in ids.T:  # key: (time, ids) in mixed radix, one int64 per row
        key = key * base + column
    distinct, inverse = torch.unique(key, return_inverse=True)  # (D,), (B,)
    # (D,): one row of each key (any one: equal keys, equal rows)
    one_row = torch.empty_like(distinct).scatter_(0, inverse, torch.arange(len(ids)))
    return fn(ids[one_row], times[one_row])[inverse]


class ExactDenoiser(torch.nn.Module):
    """The optimal UDLM network for ``law``: logits (B, L, V) with, for each letter v,
    log p(x^l = v | z_t^{-l}), the posterior of the clean letter given every *other* position
    of z_t (Bayes with the forward kernel; sigma -> alpha = exp(-sigma)). Not given z_t^l
    itself: the reverse posterior q(z_s | z_t, x_theta) multiplies in the evidence of z_t^l
    (at s = 0 it is x_theta(v) (N alpha [v = z_t^l] + 1 - alpha), normalised), so the exact
    reverse process needs x_theta = p(x^l | z_t^{-l}); the full posterior p(x^l | z_t) would
    count z_t^l twice. Positions not holding a letter ([PAD]) are taken as given."""

    def __init__(
        self, law: torch.Tensor, seqs_ids: torch.Tensor = IDS, own_letter: bool = False
    ) -> None:
        super().__init__()
        self.law, self.seqs_ids = law, seqs_ids  # (K,), (K, L)
        self.own_letter = own_letter  # True: p(x^l | z_t), the full posterior (not optimal)
        self.dummy = torch.nn.Parameter(torch.zeros(()))  # a device for the sampler

    def forward(self, z_ids: torch.Tensor, sigma: torch.Tensor, **_) -> torch.Tensor:
        return on_distinct_rows(self.logits, z_ids, sigma)

    def logits(self, z_ids: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        alpha = torch.exp(-sigma.double())[:, None, None]  # (B, 1, 1)
        z, x = z_ids[:, None, :], self.seqs_ids[None, :, :]  # (B, 1, L), (1, K, L)
        is_letter = (x >= LETTERS[0]) & (x <= LETTERS[-1])
        per_position = torch.where(is_letter, kernel(z, x, alpha), (z == x).double())  # (B,K,L)
        logits = torch.full((*z_ids.shape, VOCAB), -1e6, dtype=torch.float64)
        for position in range(z_ids.shape[1]):
            keep = position + (0 if self.own_letter else 1)  # keep z^l's own kernel or drop it
            others = torch.cat([per_position[..., :position], per_position[..., keep:]], -1)
            joint = self.law[None, :] * others.prod(-1)  # (B, K)
            post = joint / joint.sum(-1, keepdim=True)  # (B, K): p(x | z^{-l})
            for letter in LETTERS:
                marginal = (post * (self.seqs_ids[:, position] == letter)).sum(-1)  # (B,)
                logits[:, position, letter] = marginal.clamp_min(1e-300).log()
        return logits.float()


def udlm(**kwargs) -> UDLM:
    return UDLM(sample_ids=LETTERS, noise_eps=EPS, **kwargs)


def entropy(law: torch.Tensor) -> float:
    return float(-(law * law.log()).sum())


def expected_nelbo(objective: UDLM, network: torch.nn.Module, law: torch.Tensor, t: float):
    """E_{x ~ law, z_t ~ q(. | x)}[objective's NELBO estimate at time t], by enumeration."""
    rows_x, rows_z = IDS.repeat_interleave(K, 0), IDS.repeat(K, 1)  # all (x, z) pairs
    alpha = torch.tensor(alpha_of(t), dtype=torch.float64)
    q_z = kernel(SEQS.repeat(K, 1), SEQS.repeat_interleave(K, 0), alpha).prod(-1)  # (K K,)
    weight = law.repeat_interleave(K) * q_z
    times = torch.full((rows_x.shape[0],), t, dtype=torch.float64)
    nelbo = objective.nelbo_terms(network, rows_x, times, rows_z, None).double()
    return float((weight * nelbo).sum())


def prior_gap(law: torch.Tensor) -> float:
    """KL(q(z_1) || uniform): q(z_1) = sum_x p(x) prod_l q(z_1^l | x^l), by enumeration."""
    alpha = torch.tensor(alpha_of(1.0), dtype=torch.float64)
    q = kernel(SEQS[:, None, :], SEQS[None, :, :], alpha).prod(-1) @ law  # (K,) over z
    return float((q * (q * K).log()).sum())


# Gauss-Legendre nodes and weights on [0, 1] for the time integral. The expected integrand is
# smooth but for a log(1 / t) growth near t = 0 (a letter replaced by noise weighs about 1 / t
# and has odds about t), integrable: the rule resolves it to well within the tolerances.
NODES, WEIGHTS = np.polynomial.legendre.leggauss(48)


def continuous_bound(network, law) -> float:
    objective = udlm()
    return sum(
        w / 2 * expected_nelbo(objective, network, law, (node + 1) / 2)
        for node, w in zip(NODES, WEIGHTS, strict=True)
    )


def discrete_bound(network, law, steps: int) -> float:
    """The T-step bound: T * E_t KL over t on {1/T, ..., 1} = sum of the T terms."""
    objective = udlm(num_steps=steps)
    return (
        sum(expected_nelbo(objective, network, law, k / steps) for k in range(1, steps + 1)) / steps
    )


# ----------------------------------------------------------------------------- the bound


def test_continuous_nelbo_with_the_exact_denoiser_is_the_nll_plus_the_prior_gap():
    law = toy_law(0)
    bound = continuous_bound(ExactDenoiser(law), law)
    exact = entropy(law) + prior_gap(law)
    assert prior_gap(law) > 1e-4  # eps = 0.2: the gap is there, and the bound carries it
    assert bound == pytest.approx(exact, abs=2e-3)  # midpoint rule and float32 network
    assert bound >= entropy(law)


def test_a_wrong_denoiser_gives_a_looser_bound():
    law, wrong = toy_law(0), toy_law(1)
    exact = entropy(law) + prior_gap(law)
    assert continuous_bound(ExactDenoiser(wrong), law) > exact + 0.05


def test_the_full_posterior_of_the_clean_letter_is_not_the_optimal_network():
    """x_theta = p(x^l | z_t) counts z_t^l twice (uniform_posterior's docstring)."""
    law = toy_law(0)
    full = continuous_bound(ExactDenoiser(law, own_letter=True), law)
    assert full > entropy(law) + prior_gap(law) + 0.5


def test_the_t_step_bound_decreases_to_the_continuous_one():
    law = toy_law(0)
    network = ExactDenoiser(law)
    continuous = continuous_bound(network, law)
    bounds = [discrete_bound(network, law, steps) for steps in (1, 2, 4, 16, 64)]
    assert all(a > b for a, b in zip(bounds, bounds[1:], strict=False))
    assert bounds[0] > continuous + 0.05  # one step is much looser ...
    assert bounds[-1] == pytest.approx(continuous, abs=5e-3)  # ... 64 steps about tight
    assert min(bounds) >= continuous - 2e-3


def test_one_step_bound_is_the_reconstruction_from_the_prior():
    """T = 1: the bound is E[-log p_theta(x | z_1)] + prior KL, built here from Bayes."""
    law = toy_law(0)
    network = ExactDenoiser(law)
    alpha = torch.tensor(alpha_of(1.0), dtype=torch.float64)
    expected = 0.0
    for xi, x in enumerate(SEQS):
        for z in SEQS:
            q_z = float(kernel(z, x, alpha).prod())
            sigma = torch.tensor([-math.log(alpha_of(1.0))])
            log_x = network(torch.tensor(LETTERS)[z][None], sigma).double().log_softmax(-1)[0]
            for position in range(LENGTH):  # Bayes for the clean letter given z_1 and x_theta
                prior = log_x[position, LETTERS].exp()
                joint = prior * kernel(z[position], torch.arange(N), alpha)
                nll = -math.log(joint[x[position]] / joint.sum())
                kl_prior = sum(
                    float(p * math.log(p * N)) for p in kernel(torch.arange(N), x[position], alpha)
                )
                expected += float(law[xi]) * q_z * (nll + kl_prior)
    assert discrete_bound(network, law, 1) == pytest.approx(expected, rel=1e-5)


def test_the_training_loss_is_an_unbiased_estimate_of_the_continuous_bound():
    law = toy_law(0)
    network = ExactDenoiser(law)
    g = torch.Generator().manual_seed(0)
    x = IDS[torch.multinomial(law, 4096, replacement=True, generator=g)]
    objective = udlm(sampling_eps=1e-4)
    nelbo, tokens = objective.loss(network, x, g)
    assert (tokens == LENGTH).all()
    mean, se = nelbo.double().mean(), nelbo.double().std() / math.sqrt(len(nelbo))
    expected = entropy(law) + prior_gap(law)
    assert abs(float(mean) - expected) < 4 * float(se) + 2e-3


def test_the_held_out_loss_is_an_unbiased_estimate_of_the_continuous_bound_too():
    """In eval mode the times are importance-weighted (eval_t_power): the same expectation."""
    law = toy_law(0)
    network = ExactDenoiser(law)
    g = torch.Generator().manual_seed(0)
    x = IDS[torch.multinomial(law, 4096, replacement=True, generator=g)]
    objective = udlm().eval()  # the held-out times do not start at sampling_eps
    assert objective.eval_t_power == 2.5
    nelbo, _ = objective.loss(network, x, g)
    mean, se = nelbo.double().mean(), nelbo.double().std() / math.sqrt(len(nelbo))
    expected = entropy(law) + prior_gap(law)
    assert abs(float(mean) - expected) < 4 * float(se) + 2e-3


def test_held_out_times_cover_all_of_0_1_as_the_bound_needs(monkeypatch):
    """The bound integrates the rate over all of [0, 1]. Training draws t in [sampling_eps, 1]
    (1e-3), but a held-out estimate that did would leave out a piece that is not small for
    uniform noise: the expected rate grows like ((N - 1) / N) log(1 / t) near t = 0, so
    [0, 1e-3] holds about 0.006 nats per letter, and the estimate would sit below the NLL of
    the exact denoiser. For g(t) = log(1 / t), whose integral over [0, 1] is 1, the held-out
    times and weights give E[weight g(t)] = 1 (over [1e-3, 1], rescaled as before: 0.9931)."""
    objective = udlm().eval()
    seen = {}

    def record(model, input_ids, t, z_t, labels, weight=None):
        seen.update(t=t.double(), weight=weight.double())
        return torch.zeros(len(input_ids))

    monkeypatch.setattr(objective, "nelbo_terms", record)
    objective.loss(
        ExactDenoiser(toy_law(0)), IDS[:1].repeat(4096, 1), torch.Generator().manual_seed(0)
    )
    t, weight = seen["t"], seen["weight"]
    estimate = (weight * -t.log()).mean()  # stratified times: a lattice rule, error ~1e-5
    assert float(estimate) == pytest.approx(1.0, abs=1e-3)
    assert float(t.min()) < objective.process.sampling_eps


def test_the_rate_at_t_0_is_its_finite_limit():
    """At t = 0 (alpha = 1, which held-out times may reach) nothing is noised, z_t = x, and
    the rate is (alpha' / N) (1 - 1 / x_theta(x)): the bracket with xbar = N x and xbar_theta =
    N x_theta, whose other letters' terms vanish."""
    x_theta = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    one, dalpha = torch.ones(1, dtype=torch.float64), torch.full((1,), -0.8, dtype=torch.float64)
    for letter in range(N):
        at = torch.tensor([letter])
        rate = continuous_nelbo_rate(x_theta.log()[None], at, at, one, dalpha)
        expected = -0.8 / N * (1 - 1 / float(x_theta[letter]))
        assert float(rate) == pytest.approx(expected, rel=1e-12)


class Windows:
    """Windows (B, L) of token ids as ``genodiff eval`` reads a dataset."""

    def __init__(self, ids: torch.Tensor) -> None:
        self.ids, self.max_length = ids, ids.shape[1]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index]}

    def item_name(self, index: int) -> str:
        return f"window {index}"


def test_the_held_out_bound_of_a_small_model_is_far_less_noisy_and_unchanged():
    """A time-conditioned Caduceus (d16, random weights) scores 16 windows of 256 i.i.d.
    letters as ``genodiff eval`` does (4 noise draws per window, in one batch), under 12
    seeds: with importance-weighted times (the default, eval_t_power 2.5) each window's value
    varies over the seeds with under half the sd of uniform times (measured: about a third),
    and the mean over every window and seed moves by less than its Monte-Carlo error."""
    g = torch.Generator().manual_seed(0)
    letters = torch.multinomial(torch.tensor([0.3, 0.2, 0.2, 0.3]), 16 * 256, True, generator=g)
    windows = Windows(torch.tensor(LETTERS)[letters].view(16, 256))
    values = {}
    for power in (1.0, 2.5):
        torch.manual_seed(0)  # the same network for both
        model = GenerativeModel(
            {
                "model": {
                    "name": "caduceus",
                    "d_model": 16,
                    "n_layer": 1,
                    "time_conditioning": True,
                },
                "objective": {"name": "udlm", "eval_t_power": power},
                "data": {"name": "fasta", "max_length": 256},
                "ema": {"decay": 0.0},
            }
        )
        values[power] = np.array(
            [
                score_windows(
                    model.eval_objective, model.eval_backbone, windows, list(range(16)), 4, seed, 16
                )[0]
                / 256
                for seed in range(12)
            ]
        )  # (seeds, windows): nats per letter
    plain, weighted = values[1.0], values[2.5]
    sd_plain, sd_weighted = plain.std(0, ddof=1).mean(), weighted.std(0, ddof=1).mean()
    assert sd_weighted < 0.5 * sd_plain
    error = math.sqrt((plain.var(ddof=1) + weighted.var(ddof=1)) / plain.size)
    assert abs(plain.mean() - weighted.mean()) < 4 * error


# ----------------------------------------------------------------------------- laws


def test_the_posterior_formula_is_bayes_by_enumeration():
    process = udlm().process
    g = torch.Generator().manual_seed(0)
    for t, s in ((1.0, 0.5), (0.7, 0.69), (0.3, 0.0), (0.05, 0.01)):
        a_t, a_s = alpha_of(t), alpha_of(s)
        a_ts = a_t / a_s
        for x in (
            torch.eye(N, dtype=torch.float64)[2],
            torch.rand(N, generator=g, dtype=torch.float64),
        ):
            x = x / x.sum()
            for i in range(N):
                # Bayes: q(z_s = v | z_t = i) ∝ q(z_t = i | z_s = v) q(z_s = v | x)
                joint = torch.tensor(
                    [
                        (a_ts * (i == v) + (1 - a_ts) / N) * (a_s * x[v] + (1 - a_s) / N)
                        for v in range(N)
                    ]
                )
                times = torch.tensor(t, dtype=torch.float64), torch.tensor(s, dtype=torch.float64)
                got = process.posterior(x, torch.tensor(i), *times)
                torch.testing.assert_close(got, joint / joint.sum(), rtol=1e-12, atol=1e-14)


def test_corruption_marginals_are_alpha_x_plus_uniform():
    process = udlm().process
    g = torch.Generator().manual_seed(0)
    x = torch.tensor([[LETTERS[0], TOK.pad_id, LETTERS[2], LETTERS[3]]]).repeat(20000, 1)
    for t in (0.25, 0.9):
        z = process.states_at(x, torch.full((len(x),), t), g)
        assert (z[:, 1] == TOK.pad_id).all()  # [PAD] is never corrupted
        alpha = alpha_of(t)
        for position in (0, 2, 3):
            clean = LETTERS.index(int(x[0, position]))
            expected = torch.full((N,), (1 - alpha) / N, dtype=torch.float64)
            expected[clean] += alpha
            counts = torch.stack([(z[:, position] == letter).sum() for letter in LETTERS])
            assert counts.sum() == len(x)  # only letters are drawn
            stat = float(((counts - len(x) * expected) ** 2 / (len(x) * expected)).sum())
            assert chi2.sf(stat, N - 1) > 1e-4
            # power: the schedule alpha_t = 1 - t would be rejected by the same test
            wrong = torch.full((N,), t / N, dtype=torch.float64)
            wrong[clean] += 1 - t
            stat = float(((counts - len(x) * wrong) ** 2 / (len(x) * wrong)).sum())
            assert chi2.sf(stat, N - 1) < 1e-6


def test_pad_is_never_scored_and_what_the_network_says_there_does_not_count():
    law = toy_law(0)
    with_pad = torch.cat([IDS, torch.full((K, 1), TOK.pad_id)], dim=1)  # (K, L + 1)
    network = ExactDenoiser(law, with_pad)

    class Noisy(torch.nn.Module):  # the same network, with noise on the [PAD] column rows
        def __init__(self):
            super().__init__()
            self.inner = network

        def forward(self, z, sigma, **kw):
            out = self.inner(z, sigma)
            out[:, LENGTH] = torch.randn_like(out[:, LENGTH])
            return out

    objective = udlm()
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    nelbo, tokens = objective.loss(network, with_pad, g1)
    nelbo_noisy, _ = objective.loss(Noisy(), with_pad, g2)
    assert (tokens == LENGTH).all()
    torch.testing.assert_close(nelbo, nelbo_noisy)
    # and [PAD] reaches the network as it is at every time
    seen = []
    network.register_forward_hook(lambda m, args, out: seen.append(args[0][:, LENGTH].clone()))
    objective.loss(network, with_pad, g1)
    assert (seen[0] == TOK.pad_id).all()


# ----------------------------------------------------------------------------- sampling


def sample_counts(network, steps: int, n: int, seed: int, **request) -> torch.Tensor:
    objective = udlm()
    draws = objective.sample(
        network,
        guided.request(n, LENGTH, steps=steps, **request),
        torch.Generator().manual_seed(seed),
    )
    index = torch.stack([(draws == letter).long() * v for v, letter in enumerate(LETTERS)]).sum(0)
    assert torch.isin(draws, torch.tensor(LETTERS)).all()
    codes = (index * N ** torch.arange(LENGTH - 1, -1, -1)).sum(-1)  # SEQS order
    return torch.bincount(codes, minlength=K)


def chi2_pvalue(counts: torch.Tensor, law: torch.Tensor) -> float:
    expected = law * counts.sum()
    return float(chi2.sf(float(((counts - expected) ** 2 / expected).sum()), K - 1))


def test_the_sampler_with_the_exact_denoiser_samples_the_data_law():
    law = toy_law(0)
    counts = sample_counts(ExactDenoiser(law), steps=200, n=8000, seed=1)
    assert chi2_pvalue(counts, law) > 1e-3
    # power: the same sample size rejects a nearby wrong law ...
    assert chi2_pvalue(counts, 0.8 * law + 0.2 * toy_law(1)) < 1e-6
    # ... and a single step (each letter drawn apart: the product of marginals) is rejected
    one_step = sample_counts(ExactDenoiser(law), steps=1, n=8000, seed=1)
    assert chi2_pvalue(one_step, law) < 1e-6


def test_given_positions_are_kept_and_the_free_ones_read_them():
    """Infill with uniform noise is approximate: the network reads a given letter as it reads
    any letter of z_t (possibly noise), so the free letters follow a law between p(x_free) and
    p(x_free | x_given). Checked: the given letter is kept, and the free letter's law is much
    nearer the conditional than the unconditional marginal is (as if the given letter were
    ignored)."""
    law = toy_law(0)
    marginal = law.reshape(N, N).sum(0)  # (N,) of the second letter
    for first in range(N):
        template = torch.tensor([LETTERS[first], LETTERS[0]])
        given = torch.tensor([True, False])
        counts = sample_counts(
            ExactDenoiser(law), steps=100, n=2000, seed=2, template=template, given=given
        )
        chosen = SEQS[:, 0] == first
        assert counts[~chosen].sum() == 0
        conditional = law[chosen] / law[chosen].sum()  # (N,)
        drawn = counts[chosen].double() / counts.sum()
        far = float((marginal - conditional).abs().sum()) / 2
        assert float((drawn - conditional).abs().sum()) / 2 < 0.7 * far


def test_a_low_temperature_sharpens_x_theta():
    law = toy_law(0)
    counts = sample_counts(ExactDenoiser(law), steps=50, n=2000, seed=3, temperature=0.05)
    # the most likely sequence under the model's own steps dominates
    assert counts.max() > 0.5 * counts.sum()
    plain = sample_counts(ExactDenoiser(law), steps=50, n=2000, seed=3)
    assert plain.max() < 0.3 * plain.sum()


# ----------------------------------------------------------------------------- configuration


def test_udlm_needs_a_time_conditioned_model():
    with pytest.raises(ConfigError, match="time-conditioned"):
        udlm(time_conditioning=False)
    config = {
        "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "objective": {"name": "udlm"},
        "ema": {"decay": 0.0},
    }
    with pytest.raises(ConfigError, match="model.time_conditioning=true") as refused:
        GenerativeModel(config)
    assert "objective.time_conditioning=false" not in str(refused.value)  # not an option here
    config["model"]["time_conditioning"] = True
    model = GenerativeModel(config)
    assert model.objective.process.alphabet == LETTERS
    assert list(model.objective.samplers) == ["ancestral"]


def test_labels_reach_every_network_call_of_the_loss_and_sigma_is_minus_log_alpha():
    law = toy_law(0)
    calls = []

    class Recording(ExactDenoiser):
        def forward(self, z_ids, sigma, **kwargs):
            calls.append((sigma.clone(), kwargs))
            return super().forward(z_ids, sigma)

    x = IDS[:8]
    labels = torch.arange(8) % 3
    objective = udlm()
    g = torch.Generator().manual_seed(0)
    objective.loss(Recording(law), x, g, labels=labels)
    objective.loss(Recording(law), x, g)
    (sigma, with_labels), (_, without) = calls
    assert torch.equal(with_labels["labels"], labels) and without == {}
    t = objective.process.sample_t(8, torch.device("cpu"), torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        sigma.double(), -torch.log(1 - (1 - EPS) * t.double()), atol=1e-6, rtol=0
    )

"""Scoring draws each window's noise from streams of its own (``Noise.per_window``): a window's
score is a function of (its tokens, seed, t_samples) alone, not of the batch size or of the
other windows, and it is still an unbiased NELBO estimate, its K draws stratified in time."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from genodiff import backbones
from genodiff.evaluate import score_windows
from genodiff.objectives import UDLM
from genodiff.randomness.noise import Noise
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import d3pm, mdlm, plaid, sedd
from tests.test_generation_config import tiny as tiny_mdlm_model
from tests.test_udlm_exact_laws import Windows

TOK = DNATokenizer()
LENGTH = 24


def tiny(time_conditioning: bool = False) -> nn.Module:
    torch.manual_seed(0)
    return backbones.build(
        name="caduceus",
        d_model=16,
        n_layer=1,
        vocab_size=TOK.vocab_size,
        time_conditioning=time_conditioning,
    ).eval()


# Every objective that draws noise, with a backbone it drives (UDLM's is time-conditioned).
CASES = {
    "mdlm": (mdlm, tiny),
    "mdlm-discrete": (lambda: mdlm(num_steps=20), tiny),
    "sedd": (sedd, tiny),
    "d3pm": (lambda: d3pm(num_steps=50), tiny),
    "udlm": (lambda: UDLM(sample_ids=TOK.sample_ids), lambda: tiny(time_conditioning=True)),
    "plaid": (lambda: plaid(d_model=16, schedule_hidden=16), tiny),
}


def windows(count: int, seed: int = 0) -> Windows:
    """``count`` distinct windows of random A/C/G/T, the second with a [PAD] (N) tail."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(TOK.sample_ids)[torch.randint(4, (count, LENGTH), generator=g)]
    ids[1, -5:] = TOK.pad_id
    return Windows(ids)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_windows_score_is_the_same_alone_in_any_batch_and_order(name):
    make_objective, make_backbone = CASES[name]
    torch.manual_seed(1)
    objective, backbone = make_objective(), make_backbone()
    data = windows(5)

    def scores(indices: list[int], batch_size: int, seed: int = 4) -> np.ndarray:
        return score_windows(objective, backbone, data, indices, 3, seed, batch_size)[0]

    alone = np.concatenate([scores([i], 1) for i in range(5)])
    for batch_size in (1, 2, 5):
        np.testing.assert_allclose(scores([0, 1, 2, 3, 4], batch_size), alone, rtol=1e-6)
        np.testing.assert_allclose(scores([4, 3, 2, 1, 0], batch_size)[::-1], alone, rtol=1e-6)
    # the seed drives the draws: another seed scores every window differently
    assert (np.abs(scores([0, 1, 2, 3, 4], 5, seed=5) - alone) > 1e-6 * np.abs(alone)).all()


def test_processes_sharing_the_batches_give_the_one_process_numbers():
    """``genodiff eval --devices``: each process scores a block of the batches."""
    data, backbone = windows(5), tiny()
    whole = score_windows(mdlm(), backbone, data, list(range(5)), 2, 3, 2)[0]
    blocks = [range(0, 1), range(1, 3)]  # batches of 2 windows: [0, 1], then [2, 3], [4]
    shares = [
        score_windows(mdlm(), backbone, data, list(range(5)), 2, 3, 2, batches=b)[0] for b in blocks
    ]
    np.testing.assert_allclose(np.concatenate(shares), whole, rtol=1e-6)


def test_equal_windows_draw_equal_noise():
    data = windows(2)
    twice = Windows(torch.stack([data.ids[0], data.ids[1], data.ids[0]]))
    sums = score_windows(mdlm(), tiny(), twice, [0, 1, 2], 2, 0, 3)[0]
    assert sums[0] == sums[2] != sums[1]


def test_model_score_of_a_sequence_is_its_score_alone():
    model = tiny_mdlm_model()
    g = np.random.default_rng(0)
    samples = ["".join(g.choice(list("ACGT"), 40)) for _ in range(6)]
    together = model.score(samples, seed=3, t_samples=2)
    for i in (0, 3, 5):
        assert together[i] == pytest.approx(model.score([samples[i]], seed=3, t_samples=2)[0])
    assert model.score(samples[::-1], seed=3, t_samples=2, batch_size=4)[::-1] == pytest.approx(
        together
    )


def test_per_window_streams_give_a_windows_draws_a_shifted_lattice_of_times():
    ids = windows(3).ids  # (3, L)
    draws = 4
    u = Noise.per_window(7, ids, draws, "cpu").stratified(draws * 3).view(draws, 3)  # (K, B)
    # draw k of a window sits k/K after its draw 0 (mod 1): one time in each K-th of [0, 1)
    k = torch.arange(draws, dtype=torch.float64)[:, None]
    torch.testing.assert_close((u - u[0]) % 1.0, (k / draws).expand(draws, 3))
    assert len(set(u[0].tolist())) == 3  # each window its own shift
    # row k B + j is draw k of window j, from its own stream: another order of the windows
    # permutes the columns, and every row's uniforms are its own
    swapped = Noise.per_window(7, ids[[2, 0, 1]], draws, "cpu").stratified(draws * 3)
    assert torch.equal(swapped.view(draws, 3), u[:, [2, 0, 1]])
    masks = Noise.per_window(7, ids, draws, "cpu").uniform(draws * 3, LENGTH)
    assert len({tuple(row.tolist()) for row in masks}) == draws * 3
    other_seed = Noise.per_window(8, ids, draws, "cpu").stratified(draws * 3)
    assert not torch.equal(other_seed, u.flatten())


class CountsMasks(nn.Module):
    """Logits ``table[m]`` at every position, m the number of [MASK] tokens in the row: a
    prediction that depends on the noise level, so the NELBO integrand varies with t."""

    def __init__(self, length: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = nn.Parameter(2 * torch.randn(length + 1, TOK.vocab_size, generator=g))

    def forward(self, ids: torch.Tensor, sigma: torch.Tensor | None = None) -> torch.Tensor:
        masks = (ids == TOK.mask_id).sum(-1)  # (B,)
        return self.table[masks][:, None, :].expand(-1, ids.shape[1], -1)  # (B, L, V)


def counts_masks_nelbo(model: CountsMasks, x0: torch.Tensor, eps: float, t_min: float) -> float:
    """MDLM's continuous-time NELBO of ``x0`` (L,) under ``model``, by quadrature: with m of
    the L tokens masked at t each masked token costs -log pi_m(x0) (pi_m: the softmax of
    table[m] without [MASK]), so E[sum | t] = sum_m Binom(m; L, p_t) (m / L) C_m, C_m the
    cost summed over the L tokens; weighted by 1/t with p_t = (1 - eps) t this is
    (1 - eps) sum_{m >= 1} Binom(m - 1; L - 1, p_t) C_m, a polynomial in t, averaged over
    t ~ U[t_min, 1]."""
    length = len(x0)
    logits = model.table.detach().double().clone()
    logits[:, TOK.mask_id] = -math.inf
    costs = -logits.log_softmax(-1)[:, x0].sum(-1).numpy()  # (L + 1,): C_m
    nodes, weights = np.polynomial.legendre.leggauss(32)
    t = t_min + (1 - t_min) * (nodes + 1) / 2  # on [t_min, 1]
    p = (1 - eps) * t
    total = np.zeros_like(t)
    for m in range(1, length + 1):
        binomial = math.comb(length - 1, m - 1) * p ** (m - 1) * (1 - p) ** (length - m)
        total += binomial * costs[m]
    return float((1 - eps) * (weights * total).sum() / 2)  # the mean over [t_min, 1]


def test_the_per_window_mdlm_score_is_unbiased():
    """Over 400 seeds a window's score (4 draws, stratified or iid times) averages to the NELBO
    computed by quadrature, within Monte-Carlo error. Times in [0.3, 1] (sampling_eps) keep
    the 1/t weight's tail short, so that the standard error is itself well estimated."""
    model = CountsMasks(8)
    g = torch.Generator().manual_seed(2)
    x0 = torch.tensor(TOK.sample_ids)[torch.randint(4, (8,), generator=g)]
    data = Windows(x0[None])
    expected = counts_masks_nelbo(model, x0, eps=1e-3, t_min=0.3)
    for stratified in (True, False):
        objective = mdlm(low_discrepancy=stratified, sampling_eps=0.3)
        values = np.array(
            [score_windows(objective, model, data, [0], 4, seed, 1)[0][0] for seed in range(400)]
        )
        error = values.std(ddof=1) / math.sqrt(len(values))
        assert abs(values.mean() - expected) < 4 * error
        assert error < 0.015 * expected  # the test can see a bias of a few percent


def draw_times(name: str, objective, ids: torch.Tensor, noise: Noise) -> torch.Tensor:
    """The times (rows,) in [0, 1] that ``objective``'s loss draws for ``ids`` from ``noise``,
    mapped back to the uniform u they come from."""
    if name == "plaid":
        return objective.sample_t(len(ids), ids.device, noise)
    process = objective.process
    t, _ = process.draw_states(ids, noise)
    if process.num_steps:  # t = (floor(u T) + 1) / T: u in [t - 1/T, t)
        return t - 0.5 / process.num_steps
    return (t - process.sampling_eps) / (1 - process.sampling_eps)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_of_a_windows_draws_has_its_time_in_its_own_stratum(name):
    objective = CASES[name][0]()
    ids = windows(3).ids  # (B, L)
    draws = 5  # divides the discrete cases' T: a step never straddles two strata
    noise = Noise.per_window(0, ids, draws, "cpu")
    u = draw_times(name, objective, ids.repeat(draws, 1), noise).double().view(draws, 3)
    strata = (u * draws).floor().long().sort(dim=0).values  # (K, B)
    assert torch.equal(strata, torch.arange(draws)[:, None].expand(draws, 3))
    assert len(set(u.flatten().tolist())) > draws  # the windows' times differ


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_per_window_score_averages_to_the_per_batch_estimators(name):
    """The mean over 150 seeds of the per-window score of 3 windows equals, within Monte-Carlo
    error, that of one generator drawing the noise of the whole batch (training's draws, the
    objective in eval mode): the same estimator, other random numbers."""
    make_objective, make_backbone = CASES[name]
    torch.manual_seed(1)
    objective, backbone = make_objective().eval(), make_backbone()
    data, draws = windows(3), 2
    ids = data.ids.repeat(draws, 1)  # (K B, L)
    per_window, per_batch = [], []
    with torch.no_grad():
        for seed in range(150):
            per_window.append(
                score_windows(objective, backbone, data, [0, 1, 2], draws, seed, 3)[0]
            )
            generator = torch.Generator().manual_seed(seed)
            sums, _ = objective.loss(backbone, ids, generator)  # (K B,)
            per_batch.append(sums.double().view(draws, 3).mean(0).numpy())
    new, old = np.sum(per_window, axis=1), np.sum(per_batch, axis=1)  # (seeds,): the totals
    error = math.sqrt((new.var(ddof=1) + old.var(ddof=1)) / len(new))
    assert abs(new.mean() - old.mean()) < 4 * error

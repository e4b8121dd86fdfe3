"""Masked-diffusion samplers against an oracle with known conditionals and exact marginals."""

import itertools
import math
from functools import partial

import pytest
import torch
from scipy.stats import chi2
from torch import nn

from genodiff.samplers.categorical import sample_categorical
from genodiff.samplers.masked import unmasking
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.semi_ar import windows
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import ar, d3pm, mdlm, plaid, sedd

TOK = DNATokenizer()
BASES = torch.tensor(TOK.base_ids)  # A C G T ids
SEQ_LEN = 3
NUM = 6000  # samples per Monte-Carlo test
P_MIN = 1e-3  # reject a fit below this p-value (fixed seeds: deterministic outcomes)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small tensors: one intra-op thread is faster than two on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def joint_table(seed: int = 0) -> torch.Tensor:
    """A strongly correlated distribution over the 4^3 sequences (float64, sums to 1)."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(4**SEQ_LEN, generator=g, dtype=torch.float64) ** 3 + 0.02
    return weights / weights.sum()


CELLS = torch.tensor(list(itertools.product(range(4), repeat=SEQ_LEN)))  # (64, L) base index


class Oracle(nn.Module):
    """Returns log p(x0_i | the unmasked tokens of x) of the joint table, found by enumeration
    once for each of the 5^L inputs (a base or [MASK] per position): the sequences consistent
    with the unmasked tokens, weighted by the table, summed per position and base. Counts the
    rows it is called on."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # the samplers read the device from it
        self.rows = 0
        states = torch.tensor(list(itertools.product(range(5), repeat=SEQ_LEN)))  # 4 = [MASK]
        fits = (states[:, None, :] == CELLS) | (states[:, None, :] == 4)  # (125, 64, L)
        weight = fits.all(-1) * table  # (125, 64)
        one_hot = nn.functional.one_hot(CELLS, 4).double()  # (64, L, 4)
        posterior = torch.einsum("sc,clv->slv", weight, one_hot)  # (125, L, 4) unnormalised
        logits = torch.full((len(states), SEQ_LEN, 16), -1e9, dtype=torch.float64)
        logits[..., BASES] = posterior.clamp_min(1e-300).log()
        self.register_buffer("logits", logits.float())

    def forward(self, input_ids, sigma=None):
        self.rows += input_ids.shape[0]
        digit = torch.where(input_ids == TOK.mask_id, 4, input_ids - BASES[0])  # (B, L)
        state = (digit * 5 ** torch.arange(SEQ_LEN - 1, -1, -1)).sum(-1)  # (B,)
        return self.logits[state]


class FixedDistribution(nn.Module):
    """The same base distribution at every position, whatever the input."""

    def __init__(self, probs: dict[int, float]) -> None:
        super().__init__()
        logits = torch.full((16,), -1e9)
        for token, p in probs.items():
            logits[token] = math.log(p)
        self.logits = nn.Parameter(logits)

    def forward(self, input_ids, sigma=None):
        return self.logits.expand(*input_ids.shape, -1)


def draw(model, sampler, n=NUM, length=SEQ_LEN, seed=0, objective=None, **options):
    objective = objective or mdlm(sampling_eps=1e-4)
    request = SampleRequest(num_samples=n, length=length, sampler=sampler, **options)
    return objective.sample(model, request, noise=torch.Generator().manual_seed(seed))


def base_index(samples):
    """(n, L) token ids -> base index 0..3 (AssertionError if anything else was drawn)."""
    index = samples - TOK.base_ids[0]
    assert ((index >= 0) & (index < 4)).all()
    return index


def chi_square_p(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    assert expected.min() >= 5  # the chi-square approximation holds
    stat = ((counts - expected) ** 2 / expected).sum().item()
    return float(chi2.sf(stat, counts.numel() - 1))


def exact_marginals(table):
    return torch.einsum("c,clv->lv", table, nn.functional.one_hot(CELLS, 4).double())  # (L, 4)


def joint_counts(samples):
    index = base_index(samples)
    cell = (index * 4 ** torch.arange(SEQ_LEN - 1, -1, -1)).sum(-1)  # matches CELLS order
    return torch.bincount(cell, minlength=4**SEQ_LEN).double()


@pytest.mark.parametrize(
    ("sampler", "steps"), [("ancestral", 256), ("cached", 256), ("first-hitting", 1)]
)
def test_marginals_match_the_exact_ones(sampler, steps):
    table = joint_table()
    samples = draw(Oracle(table), sampler, steps=steps)
    index = base_index(samples)
    marginals = exact_marginals(table)
    for position in range(SEQ_LEN):
        counts = torch.bincount(index[:, position], minlength=4).double()
        assert chi_square_p(counts, marginals[position]) > P_MIN
    # Power: the same counts are far from the marginals of another joint table.
    other = exact_marginals(joint_table(seed=1))
    assert chi_square_p(torch.bincount(index[:, 0], minlength=4).double(), other[0]) < 1e-6


def test_first_hitting_samples_the_exact_joint():
    table = joint_table()
    samples = draw(Oracle(table), "first-hitting")
    assert chi_square_p(joint_counts(samples), table) > P_MIN
    # Power: one ancestral step unmasks all tokens independently (product of the marginals),
    # which the same test rejects for this correlated table.
    independent = draw(Oracle(table), "ancestral", steps=1)
    assert chi_square_p(joint_counts(independent), table) < 1e-6


def test_cached_equals_ancestral_with_fewer_network_rows():
    table = joint_table()
    plain, reused = Oracle(table), Oracle(table)
    a = draw(plain, "ancestral", n=500, length=SEQ_LEN, steps=64, seed=3)
    b = draw(reused, "cached", n=500, length=SEQ_LEN, steps=64, seed=3)
    assert torch.equal(a, b)
    # Each row changes in at most L steps (+1 first call, +1 final noise removal).
    assert reused.rows <= 500 * (SEQ_LEN + 2) < plain.rows


def test_cached_refuses_a_time_conditioned_model():
    objective = mdlm(time_conditioning=True)
    with pytest.raises(ValueError, match="time conditioning"):
        draw(Oracle(joint_table()), "cached", n=2, objective=objective)


def test_first_hitting_makes_at_most_one_call_per_token():
    model = FixedDistribution({7: 0.25, 8: 0.25, 9: 0.25, 10: 0.25})
    calls = []
    forward = model.forward
    model.forward = lambda ids, sigma=None: calls.append(ids.shape[0]) or forward(ids, sigma)
    samples = draw(model, "first-hitting", n=4, length=50, objective=mdlm(sampling_eps=1e-3))
    assert not (samples == TOK.mask_id).any()
    assert sum(calls) <= 4 * 50
    assert len(calls) <= 50 + 1  # iterations: one token per running row, then the final step


def make_constraint(length, given_positions, letters):
    template = torch.full((length,), TOK.mask_id)
    given = torch.zeros(length, dtype=torch.bool)
    for position, letter in zip(given_positions, letters, strict=True):
        template[position] = TOK.token_to_id[letter]
        given[position] = True
    return template, given


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting", "semi-ar"])
def test_given_positions_are_never_changed(sampler):
    # The model puts all its mass on T, so any given non-T base that survives was kept.
    model = FixedDistribution({TOK.token_to_id["T"]: 1.0})
    prefix = [0, 1, 2, 3]
    infill = [10, 17, 29]
    template, given = make_constraint(30, prefix + infill, "ACGAGCA")
    samples = draw(
        model, sampler, n=5, length=30, steps=16, template=template, given=given, block=8, stride=3
    )
    assert torch.equal(samples[:, given], template[given].expand(5, -1))
    assert (samples[:, ~given] == TOK.token_to_id["T"]).all()


def test_conditional_on_a_given_token_follows_the_oracle():
    # Fix position 0 to A: the other positions must follow p(x1, x2 | x0 = A).
    table = joint_table()
    template, given = make_constraint(SEQ_LEN, [0], "A")
    samples = draw(Oracle(table), "first-hitting", template=template, given=given)
    conditional = table.view(4, 16)[0] / table.view(4, 16)[0].sum()
    counts = joint_counts(samples).view(4, 16)
    assert counts[1:].sum() == 0
    assert chi_square_p(counts[0], conditional) > P_MIN


def test_semi_ar_length_and_overlap_consistency():
    model = FixedDistribution({7: 0.4, 8: 0.3, 9: 0.2, 10: 0.1})
    inputs = []
    forward = model.forward
    model.forward = lambda ids, sigma=None: inputs.append(ids.clone()) or forward(ids, sigma)
    block, stride, length = 8, 3, 20
    samples = draw(model, "semi-ar", n=6, length=length, steps=8, block=block, stride=stride)
    assert samples.shape == (6, length)
    assert not (samples == TOK.mask_id).any()
    # The first call of each window is the only one in which every new token is masked
    # (cached: later calls see only rows that changed). Its kept prefix is the output's.
    keep = block - stride
    starts = [0] + [block - keep + i * stride for i in range(math.ceil((length - block) / stride))]
    firsts = [ids for ids in inputs if (ids[:, keep:] == TOK.mask_id).all() and len(ids) == 6]
    assert len(firsts) == len(starts) == 5
    assert (firsts[0] == TOK.mask_id).all()
    for ids, start in zip(firsts[1:], starts[1:], strict=True):
        assert torch.equal(ids[:, :keep], samples[:, start : start + keep])
        assert ids.shape[1] == min(block, length - start)


def test_semi_ar_windows_and_bad_block_stride():
    assert windows(20, 8, 3) == [(0, 8), (3, 11), (6, 14), (9, 17), (12, 20)]
    assert windows(4096, 1024, 512)[-1] == (3072, 4096)
    assert windows(5, 8, 4) == [(0, 5)]
    with pytest.raises(ValueError, match="needs a block and a stride") as caught:
        windows(20, None, 3)
    assert caught.value.parameter == ("block", "stride")
    with pytest.raises(ValueError, match="stride must be in") as caught:
        windows(20, 8, 8)
    assert caught.value.parameter == ("stride", "block")
    with pytest.raises(ValueError, match="block must be >= 2 tokens, got 1") as caught:
        windows(20, 1, 1)
    assert caught.value.parameter == "block"
    with pytest.raises(ValueError, match="stride must be in"):
        windows(20, 8, 0)


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting"])
def test_top_p_keeps_only_the_nucleus(sampler):
    # Nucleus 0.7 of (0.5, 0.3, 0.15, 0.05) is {A, C}: mass before C is 0.5 < 0.7, before G 0.8.
    model = FixedDistribution({7: 0.5, 8: 0.3, 9: 0.15, 10: 0.05})
    samples = draw(model, sampler, n=200, length=20, steps=32, top_p=0.7)
    counts = torch.bincount(samples.flatten(), minlength=16).double()
    assert counts[9] == counts[10] == 0
    assert chi_square_p(counts[7:9], torch.tensor([5 / 8, 3 / 8], dtype=torch.float64)) > P_MIN
    # Power: without top-p G and T appear.
    assert (draw(model, sampler, n=200, length=20, steps=32) >= 9).any()


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting"])
def test_low_temperature_approaches_argmax(sampler):
    model = FixedDistribution({7: 0.2, 8: 0.4, 9: 0.25, 10: 0.15})
    cold = draw(model, sampler, n=50, length=20, steps=32, temperature=0.02)
    assert (cold == 8).all()  # (0.25/0.4)^(1/0.02) ~ 6e-11 per token
    warm = draw(model, sampler, n=50, length=20, steps=32)
    assert (warm != 8).float().mean() > 0.5  # at T = 1 C is drawn only 40% of the time


SAMPLERS_OF_EVERY_MASKED_OBJECTIVE = [
    (mdlm, "ancestral"),
    (mdlm, "cached"),
    (mdlm, "first-hitting"),
    (sedd, "analytic"),
    (sedd, "euler"),
]


@pytest.mark.parametrize(("objective", "sampler"), SAMPLERS_OF_EVERY_MASKED_OBJECTIVE)
def test_a_huge_temperature_flattens_over_the_drawable_ids_only(objective, sampler):
    # p^(1/T) tends to the uniform law on p's support, A/C/G/T: the ids the prediction removes
    # ([MASK], specials, N: a finite -1e6) have probability 0 at every temperature. Dividing
    # -1e6 by T = 1e6 made them as likely as the bases.
    model = FixedDistribution({7: 0.7, 8: 0.2, 9: 0.07, 10: 0.03})
    made = objective(sample_ids=TOK.sample_ids, sampling_eps=1e-3)
    samples = draw(model, sampler, n=100, length=20, steps=16, objective=made, temperature=1e6)
    counts = torch.bincount(base_index(samples).flatten(), minlength=4).double()
    assert chi_square_p(counts, torch.full((4,), 0.25, dtype=torch.float64)) > P_MIN


@pytest.mark.parametrize(("objective", "sampler"), SAMPLERS_OF_EVERY_MASKED_OBJECTIVE)
def test_a_tiny_temperature_takes_the_most_likely_id(objective, sampler):
    # Any temperature > 0 is accepted; log-probabilities divided by 1e-310 overflowed to -inf
    # everywhere, a NaN distribution, reported as a broken network (NonFiniteOutputError).
    model = FixedDistribution({7: 0.2, 8: 0.4, 9: 0.25, 10: 0.15})
    made = objective(sample_ids=TOK.sample_ids, sampling_eps=1e-3)
    cold = draw(model, sampler, n=4, length=10, steps=8, objective=made, temperature=1e-310)
    assert (cold == 8).all()


class TimeRecorder(FixedDistribution):
    """Uniform over A/C/G/T; records the times t (from sigma) and the inputs of every call."""

    def __init__(self) -> None:
        super().__init__({token: 0.25 for token in TOK.base_ids})
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, input_ids, sigma=None):
        # loglinear: mask probability 1 - exp(-sigma) = (1 - eps) t, eps = 1e-3.
        self.calls.append((-torch.expm1(-sigma.double()) / (1 - 1e-3), input_ids.clone()))
        return super().forward(input_ids, sigma)


def test_ancestral_unmasking_follows_the_schedule():
    # A token masked at t = 1 is still masked at t with probability p(t) / p(1) = t.
    model, n, length = TimeRecorder(), 100, 40
    objective = mdlm(time_conditioning=True)
    draw(model, "ancestral", n=n, length=length, steps=8, objective=objective)
    for t, ids in model.calls[:-1]:  # the last call is the final noise removal at eps
        masked = (ids == TOK.mask_id).double().mean()
        t = t[0].item()
        assert abs(masked - t) <= 5 * math.sqrt(t * (1 - t) / (n * length)) + 1e-9


def test_unmasking_inverts_each_uniform_as_the_two_category_draw():
    # ``unmasking`` skips the cumulative sum: it must unmask exactly where the float64 inverse
    # CDF over (stay, unmask) draws the second category, boundaries and zero odds included.
    g = torch.Generator().manual_seed(0)
    p_t, p_s = torch.tensor(0.7, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64)
    log_factor = torch.randn(4000, generator=g, dtype=torch.float64) * 3  # guided odds
    u = torch.rand(4000, generator=g, dtype=torch.float64)
    stay = p_s * torch.exp(-log_factor.clamp_min(0.0))
    go = (p_t - p_s) * torch.exp(log_factor.clamp_max(0.0))
    u[:100] = stay[:100] / (stay[:100] + go[:100])  # on the boundary itself
    expected = sample_categorical(torch.stack((stay, go), dim=-1), u=u[:, None]) == 1
    assert torch.equal(unmasking(p_t, p_s, log_factor, u), expected)
    # unguided odds (p_t - p_s) : p_s: the unmasking frequency is (p_t - p_s) / p_t
    unguided = unmasking(p_t, p_s, torch.zeros(4000, dtype=torch.float64), u)
    share = unguided.double().mean().item()
    assert abs(share - 4 / 7) <= 5 * math.sqrt(4 / 7 * 3 / 7 / 4000)
    # nothing left to unmask (p_t = p_s = 0): the draw's clamp gives the last category
    zero = torch.zeros((), dtype=torch.float64)
    assert unmasking(zero, zero, torch.zeros(3, dtype=torch.float64), u[:3]).all()


def test_first_hitting_event_times_are_the_forward_masking_times():
    # Under the forward process each token's masking time has CDF p(t) / p(1) = t: uniform.
    # Every first-hitting call happens at one such time, so the pooled times are uniform.
    model = TimeRecorder()
    draw(model, "first-hitting", n=100, length=40, objective=mdlm(time_conditioning=True))
    times = torch.cat([t for t, _ in model.calls])
    times = times[times > 1e-3 + 1e-9]  # drop the final noise-removal call at eps
    assert len(times) > 3900  # ~ all 4000 tokens unmask by an event above eps
    counts = torch.histc(times, bins=10, min=0.0, max=1.0)
    assert chi_square_p(counts, torch.full((10,), 0.1, dtype=torch.float64)) > P_MIN


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting", "semi-ar"])
def test_d3pm_uses_the_same_samplers(sampler):
    probs = {7: 0.4, 8: 0.3, 9: 0.2, 10: 0.1}
    samples = draw(
        FixedDistribution(probs), sampler, n=100, length=20, steps=16, objective=d3pm(),
        block=8, stride=4,
    )  # fmt: skip
    counts = torch.bincount(samples.flatten(), minlength=16).double()
    assert counts[7:11].sum() == samples.numel()
    assert chi_square_p(counts[7:11], torch.tensor(list(probs.values()))) > P_MIN


@pytest.mark.parametrize(
    ("objective", "sampler", "recorded"),
    [
        (mdlm, "ancestral", 5),
        (mdlm, "cached", 5),
        (mdlm, "semi-ar", 5),
        (mdlm, "first-hitting", None),  # one token per network call, whatever --steps says
        (d3pm, "first-hitting", None),
        (sedd, "euler", 5),
        (partial(plaid, d_model=8), "ancestral", 5),
        (ar, "ancestral", None),  # one position per network call
    ],
)
def test_provenance_records_steps_only_for_samplers_that_take_them(objective, sampler, recorded):
    windows = {"block": 4, "stride": 2} if sampler == "semi-ar" else {}  # semi-ar needs them
    request = SampleRequest(num_samples=1, length=8, steps=5, sampler=sampler, **windows)
    assert objective().steps_used(request) == recorded

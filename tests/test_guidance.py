"""Guided sampling (genodiff/guidance.py) against exact laws of a toy joint p(x, y).

The toy: two classes y with p(y) = (0.3, 0.7) and a strongly correlated p(x | y) over the 4^3
sequences x of 3 bases (``joint_table`` of the sampler tests, one seed per class), so p(x) =
sum_y p(y) p(x | y). Every law below is computed here by enumeration, independently of the
code under test: the exact x0 posteriors p(x0_l | z_t, y) and p(x0_l | z_t) that a perfect
conditional network returns, the exact noisy classifier p(y | z_t), the exact next-token
conditionals of an AR model.
"""

import itertools
import math

import pytest
import torch
from torch import nn

from genodiff.backbones.capabilities import Capabilities
from genodiff.guidance import Guidance
from tests import guided
from tests.dna_objectives import ar, d3pm, mdlm, plaid, sedd
from tests.test_samplers import (
    BASES,
    CELLS,
    NUM,
    P_MIN,
    SEQ_LEN,
    TOK,
    Oracle,
    chi_square_p,
    joint_counts,
    joint_table,
)

P_Y = torch.tensor([0.3, 0.7], dtype=torch.float64)
CONDITIONALS = torch.stack([joint_table(seed=2), joint_table(seed=3)])  # (2, 64): p(x | y)
MARGINAL = P_Y @ CONDITIONALS  # (64,): p(x)
CAPS = Capabilities(vocab_size=16, class_conditioning=True)
ONE_HOT = nn.functional.one_hot(CELLS, 4).double()  # (64, L, 4)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class ConditionalOracle(nn.Module):
    """A perfect class-conditional denoiser: labels y (B,) -> the exact p(x0_l | z_t, y) of
    ``tables[y]``; the null label (None, or C) -> those of ``null_table``."""

    def __init__(self, tables: torch.Tensor, null_table: torch.Tensor) -> None:
        super().__init__()
        self.capabilities = CAPS
        self.oracles = nn.ModuleList([Oracle(t) for t in (*tables, null_table)])
        self.anchor = nn.Parameter(torch.zeros(()))
        self.calls: list[str] = []

    def forward(self, input_ids, sigma=None, labels=None):
        self.calls.append("null" if labels is None else "label")
        if labels is None:
            labels = torch.full((len(input_ids),), len(self.oracles) - 1)
        out = torch.stack([oracle(input_ids) for oracle in self.oracles])  # (C + 1, B, L, V)
        return out[labels, torch.arange(len(input_ids))]


def pooled_chi_square_p(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """``chi_square_p`` with the cells expected below 5 pooled into one (peaked laws)."""
    small = probs * counts.sum() < 5
    if not small.any():
        return chi_square_p(counts, probs)
    pooled_counts = torch.cat([counts[~small], counts[small].sum()[None]])
    return chi_square_p(pooled_counts, torch.cat([probs[~small], probs[small].sum()[None]]))


def draw(model, sampler, objective=None, n=NUM, seed=0, length=SEQ_LEN, **options):
    objective = objective or mdlm(sampling_eps=1e-4)
    request = guided.request(n, length, sampler=sampler, **options)
    return objective.sample(model, request, noise=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------ D-CFG: gamma = 0 and 1


@pytest.mark.parametrize(
    ("objective", "sampler", "steps"),
    [
        (mdlm(sampling_eps=1e-4), "first-hitting", 1),
        (mdlm(sampling_eps=1e-4), "ancestral", 1000),
        (d3pm(sampling_eps=1e-4), "first-hitting", 1),
    ],
)
@pytest.mark.parametrize("label", [0, 1])
def test_cfg_at_gamma_one_samples_the_class_and_at_zero_the_marginal(
    objective, sampler, steps, label
):
    model = ConditionalOracle(CONDITIONALS, MARGINAL)
    for gamma, law, wrong in ((1.0, CONDITIONALS[label], MARGINAL), (0.0, MARGINAL, None)):
        samples = draw(model, sampler, objective, steps=steps, label=label, guidance=gamma)
        counts = joint_counts(samples)
        assert chi_square_p(counts, law) > P_MIN
        # Power: the same test rejects the other law.
        assert chi_square_p(counts, wrong if wrong is not None else CONDITIONALS[label]) < 1e-6


def sites(seed: int) -> torch.Tensor:
    """(L, 4) per-position base distributions."""
    g = torch.Generator().manual_seed(seed)
    table = torch.rand(SEQ_LEN, 4, generator=g, dtype=torch.float64) + 0.1
    return table / table.sum(-1, keepdim=True)


def product(site_table: torch.Tensor) -> torch.Tensor:
    """The law (64,) of independent positions with these site distributions (L, 4)."""
    return site_table[torch.arange(SEQ_LEN), CELLS].prod(-1)


# A toy whose class models and null model have independent positions: their exact x0
# posteriors are the site distributions whatever z_t, so D-CFG at any gamma draws each site
# independently from p_l(v | y)^gamma p_l(v)^(1 - gamma), renormalised.
CLASS_SITES = torch.stack([sites(5), sites(6)])  # (2, L, 4)
NULL_SITES = CLASS_SITES.mean(0)  # (L, 4)


@pytest.mark.parametrize(("sampler", "steps"), [("first-hitting", 1), ("ancestral", 200)])
def test_cfg_at_gamma_two_tempers_each_site(sampler, steps):
    model = ConditionalOracle(torch.stack([product(s) for s in CLASS_SITES]), product(NULL_SITES))
    index = draw(model, sampler, steps=steps, label=1, guidance=2.0) - BASES[0]  # (n, L)
    tempered = CLASS_SITES[1] ** 2 / NULL_SITES
    tempered = tempered / tempered.sum(-1, keepdim=True)  # (L, 4)
    for position in range(SEQ_LEN):
        counts = torch.bincount(index[:, position], minlength=4).double()
        assert chi_square_p(counts, tempered[position]) > P_MIN
        assert chi_square_p(counts, CLASS_SITES[1, position]) < 1e-6  # power: not p(x | y)
    assert {"label", "null"} <= set(model.calls)  # two network calls per step


# ------------------------------------------------------------------ AR: exact tempering


class ExactAR(nn.Module):
    """A perfect causal model of the toy: reads [BOS] x_0 .. x_{i-1} and returns at the last
    position the exact next-token logits log p(x_i | x_<i, y) (the null label: of p(x)).
    With ``recurrent`` it also steps one token at a time through a cache of what it read."""

    def __init__(self, recurrent: bool) -> None:
        super().__init__()
        self.capabilities = Capabilities(
            vocab_size=16, causal=True, recurrent_step=recurrent, class_conditioning=True
        )
        self.anchor = nn.Parameter(torch.zeros(()))
        self.tables = torch.cat([CONDITIONALS, MARGINAL[None]])  # (3, 64)

    def next_logits(self, read: torch.Tensor, labels) -> torch.Tensor:
        """read (B, i) base ids -> (B, 16) log p(x_i | read, label)."""
        labels = torch.full((len(read),), 2) if labels is None else labels
        prefix = read - BASES[0]  # (B, i)
        fits = (CELLS[None, :, : read.shape[1]] == prefix[:, None]).all(-1)  # (B, 64)
        weight = fits * self.tables[labels]  # (B, 64)
        nxt = torch.einsum("bc,cv->bv", weight, ONE_HOT[:, read.shape[1]])  # (B, 4)
        logits = torch.full((len(read), 16), -1e9, dtype=torch.float64)
        logits[:, BASES] = (nxt / nxt.sum(-1, keepdim=True)).log()
        return logits.float()

    def forward(self, input_ids, sigma=None, labels=None):
        assert (input_ids[:, 0] == TOK.bos_id).all()
        out = torch.zeros(*input_ids.shape, 16)
        out[:, -1] = self.next_logits(input_ids[:, 1:], labels)
        return out

    def allocate_inference_cache(self, n):
        return []  # the ids read so far, one (n,) tensor per step

    def step(self, input_ids, cache, labels=None):
        cache.append(input_ids.reshape(-1))  # cache[0] is [BOS]
        read = torch.stack(cache, dim=1)[:, 1:]  # (n, i)
        return self.next_logits(read, labels)


def tempered_chain(gamma: float, label: int) -> torch.Tensor:
    """The law (64,) of the product over positions of renormalised
    p(x_i | x_<i, y)^gamma p(x_i | x_<i)^(1 - gamma), by enumeration."""
    law = torch.zeros(4**SEQ_LEN, dtype=torch.float64)
    for cell, seq in enumerate(itertools.product(range(4), repeat=SEQ_LEN)):
        prob = 1.0
        for i in range(SEQ_LEN):
            fits = (CELLS[:, :i] == torch.tensor(seq[:i])).all(-1)
            cond = torch.stack([(CONDITIONALS[label] * fits * (CELLS[:, i] == v)).sum()
                                for v in range(4)])  # fmt: skip
            null = torch.stack([(MARGINAL * fits * (CELLS[:, i] == v)).sum() for v in range(4)])
            site = (cond / cond.sum()) ** gamma * (null / null.sum()) ** (1 - gamma)
            prob *= float(site[seq[i]] / site.sum())
        law[cell] = prob
    return law


@pytest.mark.parametrize("recurrent", [False, True])
def test_ar_cfg_samples_the_renormalised_tempered_chain(recurrent):
    samples = draw(ExactAR(recurrent), None, ar(), label=0, guidance=2.0)
    counts = joint_counts(samples)
    assert pooled_chi_square_p(counts, tempered_chain(2.0, 0)) > P_MIN
    assert pooled_chi_square_p(counts, tempered_chain(1.0, 0)) < 1e-6  # power: not p(x | y)
    # gamma = 1 (one call with the label) is p(x | y) itself
    plain = joint_counts(draw(ExactAR(recurrent), None, ar(), n=3000, label=0))
    assert pooled_chi_square_p(plain, CONDITIONALS[0]) > P_MIN


# ------------------------------------------------------------------ D-CBG: exact classifier


class ExactNoisyClassifier:
    """p(y | z_t) of the toy, by enumeration: z_t says only which bases are revealed (the
    masking does not depend on the data), so p(y | z_t) is proportional to p(y) times the mass
    p(x | y) of the sequences that agree with the revealed bases. Implements the
    NoisyClassifierGuide protocol's ``tilt`` exactly (one lookup per position and value)."""

    class_names = ["first", "second"]
    tokenizer_name = "dna"

    def __init__(self) -> None:
        states = torch.tensor(list(itertools.product(range(5), repeat=SEQ_LEN)))  # 4 = [MASK]
        fits = ((states[:, None, :] == CELLS) | (states[:, None, :] == 4)).all(-1)  # (125, 64)
        joint = (fits.double() @ CONDITIONALS.T) * P_Y  # (125, 2)
        self.log_posterior = (joint / joint.sum(-1, keepdim=True)).log()  # (125, 2)
        self.calls = 0

    def log_p(self, x: torch.Tensor, label: int) -> torch.Tensor:
        digit = torch.where(x == TOK.mask_id, 4, x - BASES[0])  # (..., L)
        state = (digit * 5 ** torch.arange(SEQ_LEN - 1, -1, -1)).sum(-1)
        return self.log_posterior[state, label]

    def tilt(self, x, label, where, exact, t=None):
        self.calls += 1
        out = torch.zeros(*x.shape, 16)
        for position in range(SEQ_LEN):
            for base in BASES:
                changed = x.clone()
                changed[:, position] = base
                delta = self.log_p(changed, label) - self.log_p(x, label)  # (n,)
                out[:, position, base] = torch.where(where[:, position], delta, 0.0).float()
        return out

    def next_token_scores(self, prefix, candidates, label):
        raise AssertionError("not used by masked diffusion")


class Unconditional(Oracle):
    capabilities = Capabilities(vocab_size=16)


def test_cbg_with_the_exact_classifier_and_denoiser_samples_the_class():
    classifier = ExactNoisyClassifier()
    options = {"classifier": classifier, "classifier_form": "exact"}
    for label in (0, 1):
        samples = draw(Unconditional(MARGINAL), "first-hitting", label=label, **options)
        counts = joint_counts(samples)
        assert chi_square_p(counts, CONDITIONALS[label]) > P_MIN
        assert chi_square_p(counts, MARGINAL) < 1e-6  # power: the unguided law is rejected
    assert classifier.calls > 0


# ------------------------------------------------------------------ cached, masks, refusals


@pytest.mark.parametrize(
    "options",
    [
        {"label": 1, "guidance": 2.0, "guidance_schedule": "ramp"},
        {"label": 0, "guidance": 3.0, "classifier": ExactNoisyClassifier()},
    ],
)
def test_cached_equals_ancestral_with_guidance(options):
    model = ConditionalOracle(CONDITIONALS, MARGINAL)
    plain = draw(model, "ancestral", n=400, steps=64, seed=3, **options)
    reused = draw(model, "cached", n=400, steps=64, seed=3, **options)
    assert torch.equal(plain, reused)
    # and the ramp / the tilt changed something: not the unguided samples
    assert not torch.equal(plain, draw(model, "ancestral", n=400, steps=64, seed=3))


GUIDED = [
    {"label": 1, "guidance": 2.0},
    {"label": 0, "guidance": 4.0, "guidance_schedule": "ramp"},
    {"label": 1, "guidance": 1.5, "classifier": ExactNoisyClassifier(), "classifier_form": "exact"},
]


@pytest.mark.parametrize("options", GUIDED)
@pytest.mark.parametrize(
    ("objective", "sampler"),
    [
        (mdlm(sampling_eps=0.5), "ancestral"),
        (mdlm(sampling_eps=0.5), "cached"),
        (mdlm(sampling_eps=0.5), "first-hitting"),
        (mdlm(sampling_eps=0.5), "semi-ar"),
        (d3pm(sampling_eps=0.5), "ancestral"),
    ],
)
def test_no_mask_is_left_in_a_guided_sample(objective, sampler, options):
    # sampling_eps = 0.5 leaves about half the tokens masked for the final denoising step
    model = ConditionalOracle(CONDITIONALS, MARGINAL)
    samples = draw(model, sampler, objective, n=200, steps=2, block=3, stride=1, **options)
    assert samples.shape == (200, SEQ_LEN)
    assert ((samples >= BASES[0]) & (samples <= BASES[-1])).all()


class Recorder(nn.Module):
    """Passes every call on to ``model`` and records each row it reads: (its ids, its label:
    None for the null label of a plain call)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.capabilities = model.capabilities
        self.inputs: list[tuple[tuple[int, ...], int | None]] = []

    def forward(self, input_ids, sigma=None, labels=None):
        marks = [None] * len(input_ids) if labels is None else labels.tolist()
        self.inputs += list(zip(map(tuple, input_ids.tolist()), marks, strict=True))
        return self.model(input_ids, sigma, **({} if labels is None else {"labels": labels}))


class RowCountingClassifier(ExactNoisyClassifier):
    """The exact classifier, counting the rows it tilts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows = 0

    def tilt(self, x, label, where, exact, t=None):
        self.rows += len(x)
        return super().tilt(x, label, where, exact, t)


# (the guidance options, the network rows one state of a sequence takes: 2 for D-CFG at a
# gamma outside {0, 1}, the label's and the null label's predictions, else 1)
EVALUATED = [
    ({}, 1),
    ({"label": 1, "guidance": 2.0, "guidance_form": "x0"}, 2),
    ({"label": 1, "guidance": 2.0, "guidance_form": "transition"}, 2),
    ({"label": 0, "guidance": 2.0, "classifier": True, "guidance_form": "x0"}, 1),
    ({"label": 0, "guidance": 2.0, "classifier": True, "guidance_form": "transition"}, 1),
]


def evaluated_draw(sampler, options, n, seed=0, **request):
    """``draw`` through a ``Recorder`` (and a ``RowCountingClassifier`` where ``options`` name
    one), without time conditioning, sampling_eps 0.5 (about half the masked tokens wait for the
    final noise removal): (the samples, the recorder, the classifier or None)."""
    options = dict(options)
    classifier = RowCountingClassifier() if options.pop("classifier", None) else None
    if classifier is not None:
        options.update(classifier=classifier, classifier_form="exact")
    base = Unconditional(MARGINAL) if "label" not in options or classifier else None
    model = Recorder(base or ConditionalOracle(CONDITIONALS, MARGINAL))
    objective = mdlm(sampling_eps=0.5)
    samples = draw(model, sampler, objective, n=n, seed=seed, steps=8, **options, **request)
    return samples, model, classifier


@pytest.mark.parametrize(("options", "parts"), EVALUATED)
@pytest.mark.parametrize("sampler", ["first-hitting", "cached"])
def test_one_masked_position_takes_one_network_evaluation_per_sequence(sampler, options, parts):
    # Every sequence passes through one masked state (the template with its one [MASK]),
    # whatever the draws: its prediction decides whether and to what the position unmasks, in
    # the loop or in the final noise removal. The network has no time conditioning, so that
    # state needs the network once: n sequences, n rows per network part (and per classifier
    # tilt), whether the position unmasked in the loop or waited for the final step.
    n = 200
    template, given = torch.full((SEQ_LEN,), TOK.mask_id), torch.ones(SEQ_LEN, dtype=torch.bool)
    template[[0, 2]] = torch.tensor([BASES[0], BASES[2]])
    given[1] = False
    samples, model, classifier = evaluated_draw(sampler, options, n, template=template, given=given)
    assert not (samples == TOK.mask_id).any()
    assert len(model.inputs) == n * parts
    assert classifier is None or classifier.rows == n


@pytest.mark.parametrize(("options", "parts"), EVALUATED)
@pytest.mark.parametrize("sampler", ["first-hitting", "cached"])
def test_the_network_reads_each_masked_state_of_a_sequence_once(sampler, options, parts):
    # One sequence at a time (its network rows are then its own): every row the network reads
    # holds a mask (a state without one has nothing left to draw), and no (state, label) is
    # read twice (the network has no time conditioning: a second read repeats the first).
    for seed in range(20):
        samples, model, _ = evaluated_draw(sampler, options, n=1, seed=seed)
        assert not (samples == TOK.mask_id).any()
        assert all(TOK.mask_id in ids for ids, _ in model.inputs)
        assert len(set(model.inputs)) == len(model.inputs)
        assert len(model.inputs) % parts == 0


class SiteModel(nn.Module):
    """Any length: the same base distribution at every position, one per label (the null
    label: ``null``)."""

    capabilities = CAPS

    def __init__(self, per_class: torch.Tensor, null: torch.Tensor) -> None:
        super().__init__()
        logits = torch.full((len(per_class) + 1, 16), -1e9)
        logits[:, BASES] = torch.cat([per_class, null[None]]).log().float()
        self.logits = nn.Parameter(logits)

    def forward(self, input_ids, sigma=None, labels=None):
        labels = torch.full((len(input_ids),), len(self.logits) - 1) if labels is None else labels
        return self.logits[labels][:, None].expand(-1, input_ids.shape[1], -1)


def test_semi_ar_windows_are_guided():
    per_class = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], dtype=torch.float64)
    null = per_class.mean(0)
    model = SiteModel(per_class, null)
    samples = draw(model, "semi-ar", n=400, length=12, steps=8, block=6, stride=3,
                   label=0, guidance=2.5)  # fmt: skip
    counts = torch.bincount((samples - BASES[0]).flatten(), minlength=4).double()
    tempered = per_class[0] ** 2.5 * null**-1.5
    assert chi_square_p(counts, tempered / tempered.sum()) > P_MIN
    assert chi_square_p(counts, per_class[0]) < 1e-6  # power: not p(x | y)


def test_the_ramp_tempers_by_the_time_a_token_is_revealed():
    # One position, first-hitting: it is revealed at s with p(s) = p(1) u, i.e. s = u ~ U(0, 1)
    # for the log-linear schedule, and drawn with gamma(s) = gamma (1 - s). Its law is the
    # average over u of the tempered site, found here by quadrature.
    per_class = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], dtype=torch.float64)
    null = per_class.mean(0)
    u = (torch.arange(20_000, dtype=torch.float64) + 0.5) / 20_000
    gamma = 4.0 * (1 - u)[:, None]  # (Q, 1)
    tempered = per_class[0] ** gamma * null ** (1 - gamma)  # (Q, 4)
    law = (tempered / tempered.sum(-1, keepdim=True)).mean(0)
    samples = draw(SiteModel(per_class, null), "first-hitting", objective=mdlm(sampling_eps=1e-6),
                   length=1, label=0, guidance=4.0, guidance_schedule="ramp")  # fmt: skip
    counts = torch.bincount((samples - BASES[0]).flatten(), minlength=4).double()
    assert chi_square_p(counts, law) > P_MIN
    constant = per_class[0] ** 4.0 * null**-3.0
    assert chi_square_p(counts, constant / constant.sum()) < 1e-6  # power: not the constant


def test_prefix_is_kept_under_guidance():
    template = torch.tensor([TOK.token_to_id["G"], TOK.mask_id, TOK.mask_id])
    given = torch.tensor([True, False, False])
    model = ConditionalOracle(CONDITIONALS, MARGINAL)
    for sampler in ("ancestral", "cached", "first-hitting"):
        samples = draw(model, sampler, n=50, steps=8, template=template, given=given,
                       label=1, guidance=3.0, guidance_schedule="ramp")  # fmt: skip
        assert (samples[:, 0] == TOK.token_to_id["G"]).all()


def test_sedd_cfg_tempers_the_landing_distribution_and_keeps_the_jump_rate():
    from genodiff.guidance import Guide

    guide = Guide(Guidance(0, 2.5), ConditionalOracle(CONDITIONALS, MARGINAL), None, "SEDD")
    rate = 1 / math.expm1(0.7)
    g = torch.Generator().manual_seed(0)
    cond, null = torch.rand(2, 5, 16, generator=g, dtype=torch.float64).softmax(-1)  # (5, 16)
    parts = torch.stack([(cond * rate).log(), (null * rate).log()], dim=-2)  # (5, 2, 16)
    guided = guide.combine_scores(parts, torch.tensor(0.3))  # (5, 16)
    expected = cond**2.5 * null**-1.5
    expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(guided.exp() / rate, expected)


def test_sedd_cfg_at_gamma_one_samples_the_class():
    class ScoreOracle(ConditionalOracle):
        """SEDD's exact scores: out = log p(x0 | z_t) + log(V - 1) makes log_score =
        log p(x0 | z_t) - log expm1(sigma)."""

        def forward(self, input_ids, sigma=None, labels=None):
            return super().forward(input_ids, sigma, labels).log_softmax(-1) + math.log(15)

    model = ScoreOracle(CONDITIONALS, MARGINAL)
    objective = sedd(sampling_eps=1e-4)
    for gamma, law in ((1.0, CONDITIONALS[1]), (0.0, MARGINAL)):
        counts = joint_counts(
            draw(model, "analytic", objective, steps=1000, label=1, guidance=gamma)
        )
        assert chi_square_p(counts, law) > P_MIN


def test_refusals():
    uncond = Unconditional(MARGINAL)
    with pytest.raises(ValueError, match="class-conditional model"):
        draw(uncond, "ancestral", n=2, steps=2, label=0)
    model = ConditionalOracle(CONDITIONALS, MARGINAL)
    with pytest.raises(ValueError, match="classifier-free guidance only"):
        draw(model, "analytic", sedd(), n=2, steps=2, label=0, classifier=ExactNoisyClassifier())
    with pytest.raises(ValueError, match="no guided sampling"):
        draw(model, None, plaid(d_model=8), n=2, steps=2, label=0)
    for bad in (float("nan"), -1.0, 1e9, float("inf")):
        with pytest.raises(ValueError, match="guidance gamma"):
            Guidance(0, gamma=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="class id"):
            Guidance(bad)
    with pytest.raises(ValueError, match="guidance schedule"):
        Guidance(0, schedule="cosine")
    with pytest.raises(ValueError, match="classifier form"):
        Guidance(0, classifier_form="second-order")


@pytest.mark.parametrize(
    ("name", "objective"), [("caduceus", mdlm), ("caduceus", sedd), ("mamba", ar)]
)
def test_a_label_that_is_not_a_class_id_of_the_model_is_refused(name, objective):
    """A model of C classes holds C + 1 label rows, the last the null label: Guidance(C) is no
    class (it drew p(x) as an unguided request does, silently), C + 1 was a bare ValueError of
    the label embedding. Both are refused in one line naming the label; C - 1 is drawn."""
    from genodiff import backbones
    from genodiff.errors import InputValueError

    model = backbones.build(name, d_model=8, n_layer=1, vocab_size=16, num_classes=3).eval()
    for label in (3, 4):
        with pytest.raises(InputValueError, match=f"label {label} is not a class id") as refused:
            draw(model, None, objective(), n=2, steps=2, label=label, length=4)
        assert refused.value.parameter == "label" and "\n" not in str(refused.value)
    assert draw(model, None, objective(), n=2, steps=2, label=2, length=4).shape == (2, 4)

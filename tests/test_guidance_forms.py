"""The two forms of guided masked diffusion (``Guidance.form``, genodiff/guidance.py) against
exact laws: "x0" guides the value of an unmasking token and keeps the unguided unmasking rate,
"transition" is the paper's guided transition, normalised over every outcome of the step,
staying masked included.

The toy: DNA of length 2 (16 sequences; 25 states z_t, each position a base or [MASK]). Every
expected law is computed here, independently of the code under test, by dynamic programming
over the 25 states for the sampler's own step grid (``exact_law``), from the paper's formulas
written out in float64 (``step_weights``: the V + 1 outcomes of each masked position, D-CFG
q(. | z_t, y)^gamma q(. | z_t, null)^(1 - gamma), D-CBG q(. | z_t) p(y | z_t with l set to
.)^gamma, normalised), with the final noise-removal step (argmax) at sampling_eps. The
denoisers are exact x0 posteriors of joint tables that are not products of their sites, and
the D-CBG classifier is an arbitrary table over the 25 states (not the posterior of the
denoiser's law, not linear in the one-hot input): with such a classifier, or any gamma other
than 1, the two forms are different samplers, and every test shows that the other form's law
is rejected by the same test (its total variation from the tested law is asserted first).
"""

import itertools
import math

import pytest
import torch
from scipy.stats import chi2
from torch import nn

from genodiff.backbones.capabilities import Capabilities
from genodiff.errors import InputValueError
from genodiff.guidance import Guidance
from genodiff.objectives.udlm import UDLM
from tests import guided
from tests.dna_objectives import ar, d3pm, mdlm, sedd
from tests.test_samplers import BASES, P_MIN, TOK

LENGTH, N = 2, 4
MASK = N  # the digit of [MASK] in a state
STATES = torch.tensor(list(itertools.product(range(N + 1), repeat=LENGTH)))  # (25, L)
SEQS = torch.tensor(list(itertools.product(range(N), repeat=LENGTH)))  # (16, L)
MASKED = STATES == MASK  # (25, L)
NOISE_EPS, SAMPLING_EPS = 1e-3, 1e-4
STEPS = 12
NUM = 4000


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def state_index(digits: torch.Tensor) -> torch.Tensor:
    """(..., L) digits (4 = [MASK]) -> (...,) index into STATES."""
    return (digits * (N + 1) ** torch.arange(LENGTH - 1, -1, -1)).sum(-1)


def neighbours() -> torch.Tensor:
    """(25, L, N + 1): the state z with position l set to v (v = N: [MASK])."""
    out = torch.empty(len(STATES), LENGTH, N + 1, dtype=torch.long)
    for position, value in itertools.product(range(LENGTH), range(N + 1)):
        changed = STATES.clone()
        changed[:, position] = value
        out[:, position, value] = state_index(changed)
    return out


NEIGHBOUR = neighbours()


def posterior(table: torch.Tensor) -> torch.Tensor:
    """(25, L, N): the exact p(x0_l = v | z) of a joint ``table`` (16,), by enumeration."""
    fits = ((STATES[:, None, :] == SEQS) | (STATES[:, None, :] == MASK)).all(-1)  # (25, 16)
    joint = torch.einsum("sc,clv->slv", fits * table, nn.functional.one_hot(SEQS, N).double())
    return joint / joint.sum(-1, keepdim=True)


# D-CFG: a class table and the null label's table, both peaked and far apart (found by a
# search for a toy whose two forms differ clearly at gamma 0.5, 2 and 3).
_g = torch.Generator().manual_seed(1134)
_sharp = [float(torch.rand(1, generator=_g)) * 2 + 1 for _ in range(2)]
CFG_CLASS, CFG_NULL = ((s * torch.randn(16, generator=_g, dtype=torch.float64)).softmax(0)
                       for s in _sharp)  # fmt: skip
# D-CBG: the unconditional law, and p(y = 0 | z) for each state: an arbitrary table (its seed
# found by the same search).
_g = torch.Generator().manual_seed(5)
CBG_NULL = torch.rand(16, generator=_g, dtype=torch.float64) ** 3 + 0.01
CBG_NULL = CBG_NULL / CBG_NULL.sum()
CLASSIFIER = torch.sigmoid(2.5 * torch.randn(25, generator=torch.Generator().manual_seed(418)))
CLASSIFIER = CLASSIFIER.double()
POSTERIORS = {"cfg": (posterior(CFG_CLASS), posterior(CFG_NULL)), "cbg": posterior(CBG_NULL)}


class Denoiser(nn.Module):
    """The exact x0 posteriors of ``tables`` (one per label, the last the null label's) as
    (B, L, 16) logits; the null label is also the plain call (labels None). Any window of
    length 2 (the semi-ar sampler's)."""

    capabilities = Capabilities(vocab_size=16, class_conditioning=True)

    def __init__(self, *tables: torch.Tensor) -> None:
        super().__init__()
        logits = torch.full((len(tables), len(STATES), LENGTH, 16), -1e9, dtype=torch.float64)
        logits[..., BASES] = torch.stack([posterior(t) for t in tables]).log()
        self.register_buffer("logits", logits.float())
        self.anchor = nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, sigma=None, labels=None):
        digits = torch.where(input_ids == TOK.mask_id, MASK, input_ids - BASES[0])  # (B, L)
        which = torch.full((len(input_ids),), len(self.logits) - 1) if labels is None else labels
        return self.logits[which, state_index(digits)]


class TableClassifier:
    """A noisy classifier with p(y = 0 | z) = CLASSIFIER[z]: ``tilt`` exact, by lookup."""

    class_names = ["first", "second"]
    tokenizer_name = "dna"
    source = "table"

    def tilt(self, x, label, where, exact, t=None):
        log_p = (CLASSIFIER if label == 0 else 1 - CLASSIFIER).log()  # (25,)
        state = state_index(torch.where(x == TOK.mask_id, MASK, x - BASES[0]))  # (n,)
        out = torch.zeros(*x.shape, 16)
        changed = log_p[NEIGHBOUR[state, :, :N]] - log_p[state][:, None, None]  # (n, L, N)
        out[..., BASES] = torch.where(where[..., None], changed, 0.0).float()
        return out

    def next_token_scores(self, prefix, candidates, label):
        raise AssertionError("not used by masked diffusion")


def guidance_of(kind: str, gamma: float, form: str | None, **options) -> dict:
    """The request options of guided sampling towards class 0 in ``form``."""
    if kind == "cbg":
        options["classifier"] = TableClassifier()
    return {"label": 0, "guidance": gamma, "guidance_form": form, **options}


def network(kind: str) -> nn.Module:
    """D-CFG: the class's and the null label's denoiser; D-CBG: the unconditional one."""
    return Denoiser(CFG_CLASS, CFG_NULL) if kind == "cfg" else Denoiser(CBG_NULL)


# ------------------------------------------------------------------ exact laws


def step_weights(kind: str, form: str, gamma: float, p_t: float, p_s: float) -> torch.Tensor:
    """(25, L, N + 1) the unnormalised guided transition of each masked position from t to s
    (mask probabilities p_t, p_s; the last column: staying masked), the paper's formulas."""

    def unguided(x0):  # q(z_s | z_t = [MASK], x0): a letter, or staying masked
        stay = torch.full((*x0.shape[:-1], 1), p_s / p_t, dtype=torch.float64)
        return torch.cat([x0 * (p_t - p_s) / p_t, stay], dim=-1)

    if kind == "cfg":
        cond, null = POSTERIORS["cfg"]
        if form == "transition":
            return unguided(cond) ** gamma * unguided(null) ** (1 - gamma)
        tempered = cond**gamma * null ** (1 - gamma)
    else:
        null = POSTERIORS["cbg"]
        p_y = CLASSIFIER[NEIGHBOUR]  # (25, L, N + 1): p(y | z with l set to v), [MASK] = z's
        if form == "transition":
            return unguided(null) * p_y**gamma
        tempered = null * (p_y[..., :N] / CLASSIFIER[:, None, None]) ** gamma
    return unguided(tempered / tempered.sum(-1, keepdim=True))


def kernel(weights: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """(25, 25) the step's transition matrix over states from the masked positions' weights
    (25, L, N + 1); unmasked positions stay. ``temperature`` reshapes the law of the value
    drawn (the letters' weights to the power 1 / T, their total kept)."""
    letters, stay = weights[..., :N], weights[..., N:]
    tempered = letters ** (1 / temperature)
    letters = tempered / tempered.sum(-1, keepdim=True) * letters.sum(-1, keepdim=True)
    per_position = torch.cat([letters, stay], -1)
    per_position = per_position / per_position.sum(-1, keepdim=True)
    kept = nn.functional.one_hot(STATES, N + 1).double()
    per_position = torch.where(MASKED[..., None], per_position, kept)  # (25, L, N + 1)
    return torch.einsum("sa,sb->sab", per_position[:, 0], per_position[:, 1]).flatten(1)


def finish(kind: str, gamma: float, states: torch.Tensor) -> torch.Tensor:
    """The law (16,) of the output from a law over states (25,): the final step fills every
    masked position with the argmax of its guided value (both forms: the same argmax)."""
    best = step_weights(kind, "x0", gamma, 1.0, 0.0)[..., :N].argmax(-1)  # (25, L)
    filled = torch.where(MASKED, best, STATES)
    cell = (filled * N ** torch.arange(LENGTH - 1, -1, -1)).sum(-1)
    return torch.zeros(len(SEQS), dtype=torch.float64).index_add_(0, cell, states)


def uniform_times(steps: int) -> list[float]:
    """The samplers' grid: ``steps`` uniform steps from t = 1 to SAMPLING_EPS."""
    return [1 + (SAMPLING_EPS - 1) * i / steps for i in range(steps + 1)]


def exact_law(
    kind: str,
    form: str,
    gamma: float,
    times: list[float] | None = None,
    start: int = len(STATES) - 1,
    noise_eps: float = NOISE_EPS,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The law (16,) of the ancestral sampler's output from state ``start`` (default: all
    masked) stepping through ``times`` (default: ``uniform_times(STEPS)``) under the
    log-linear schedule, mask probability (1 - noise_eps) t."""
    states = nn.functional.one_hot(torch.tensor(start), len(STATES)).double()
    for t, s in itertools.pairwise(times or uniform_times(STEPS)):
        p_t, p_s = (1 - noise_eps) * t, (1 - noise_eps) * s
        states = states @ kernel(step_weights(kind, form, gamma, p_t, p_s), temperature)
    return finish(kind, gamma, states)


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().sum()) / 2


# ------------------------------------------------------------------ sampling


def counts(samples: torch.Tensor) -> torch.Tensor:
    """(n, L') token ids -> counts over the 4^L' sequences (in SEQS order for L' = 2)."""
    index = samples - BASES[0]
    assert ((index >= 0) & (index < N)).all()
    cell = (index * N ** torch.arange(samples.shape[1] - 1, -1, -1)).sum(-1)
    return torch.bincount(cell, minlength=N ** samples.shape[1]).double()


def draw(model, objective=None, n=NUM, length=LENGTH, seed=0, **options) -> torch.Tensor:
    objective = objective or mdlm(noise_eps=NOISE_EPS, sampling_eps=SAMPLING_EPS)
    request = guided.request(n, length, **options)
    return objective.sample(model, request, noise=torch.Generator().manual_seed(seed))


def chi_square_p(observed: torch.Tensor, law: torch.Tensor) -> float:
    """Pearson's test of ``observed`` counts against ``law``, the cells expected below 5
    pooled with the next smallest ones until the pool expects 5 (peaked laws)."""
    expected, order = (law * observed.sum()).sort()
    observed = observed[order]
    small = int((expected < 5).sum())
    if small:
        small = max(small, int((expected.cumsum(0) < 5).sum()) + 1)
        expected = torch.cat([expected[:small].sum()[None], expected[small:]])
        observed = torch.cat([observed[:small].sum()[None], observed[small:]])
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(chi2.sf(stat, len(expected) - 1))


def assert_fits(samples: torch.Tensor, law: torch.Tensor, other: torch.Tensor) -> None:
    """The samples follow ``law``, and the same test rejects ``other``, a law at least 0.05
    away in total variation."""
    assert tv(law, other) > 0.05
    observed = counts(samples)
    assert chi_square_p(observed, law) > P_MIN
    assert chi_square_p(observed, other) < 1e-6


OTHER = {"x0": "transition", "transition": "x0"}


@pytest.mark.parametrize("form", ["transition", "x0"])
@pytest.mark.parametrize(
    ("kind", "gamma", "steps"),
    [
        ("cbg", 0.5, 12),
        ("cbg", 2.0, 12),
        ("cbg", 3.0, 12),
        ("cbg", 3.0, 48),
        ("cfg", 0.5, 12),
        ("cfg", 2.0, 12),
        ("cfg", 3.0, 12),
        ("cfg", 3.0, 48),
    ],
)
def test_each_form_samples_its_exact_law(kind, gamma, steps, form):
    """Ancestral sampling: the law of each form, by dynamic programming over the states, and
    not the other form's (a gap that more steps do not close)."""
    samples = draw(
        network(kind), sampler="ancestral", steps=steps, **guidance_of(kind, gamma, form)
    )
    law, other = (exact_law(kind, f, gamma, uniform_times(steps)) for f in (form, OTHER[form]))
    assert_fits(samples, law, other)


@pytest.mark.parametrize("kind", ["cbg", "cfg"])
@pytest.mark.parametrize("form", ["transition", "x0"])
def test_cached_and_d3pm_sample_each_form(kind, form):
    gamma = 2.0
    options = {"steps": STEPS, **guidance_of(kind, gamma, form)}
    cached = draw(network(kind), sampler="cached", seed=1, **options)
    assert_fits(cached, exact_law(kind, form, gamma), exact_law(kind, OTHER[form], gamma))
    objective = d3pm(sampling_eps=SAMPLING_EPS)  # its schedule: mask probability t
    samples = draw(network(kind), objective, sampler="ancestral", seed=2, **options)
    law, other = (exact_law(kind, f, gamma, noise_eps=0.0) for f in (form, OTHER[form]))
    assert_fits(samples, law, other)


@pytest.mark.parametrize("kind", ["cbg", "cfg"])
@pytest.mark.parametrize("form", ["transition", "x0"])
def test_semi_ar_windows_sample_each_form(kind, form):
    """Length 3 in windows of 2 advancing by 1: the first window is sampled from all-[MASK],
    the second from its first base given (the first window's second), so the law is
    p(x0, x1) p(x2 | the window state (x1, [MASK]))."""
    gamma = 3.0
    options = {"steps": STEPS, "block": 2, "stride": 1, **guidance_of(kind, gamma, form)}
    samples = draw(network(kind), sampler="semi-ar", length=3, **options)

    def law(form):
        first = exact_law(kind, form, gamma).reshape(N, N)  # (x0, x1)
        starts = state_index(torch.stack([torch.arange(N), torch.full((N,), MASK)], -1))
        second = torch.stack([exact_law(kind, form, gamma, start=int(s)) for s in starts])
        second = second.reshape(N, N, N)[torch.arange(N), torch.arange(N)]  # (x1, x2)
        return (first[:, :, None] * second[None]).flatten()  # (64,) over (x0, x1, x2)

    assert_fits(samples, law(form), law(OTHER[form]))


@pytest.mark.parametrize("kind", ["cbg", "cfg"])
def test_cached_is_ancestral_in_the_transition_form(kind):
    options = {"steps": 16, "seed": 3, **guidance_of(kind, 2.5, "transition")}
    for schedule in ("constant", "ramp"):
        plain = draw(network(kind), n=300, sampler="ancestral", guidance_schedule=schedule,
                     **options)  # fmt: skip
        reused = draw(network(kind), n=300, sampler="cached", guidance_schedule=schedule,
                      **options)  # fmt: skip
        assert torch.equal(plain, reused)


def test_temperature_reshapes_the_value_not_the_unmasking_odds():
    """Transition form at temperature 0.5: each unmasking position's value from the guided
    prediction sharpened, the odds of unmasking those of temperature 1. Not the law of a
    tempered transition (staying masked tempered too), nor odds from the sharpened values
    (p_s : (p_t - p_s) sum_v m(v)^(1 / T))."""
    kind, gamma, temperature = "cbg", 0.5, 0.5
    samples = draw(network(kind), sampler="ancestral", steps=STEPS, temperature=temperature,
                   **guidance_of(kind, gamma, "transition"))  # fmt: skip
    law = exact_law(kind, "transition", gamma, temperature=temperature)
    tempered, sharper_odds = (nn.functional.one_hot(torch.tensor(24), 25).double(),) * 2
    for t, s in itertools.pairwise(uniform_times(STEPS)):
        p_t, p_s = (1 - NOISE_EPS) * t, (1 - NOISE_EPS) * s
        weights = step_weights(kind, "transition", gamma, p_t, p_s)
        tempered = tempered @ kernel(weights ** (1 / temperature))
        m = weights[..., :N] * p_t / (p_t - p_s)  # the guided m(v)
        letters = (p_t - p_s) / p_t * m ** (1 / temperature)
        sharper_odds = sharper_odds @ kernel(torch.cat([letters, weights[..., N:]], -1))
    assert_fits(samples, law, finish(kind, gamma, tempered))
    assert_fits(samples, law, finish(kind, gamma, sharper_odds))


# ------------------------------------------------------------------ first-hitting


def chain_law(kind: str, form: str, gamma: float, sampling_eps: float) -> torch.Tensor:
    """The law (16,) of the T -> infinity limit of the ancestral sampler in ``form``, run to
    ``sampling_eps`` and finished there. In a step of relative length d = 1 - p_s / p_t a
    masked position unmasks with probability rate * d + O(d^2) and its value follows the
    letters' weights: both read here off ``step_weights`` at d = 1e-9. In the time
    tau = log(p(1) / p(t)) that is a Markov chain over the 25 states with generator Q (rate x
    value law off the diagonal), so the state at sampling_eps has the law
    e_start expm(Q log(p(1) / p(sampling_eps))) (log-linear schedule: p(1) / p(eps) =
    1 / eps); the final step then fills what is still masked."""
    d = 1e-9
    weights = step_weights(kind, form, gamma, 1.0, 1.0 - d)  # (25, L, N + 1)
    rates = (1 - weights[..., N] / weights.sum(-1)) / d  # (25, L)
    values = weights[..., :N] / weights[..., :N].sum(-1, keepdim=True)  # (25, L, N)
    generator = torch.zeros(len(STATES), len(STATES), dtype=torch.float64)
    for state, position in MASKED.nonzero().tolist():
        rate, targets = rates[state, position], NEIGHBOUR[state, position, :N]
        generator[state].index_add_(0, targets, rate * values[state, position])
        generator[state, state] -= rate
    start = nn.functional.one_hot(torch.tensor(len(STATES) - 1), len(STATES)).double()
    end = start @ torch.linalg.matrix_exp(generator * -math.log(sampling_eps))
    return finish(kind, gamma, end)


@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_the_chain_is_the_limit_of_the_transition_form_steps(gamma):
    """What first-hitting samples in the transition form (``chain_law``) is where the step
    sampler's law goes as the steps shrink: 1024 steps, geometric in the mask probability
    from 1 to 1e-12, come within 0.01 (D-CBG at gamma 0.5 and 1, whose rates stay below 10;
    at gamma 2 and 3 the toy's rates reach 1e3-3e4, and the D-CFG toy's 500, which would need
    steps of relative length far below their inverse)."""
    law = chain_law("cbg", "transition", gamma, 1e-12)
    times = torch.logspace(0, -12, 1025, dtype=torch.float64).tolist()
    stepped = exact_law("cbg", "transition", gamma, times, noise_eps=0.0)
    assert tv(stepped, law) < 0.01
    assert tv(stepped, chain_law("cbg", "x0", gamma, 1e-12)) > 0.05  # not the x0 form's limit


@pytest.mark.parametrize(
    ("kind", "gamma"), [("cbg", 0.5), ("cbg", 2.0), ("cbg", 3.0), ("cfg", 3.0)]
)
@pytest.mark.parametrize("form", ["transition", "x0"])
@pytest.mark.parametrize("eps", [1e-3, 0.1])
def test_first_hitting_samples_the_limit_of_each_form(kind, gamma, form, eps):
    """The event law (times, positions, values) of each form, and where it stops: at
    sampling_eps ``eps`` (1e-3, the default; 0.1) a slow position is often still masked and
    filled by the final step, so the law also tells right event times from wrong ones."""
    law, other = (chain_law(kind, f, gamma, eps) for f in (form, OTHER[form]))
    objective = mdlm(noise_eps=NOISE_EPS, sampling_eps=eps)
    samples = draw(network(kind), objective, sampler="first-hitting", seed=4,
                   **guidance_of(kind, gamma, form))  # fmt: skip
    assert_fits(samples, law, other)


# ------------------------------------------------------------------ which sampler takes which


def request(kind: str = "cbg", form: str | None = None, sampler=None, **options):
    return guided.request(2, LENGTH, sampler=sampler, **guidance_of(kind, 2.0, form, **options))


def test_the_kinds_default_forms_and_what_the_provenance_records():
    masked = mdlm()
    for kind, default in (("cfg", "x0"), ("cbg", "transition")):
        resolved = masked.resolve_guidance(request(kind)).guidance
        assert resolved.form == default
        assert resolved.provenance()["guidance_form"] == default
        for form in ("x0", "transition"):
            assert masked.resolve_guidance(request(kind, form)).guidance.form == form
    assert "guidance_form" not in Guidance(0).provenance()  # not resolved: nothing claimed
    udlm = UDLM(sample_ids=TOK.sample_ids)  # transition only: its D-CFG too
    assert udlm.resolve_guidance(request("cfg")).guidance.form == "transition"
    assert sedd().resolve_guidance(request("cfg")).guidance.form == "x0"  # score tempering
    for form in ("x0", "transition"):  # AR: a next-token draw, the two forms are one
        assert ar().resolve_guidance(request("cfg", form)).guidance.form == form


@pytest.mark.parametrize(
    ("objective", "options", "message"),
    [
        (
            mdlm(),
            {"sampler": "first-hitting", "guidance_schedule": "ramp"},
            "ancestral, cached, semi-ar",
        ),
        (mdlm(time_conditioning=True), {"sampler": "first-hitting"}, "ancestral, semi-ar"),
        (UDLM(sample_ids=TOK.sample_ids), {"form": "x0"}, "it draws: transition"),
        (sedd(), {"kind": "cfg", "form": "transition"}, "it draws: x0"),
    ],
)
def test_a_form_a_sampler_does_not_draw_is_refused(objective, options, message):
    with pytest.raises(InputValueError, match=message) as refused:
        objective.sampler_name(request(**options))
    assert refused.value.parameter == "guidance_form"
    assert "\n" not in str(refused.value)


def test_first_hitting_takes_the_x0_form_whatever_the_rates():
    for objective in (mdlm(), mdlm(time_conditioning=True)):
        options = {"sampler": "first-hitting", "guidance_schedule": "ramp", "form": "x0"}
        assert objective.sampler_name(request(**options)) == "first-hitting"


def test_an_unknown_form_is_refused():
    with pytest.raises(InputValueError, match="unknown guidance form 'logit'") as refused:
        Guidance(0, form="logit")
    assert refused.value.parameter == "guidance_form"

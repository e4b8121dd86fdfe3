"""Guided UDLM sampling (genodiff/samplers/uniform.py with genodiff/guidance.py) against exact
laws of a toy joint p(x, y), and `genodiff sample --label/--guidance/--classifier` on a UDLM
checkpoint.

The toy: the length-2 DNA sequences of tests/test_udlm_exact_laws.py, two classes with
p(y) = (0.3, 0.7) (tests/test_guidance.py's P_Y) and p(x | y) = ``toy_law(2)``,
``toy_law(3)``, p(x) their mixture. Expected values are built here by enumeration, not by the
code under test: the exact UDLM denoisers p(x^l | z_t^{-l}[, y]) (``ExactDenoiser``), the
reverse posterior by Bayes with the forward kernel (``bayes_step``), and the exact
time-dependent classifier p(y | z_t, t) of uniform noise.
"""

import re
from functools import partial

import pytest
import torch
from torch import nn

import genodiff
from genodiff.backbones.capabilities import Capabilities
from genodiff.classifiers import load_classifier
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.classifiers.noise import inputs_at_time
from genodiff.errors import InputValueError
from genodiff.processes.uniform import UniformForwardProcess
from genodiff.samplers import uniform
from tests import guided
from tests.test_bad_input_cli import one_line_error
from tests.test_classifiers import LinearInOneHot
from tests.test_classifiers_training import toy, write_generator  # noqa: F401 (a fixture)
from tests.test_conditioning import ROOT, TINY_RUN
from tests.test_guidance import P_Y
from tests.test_guidance_cli import sample
from tests.test_udlm_exact_laws import (
    EPS,
    IDS,
    LENGTH,
    LETTERS,
    SEQS,
    TOK,
    ExactDenoiser,
    N,
    alpha_of,
    chi2_pvalue,
    kernel,
    on_distinct_rows,
    sample_counts,
    toy_law,
    udlm,
)

CONDITIONALS = torch.stack([toy_law(2), toy_law(3)])  # (2, K): p(x | y)
MARGINAL = P_Y @ CONDITIONALS  # (K,): p(x)


class ConditionalDenoiser(nn.Module):
    """The exact class-conditional UDLM network: labels y (B,) -> p(x^l | z_t^{-l}, y); the
    null label (None) -> p(x^l | z_t^{-l}). Records which calls it got."""

    capabilities = Capabilities(vocab_size=16, class_conditioning=True)

    def __init__(self) -> None:
        super().__init__()
        self.per_class = nn.ModuleList([ExactDenoiser(law) for law in CONDITIONALS])
        self.null = ExactDenoiser(MARGINAL)
        self.calls: list[str] = []

    def forward(self, z_ids, sigma, labels=None):
        self.calls.append("null" if labels is None else "label")
        if labels is None:
            return self.null(z_ids, sigma)
        out = torch.stack([denoiser(z_ids, sigma) for denoiser in self.per_class])  # (C, B, L, V)
        return out[labels, torch.arange(len(z_ids))]


class Unconditional(ExactDenoiser):
    capabilities = Capabilities(vocab_size=16)


def x_theta(network: nn.Module, z_ids: torch.Tensor, t: float, label=None) -> torch.Tensor:
    """(B, L, N) the network's x_theta over the letters at time t, in float64."""
    sigma = torch.full((len(z_ids),), -torch.log(torch.tensor(alpha_of(t))).item())
    kwargs = {} if label is None else {"labels": torch.full((len(z_ids),), label)}
    return network(z_ids, sigma, **kwargs)[..., LETTERS].double().softmax(-1)


def bayes_step(x: torch.Tensor, i: int, t: float, s: float) -> torch.Tensor:
    """q(z_s = v | z_t = i, x) (N,) for a distribution x (N,) of the clean letter, a loop over
    v: q(z_t = i | z_s = v) q(z_s = v | x), normalised."""
    a_t, a_s = alpha_of(t), alpha_of(s)
    a_ts = a_t / a_s
    joint = torch.tensor(
        [(a_ts * (i == v) + (1 - a_ts) / N) * float(a_s * x[v] + (1 - a_s) / N) for v in range(N)],
        dtype=torch.float64,
    )
    return joint / joint.sum()


@pytest.fixture
def recorded_steps(monkeypatch):
    """Every categorical draw of the UDLM sampler: [(probabilities, draw)], the first being
    the prior's."""
    draws = []
    real = uniform.sample_categorical

    def record(probs, generator=None, u=None):
        out = real(probs, generator, u)
        draws.append((probs.clone(), out.clone()))
        return out

    monkeypatch.setattr(uniform, "sample_categorical", record)
    return draws


def run(network, steps: int, n: int, seed: int = 0, **options) -> torch.Tensor:
    request = guided.request(n, LENGTH, steps=steps, **options)
    return udlm().sample(network, request, torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------ D-CFG


@pytest.mark.parametrize("label", [0, 1])
def test_cfg_at_gamma_one_samples_the_class_and_at_zero_the_marginal(label):
    model = ConditionalDenoiser()
    for gamma, law, other in ((1.0, CONDITIONALS[label], MARGINAL), (0.0, MARGINAL, None)):
        model.calls.clear()
        counts = sample_counts(model, steps=200, n=6000, seed=label, label=label, guidance=gamma)
        assert chi2_pvalue(counts, law) > 1e-3
        # power: the same test rejects the other law
        assert chi2_pvalue(counts, other if other is not None else CONDITIONALS[label]) < 1e-6
        assert len(model.calls) == 200  # gamma 0 or 1: one network call per step
        assert set(model.calls) == {"label" if gamma == 1.0 else "null"}


@pytest.mark.parametrize("schedule", ["constant", "ramp"])
def test_cfg_step_is_the_renormalised_tempered_transition(recorded_steps, schedule):
    model, steps, gamma = ConditionalDenoiser(), 3, 2.0
    run(model, steps, n=6, seed=4, label=1, guidance=gamma, guidance_schedule=schedule)
    assert len(recorded_steps) == steps + 1  # the prior, then one draw per step
    z = recorded_steps[0][1]  # (n, L) letter indices of z_1
    for k, (probs, drawn) in enumerate(recorded_steps[1:]):
        t, s = 1 - k / steps, 1 - (k + 1) / steps
        g = gamma * (1 - t) if schedule == "ramp" else gamma
        ids = torch.tensor(LETTERS)[z]
        cond, null = x_theta(model, ids, t, label=1), x_theta(model, ids, t)  # (n, L, N)
        for row in range(len(z)):
            for position in range(LENGTH):
                i = int(z[row, position])
                q_c = bayes_step(cond[row, position], i, t, s)
                q_n = bayes_step(null[row, position], i, t, s)
                tempered = q_c**g * q_n ** (1 - g)
                expected = tempered / tempered.sum()
                got = probs[row, position] / probs[row, position].sum()
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-7)
                if g > 0.5:  # power: the conditional transition alone is another law
                    assert (got - q_c).abs().max() > 1e-3
        z = drawn
    assert {"label", "null"} == set(model.calls)  # two calls per step


# ------------------------------------------------------------------ D-CBG


def test_cbg_first_order_is_the_exact_tilt_for_a_linear_classifier(recorded_steps):
    """Inside the UDLM step: the first-order and exact forms give the same transitions, both
    q(z_s | z_t, x_theta) exp(gamma (W[l, v] - W[l, z_t^l])), renormalised."""
    network, gamma, steps = Unconditional(MARGINAL), 1.5, 2
    guide = ClassifierGuide(LinearInOneHot(LENGTH), TOK, ["a", "b"])
    weight = guide.classifier.weight.detach().double()  # (L, V): log p(y=0 | x) + c
    transitions = {}
    for form in ("exact", "first-order"):
        recorded_steps.clear()
        options = {"classifier": guide, "classifier_form": form}
        run(network, steps, n=5, seed=6, label=0, guidance=gamma, **options)
        transitions[form] = [probs for probs, _ in recorded_steps[1:]]
        z = recorded_steps[0][1]
        for k, (probs, drawn) in enumerate(recorded_steps[1:]):
            t, s = 1 - k / steps, 1 - (k + 1) / steps
            null = x_theta(network, torch.tensor(LETTERS)[z], t)
            for row in range(len(z)):
                for position in range(LENGTH):
                    i = int(z[row, position])
                    q = bayes_step(null[row, position], i, t, s)
                    tilt = weight[position, LETTERS] - weight[position, LETTERS[i]]  # (N,)
                    expected = q * torch.exp(gamma * tilt)
                    expected = expected / expected.sum()
                    got = probs[row, position] / probs[row, position].sum()
                    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
            z = drawn
    for exact, first in zip(transitions["exact"], transitions["first-order"], strict=True):
        torch.testing.assert_close(exact, first, rtol=1e-5, atol=1e-6)


class ExactTimeClassifier:
    """p(y | z_t, t) of the toy under uniform noise, by enumeration: p(y) sum_x p(x | y)
    prod_l q(z_t^l | x^l) at alpha_t, normalised over y. It reads the time (the protocol's
    ``t``): the exact law depends on it. ``tilt`` is exact (one lookup per position and
    letter)."""

    class_names = ["first", "second"]
    tokenizer_name = "dna"

    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []  # (where, t) of each call

    def log_p(self, ids: torch.Tensor, t: torch.Tensor, label: int) -> torch.Tensor:
        return on_distinct_rows(partial(self.log_p_of_rows, label=label), ids, t)

    def log_p_of_rows(self, ids: torch.Tensor, t: torch.Tensor, label: int) -> torch.Tensor:
        z = torch.stack([(ids == letter).long() * v for v, letter in enumerate(LETTERS)]).sum(0)
        alpha = (1 - (1 - EPS) * t.double())[:, None, None]  # (n, 1, 1)
        likelihood = kernel(z[:, None, :], SEQS[None], alpha).prod(-1)  # (n, K)
        joint = likelihood @ CONDITIONALS.T * P_Y  # (n, 2)
        return (joint[:, label] / joint.sum(-1)).log()

    def tilt(self, x, label, where, exact, t=None):
        assert exact
        self.calls.append((where, t))
        out = torch.zeros(*x.shape, 16)
        for position in range(x.shape[1]):
            for letter in LETTERS:
                changed = x.clone()
                changed[:, position] = letter
                delta = self.log_p(changed, t, label) - self.log_p(x, t, label)
                out[:, position, letter] = torch.where(where[:, position], delta, 0).float()
        return out

    def next_token_scores(self, prefix, candidates, label):
        raise AssertionError("not used by diffusion")


@pytest.mark.parametrize("label", [0, 1])
def test_cbg_with_the_exact_time_aware_classifier_samples_the_class(label):
    """The transition-level form is exact only as dt -> 0: with 400 steps its bias is far
    below what 6,000 draws can see (chi-square p > 1e-3), while the unguided law is
    rejected."""
    classifier = ExactTimeClassifier()
    options = {"classifier": classifier, "classifier_form": "exact"}
    counts = sample_counts(Unconditional(MARGINAL), steps=400, n=6000, seed=label,
                           label=label, **options)  # fmt: skip
    assert chi2_pvalue(counts, CONDITIONALS[label]) > 1e-3
    assert chi2_pvalue(counts, MARGINAL) < 1e-6  # power
    (first_where, first_t), (_, last_t) = classifier.calls[0], classifier.calls[-1]
    assert first_where.all()  # UDLM: every free position is tilted
    assert float(first_t[0]) == 1.0 and float(last_t[0]) < 0.01  # the classifier reads t


def test_given_positions_hold_under_guidance():
    template = torch.tensor([LETTERS[2], LETTERS[0]])
    given = torch.tensor([True, False])
    classifier = ExactTimeClassifier()
    for options in (
        {"label": 0, "guidance": 3.0, "guidance_schedule": "ramp"},
        {"label": 1, "guidance": 2.0, "classifier": classifier, "classifier_form": "exact"},
    ):
        samples = run(ConditionalDenoiser(), 8, 50, template=template, given=given, **options)
        assert (samples[:, 0] == LETTERS[2]).all()
        assert torch.isin(samples, torch.tensor(LETTERS)).all()
    where, _ = classifier.calls[0]
    assert not where[:, 0].any() and where[:, 1].all()  # given positions are not tilted


def nucleus(x: torch.Tensor, top_p: float) -> torch.Tensor:
    """(N,) bool: the smallest set of most likely letters of x (N,) whose mass reaches top_p."""
    keep, mass = torch.zeros(N, dtype=torch.bool), 0.0
    for v in x.argsort(descending=True).tolist():
        if mass >= top_p:
            break
        keep[v], mass = True, mass + float(x[v])
    return keep


def test_top_p_with_cfg_is_the_limit_of_the_tempered_law(recorded_steps):
    """At s = 0 a letter outside a part's nucleus has posterior 0. With gamma = 3 the tempered
    law q_c^3 q_null^-2 never draws a letter the conditional part excludes, and puts all its
    mass on the letters only the null part excludes when there are any; nothing turns NaN."""
    model, steps = ConditionalDenoiser(), 4
    samples = run(model, steps, 200, label=0, guidance=3.0, top_p=0.5)
    assert torch.isin(samples, torch.tensor(LETTERS)).all()
    probs = recorded_steps[-1][0]  # (n, L, N): the last step, into s = 0
    ids = torch.tensor(LETTERS)[recorded_steps[-2][1]]  # z_t of that step
    t = 1 / steps
    cond, null = x_theta(model, ids, t, label=0), x_theta(model, ids, t)
    assert probs.isfinite().all()
    seen = set()
    for row in range(len(ids)):
        for position in range(LENGTH):
            in_cond, in_null = nucleus(cond[row, position], 0.5), nucleus(null[row, position], 0.5)
            favoured = in_cond & ~in_null
            support = favoured if favoured.any() else in_cond
            got = probs[row, position] / probs[row, position].sum()
            assert got[~support].max() < 1e-12 and got[support].min() > 0
            seen.add((bool(favoured.any()), bool((~in_cond).any())))
    assert seen == {(True, True), (False, True)}  # both cases met, and cond exclusions


# ------------------------------------------------------------------ refusals


def test_refusals():
    with pytest.raises(InputValueError, match="class-conditional model"):
        run(Unconditional(MARGINAL), 2, 2, label=0)
    for bad in (float("nan"), float("inf"), -0.5):
        with pytest.raises(InputValueError, match="guidance gamma") as caught:
            run(ConditionalDenoiser(), 2, 2, label=0, guidance=bad)
        assert caught.value.parameter == "guidance"


# ------------------------------------------------------------------ noisy classifier, CLI

UDLM_MODEL = {"name": "caduceus", "d_model": 8, "n_layer": 1, "time_conditioning": True}
CLASSES = ["poly_a", "poly_c"]


@pytest.fixture(scope="module")
def generators(toy):  # noqa: F811 (the fixture imported above)
    """A conditional UDLM and MDLM generator of the toy's classes (untrained)."""
    _, mdlm = toy
    udlm_ckpt = write_generator(mdlm.parent / "udlm.ckpt", CLASSES, "udlm", UDLM_MODEL)
    return udlm_ckpt, mdlm


def train(config, generator, out) -> str:
    options = [f"generator={generator}", f"output_dir={out}", "trainer.max_steps=4"]
    options += ["trainer.val_check_interval=4"]
    genodiff.train_classifier(str(config), options, progress=False)
    return str(out / "checkpoints" / "last.ckpt")


@pytest.fixture(scope="module")
def classifiers(toy, generators, tmp_path_factory):  # noqa: F811
    """Noisy classifiers trained for the UDLM and for the MDLM generator, and the states the
    uniform process drew while they trained: [(clean, noisy)]."""
    config, _ = toy
    folder = tmp_path_factory.mktemp("noisy")
    drawn = []
    real = UniformForwardProcess.draw_states

    def draw_states(process, input_ids, generator=None, shard=None):
        t, noisy = real(process, input_ids, generator, shard)
        drawn.append((input_ids.clone(), noisy.clone()))
        return t, noisy

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(UniformForwardProcess, "draw_states", draw_states)
        paths = tuple(
            train(config, g, folder / name) for g, name in zip(generators, "um", strict=True)
        )
    return (*paths, drawn)


def test_uniform_states_for_a_udlm_generator():
    process = udlm().process
    ids = IDS[torch.arange(4000) % len(IDS)]
    noisy = inputs_at_time(process, ids, 0.5, torch.Generator().manual_seed(0))
    assert torch.isin(noisy, torch.tensor(LETTERS)).all()  # letters, no [MASK]
    changed = (noisy != ids).double().mean()
    expected = (1 - alpha_of(0.5)) * (N - 1) / N  # replaced by another letter
    assert abs(float(changed) - expected) < 0.02


def test_a_noisy_classifier_trains_on_a_udlm_generator_and_guides_it(
    generators, classifiers, tmp_path
):
    udlm_ckpt, _ = generators
    udlm_classifier, _, drawn = classifiers
    guide = load_classifier(udlm_classifier, generator_objective="udlm")
    assert guide.generator_objective["name"] == "udlm" and guide.kind == "noisy"
    # its training read the UDLM generator's uniform states: letters, some replaced
    assert len(drawn) == 4  # one draw per training step, none for the MDLM generator's
    clean, noisy = map(torch.cat, zip(*drawn, strict=True))
    assert torch.isin(noisy, torch.tensor(LETTERS)).all()
    # t about uniform in [1e-3, 1], a letter replaced by another with (1 - alpha_t) (N - 1) / N
    expected = 0.5 * (1 - 1e-3) * (N - 1) / N
    assert abs(float((noisy != clean).double().mean()) - expected) < 0.08
    options = ["--classifier", udlm_classifier, "--label", "poly_c", "--guidance", "2"]
    assert sample(str(udlm_ckpt), tmp_path / "c.fa", *options) == 0
    text = (tmp_path / "c.fa").read_text()
    assert "label=poly_c guidance=2 guidance_schedule=constant" in text
    assert f"classifier={udlm_classifier} classifier_form=first-order" in text


@pytest.fixture(scope="module")
def conditional_udlm_run(tmp_path_factory):
    """A tiny class-conditional UDLM run on the bundled human_vs_phage task (a few steps of a
    time-conditioned Caduceus)."""
    out = tmp_path_factory.mktemp("conditional_udlm")
    config = str(ROOT / "configs" / "conditional_demo.yaml")
    options = ["objective=udlm", "model.time_conditioning=true", "evaluate_test=false"]
    genodiff.train(config, [*TINY_RUN, *options], output_dir=out)
    return out


def test_cfg_on_a_trained_conditional_udlm_checkpoint(conditional_udlm_run, tmp_path):
    for name in ("human", "phage"):  # the run ends with samples of each class
        header = (conditional_udlm_run / f"samples_{name}.fa").read_text().splitlines()[0]
        assert (
            f"label={name} guidance=1 guidance_schedule=constant guidance_form=transition" in header
        )
    checkpoint = str(conditional_udlm_run / "checkpoints" / "last.ckpt")
    options = ["--label", "phage", "--guidance", "2", "--guidance-schedule", "ramp"]
    assert sample(checkpoint, tmp_path / "g.fa", *options) == 0
    records = (tmp_path / "g.fa").read_text().split(">")[1:]
    assert len(records) == 2
    for record in records:
        header, *lines = record.splitlines()
        assert "sampler=ancestral steps=4" in header
        assert "label=phage guidance=2 guidance_schedule=ramp guidance_form=transition" in header
        assert set("".join(lines)) <= set("ACGT") and len("".join(lines)) == 12


def mismatches(generators, classifiers):
    """(generator, classifier of the other noise, the refusal's pattern) for both pairs."""
    said = "states of the generators of objective {}, and this generator's \\({}\\)"
    return (
        (generators[0], classifiers[1], "masked " + said.format("mdlm", "udlm")),
        (generators[1], classifiers[0], "uniform " + said.format("udlm", "mdlm")),
    )


def test_a_classifier_for_the_other_noise_is_refused(generators, classifiers, tmp_path, capsys):
    for generator, classifier, message in mismatches(generators, classifiers):
        capsys.readouterr()
        options = ["--classifier", classifier, "--label", "poly_a"]
        assert sample(str(generator), tmp_path / "s.fa", *options) == 2
        assert re.search(message, one_line_error(capsys, "sample"))
        assert not any(tmp_path.iterdir())


def test_a_loaded_classifier_for_the_other_noise_is_refused_too(generators, classifiers):
    """The same check for a classifier loaded in Python (``genodiff.load_classifier``) and
    given to ``Model.generate``: it guided with the other noise's p(y | z_t), silently."""
    for generator, classifier, message in mismatches(generators, classifiers):
        model, guide = genodiff.load(generator), genodiff.load_classifier(classifier)
        with pytest.raises(InputValueError, match=message) as refused:
            model.generate(2, length=8, steps=2, label="poly_a", classifier=guide)
        assert refused.value.parameter == "classifier" and "\n" not in str(refused.value)
    model, guide = genodiff.load(generators[0]), genodiff.load_classifier(classifiers[0])
    assert len(model.generate(2, length=8, steps=2, label="poly_a", classifier=guide)) == 2


def test_bad_guidance_on_a_udlm_checkpoint_is_one_line(tmp_path, capsys):
    unconditional = write_generator(tmp_path / "u.ckpt", None, "udlm", UDLM_MODEL)
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert sample(str(unconditional), out / "s.fa", "--label", "poly_a") == 2
    assert "unconditional model" in one_line_error(capsys, "sample")
    conditional = write_generator(tmp_path / "c.ckpt", CLASSES, "udlm", UDLM_MODEL)
    assert sample(str(conditional), out / "s.fa", "--label", "poly_a", "--guidance", "nan") == 2
    assert "--guidance" in one_line_error(capsys, "sample")
    options = ["--label", "poly_a", "--guidance-form", "x0"]  # UDLM: the transition form only
    assert sample(str(conditional), out / "s.fa", *options) == 2
    assert re.search("it draws: transition.*--guidance-form", one_line_error(capsys, "sample"))
    assert not any(out.iterdir())

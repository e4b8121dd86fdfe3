"""Guidance classifiers (genodiff/classifiers/): the D-CBG tilt in its exact and first-order
forms against hand loops, one-hot inputs of every backbone, the noise the classifier learns
from against the schedule, and FUDGE's next-token scores against the model called by hand."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from genodiff import backbones
from genodiff.classifiers.guide import EXACT_MAX_LENGTH, ClassifierGuide
from genodiff.classifiers.model import GuidanceClassifier
from genodiff.classifiers.noise import inputs_at_time
from genodiff.classifiers.one_hot import embed_one_hot
from genodiff.config import ConfigError, with_tokenizer_fields
from genodiff.errors import InputValueError
from genodiff.processes.masked import MaskedForwardProcess
from genodiff.processes.schedules import CosineSchedule, LogLinearSchedule
from genodiff.registry import get
from genodiff.tokenizers import DNATokenizer

TOK = DNATokenizer()
BASES = torch.tensor(TOK.sample_ids)  # (4,) A C G T


def backbone(name: str, **config) -> nn.Module:
    cls = get("backbone", name)
    return backbones.build(**with_tokenizer_fields("model", cls, {"name": name, **config}, TOK))


def classifier(kind: str = "noisy", name: str = "caduceus", classes: int = 3, **config):
    torch.manual_seed(0)
    config = {"d_model": 8, "n_layer": 1, **config}
    model = GuidanceClassifier(backbone(name, **config), classes, kind, TOK)
    return model.eval()


def masked_state(n: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, L) ids with about half the positions [MASK], and those positions."""
    g = torch.Generator().manual_seed(seed)
    ids = BASES[torch.randint(0, 4, (n, length), generator=g)]
    where = torch.rand(n, length, generator=g) < 0.5
    return ids.masked_fill(where, TOK.mask_id), where


def hand_tilt(model: nn.Module, x: torch.Tensor, label: int, where: torch.Tensor) -> torch.Tensor:
    """log p(label | x with (l, v)) - log p(label | x), one classifier call per (row, l, v)."""
    tilt = torch.zeros(*x.shape, model.vocab_size)
    with torch.no_grad():
        for row in range(x.shape[0]):
            base = model(x[row : row + 1])[0, label].item()
            for position in where[row].nonzero().flatten().tolist():
                for value in BASES.tolist():
                    edited = x[row : row + 1].clone()
                    edited[0, position] = value
                    tilt[row, position, value] = model(edited)[0, label].item() - base
    return tilt


class LinearInOneHot(nn.Module):
    """A two-class classifier with log p(y=0 | x) = sum_l W[l, x_l] - c, linear in the one-hot
    input (c keeps it below -0.1), and p(y=1 | x) = 1 - p(y=0 | x). (A log-softmax over classes
    of a function linear in the input is not linear itself: its normaliser is not.)"""

    kind = "noisy"
    vocab_size = 16

    def __init__(self, length: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(length, self.vocab_size, generator=gen(1)) / 4)

    def forward(self, input_ids=None, one_hot=None) -> torch.Tensor:
        if one_hot is None:
            one_hot = F.one_hot(input_ids, self.vocab_size).float()
        offset = self.weight.detach().amax(dim=1).sum() + 0.1  # the largest sum, + 0.1
        log_p0 = (one_hot * self.weight).sum(dim=(1, 2)) - offset  # (B,)
        return torch.stack([log_p0, torch.log(-torch.expm1(log_p0))], dim=-1)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------- D-CBG


def test_first_order_tilt_is_exact_for_a_classifier_linear_in_the_one_hot_input():
    x, where = masked_state(3, 7)
    guide = ClassifierGuide(LinearInOneHot(7), TOK, ["a", "b"])
    exact = guide.tilt(x, 0, where, exact=True)
    first_order = guide.tilt(x, 0, where, exact=False)
    expected = hand_tilt(guide.classifier, x, 0, where)
    assert exact.shape == (3, 7, 16)
    torch.testing.assert_close(exact, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(first_order, exact, atol=1e-5, rtol=0)
    # and the value is the weight difference W[l, v] - W[l, x_l] at tilted positions
    weight = guide.classifier.weight.detach()
    row, position = where.nonzero()[0].tolist()
    current = weight[position, TOK.mask_id]
    assert exact[row, position, BASES].tolist() == pytest.approx(
        (weight[position, BASES] - current).tolist(), abs=1e-5
    )
    # for the other label, log p(y=1 | x) is not linear: the first order is only an estimate
    assert not torch.allclose(guide.tilt(x, 1, where, True), guide.tilt(x, 1, where, False))


def test_exact_tilt_of_a_nonlinear_classifier_is_one_call_per_position_and_value():
    model = classifier("noisy", classes=3)
    x, where = masked_state(2, 9, seed=3)
    guide = ClassifierGuide(model, TOK, ["a", "b", "c"])
    tilt = guide.tilt(x, 2, where, exact=True)
    torch.testing.assert_close(tilt, hand_tilt(model, x, 2, where), atol=1e-5, rtol=0)
    assert tilt[~where].abs().max() == 0  # untilted positions
    undrawable = torch.ones(16, dtype=torch.bool)
    undrawable[BASES] = False
    assert tilt[..., undrawable].abs().max() == 0  # values a sampler may not draw
    assert tilt[where][:, BASES].abs().min() > 0
    # no position to tilt (every row revealed): zeros, with no classifier call on no rows
    assert torch.equal(guide.tilt(x, 2, torch.zeros_like(where), True), torch.zeros(2, 9, 16))


@pytest.mark.parametrize("rcps", [False, True])
def test_first_order_tilt_is_the_input_gradient_difference(rcps):
    """g[l, v] - g[l, x_l] of a real classifier (Caduceus-Ph and -PS, whose one-hot input
    enters both strands) is the directional derivative of log p(y | onehot) along
    e_{l, v} - e_{l, x_l}."""
    model = classifier("noisy", classes=2, rcps=rcps)
    x, where = masked_state(2, 6, seed=5)
    guide = ClassifierGuide(model, TOK, ["a", "b"])
    with torch.inference_mode():  # as a sampler may call it
        tilt = guide.tilt(x, 1, where, exact=False)
    # by hand: central differences along onehot + s (e_v - e_{x_l}); s = 0.01 keeps the
    # float32 kernels' rounding below the tolerance
    base = F.one_hot(x, 16).float()
    expected = torch.zeros_like(tilt)
    step = 1e-2
    with torch.no_grad():
        for row, position in where.nonzero().tolist():
            for value in BASES.tolist():
                direction = torch.zeros_like(base[:1])
                direction[0, position, value] += 1
                direction[0, position, x[row, position]] -= 1
                up = model(one_hot=base[row : row + 1] + step * direction)[0, 1]
                down = model(one_hot=base[row : row + 1] - step * direction)[0, 1]
                expected[row, position, value] = ((up - down) / (2 * step)).item()
    torch.testing.assert_close(tilt, expected, atol=2e-4, rtol=0)


@pytest.mark.parametrize(
    "name, config",
    [
        ("caduceus", {}),
        ("caduceus", {"rcps": True}),
        ("caduceus", {"rcps": True, "fused_add_norm": False}),
        ("mamba", {}),
        ("hyena", {"d_inner": 16}),
    ],
)
def test_one_hot_inputs_give_what_the_ids_give(name, config):
    model = backbone(name, d_model=8, n_layer=1, **config).eval()
    ids = torch.randint(0, 12, (3, 10), generator=gen(2))
    one_hot = F.one_hot(ids, model.capabilities.vocab_size).float()
    direct = model.backbone.embeddings(ids) if name != "mamba" else model.backbone.embedding(ids)
    torch.testing.assert_close(embed_one_hot(model, one_hot), direct)
    kind = "causal" if name in ("mamba", "hyena") else "noisy"
    head = GuidanceClassifier(model, 3, kind, TOK).eval()
    torch.testing.assert_close(head(one_hot=one_hot), head(ids), atol=1e-5, rtol=1e-5)


def test_a_backbone_without_a_known_embedding_refuses_the_first_order_form_only():
    class Opaque(nn.Module):
        pass

    with pytest.raises(InputValueError, match="use the classifier form 'exact'") as caught:
        embed_one_hot(Opaque(), torch.zeros(1, 2, 16))
    assert caught.value.parameter == "classifier_form"


def test_the_exact_form_refuses_long_sequences_and_names_the_other_form():
    guide = ClassifierGuide(LinearInOneHot(EXACT_MAX_LENGTH + 1), TOK, ["a", "b"])
    x, where = masked_state(1, EXACT_MAX_LENGTH + 1)
    with pytest.raises(InputValueError, match="use the classifier form 'first-order'") as caught:
        guide.tilt(x, 0, where, exact=True)
    assert caught.value.parameter == "classifier_form"
    assert guide.tilt(x, 0, where, exact=False).shape == (1, EXACT_MAX_LENGTH + 1, 16)


def test_a_kind_must_fit_its_backbone():
    with pytest.raises(ConfigError, match="causal backbone"):
        classifier("causal", "caduceus")
    with pytest.raises(ConfigError, match="bidirectional backbone"):
        classifier("noisy", "mamba")
    with pytest.raises(ConfigError, match="kind='other'"):
        classifier("other")


def test_the_guide_refuses_the_other_kind_and_unknown_labels():
    noisy = ClassifierGuide(classifier("noisy"), TOK, ["a", "b", "c"])
    causal = ClassifierGuide(classifier("causal", "mamba"), TOK, ["a", "b", "c"])
    x, where = masked_state(1, 4)
    with pytest.raises(InputValueError, match="noisy classifier.*needs a causal one"):
        noisy.next_token_scores(x, BASES, 0)
    with pytest.raises(InputValueError, match="causal classifier.*needs a noisy one"):
        causal.tilt(x, 0, where, exact=False)
    with pytest.raises(InputValueError, match="its classes are 0 a, 1 b, 2 c"):
        noisy.tilt(x, 3, where, exact=False)


class PerPositionClassifier(nn.Module):
    """A causal classifier reduced to its shape: log p(y | x_<=i) from the token at i alone."""

    kind = "causal"
    vocab_size = 16

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(self.vocab_size, classes, generator=gen(2)))

    def forward(self, input_ids=None, one_hot=None) -> torch.Tensor:
        return self.table[input_ids].log_softmax(dim=-1)  # (B, L, C)


def test_the_guide_reads_on_the_device_of_the_state_it_is_given():
    # A guide loaded on one device (load_classifier's default CPU) guiding a sampler on another
    # (a CUDA model; generate_to_file moving the model to a worker's device). The "meta" device
    # stands in for the second device on a CPU machine: what is checked is where the classifier
    # runs (the outputs' device), and that the calls go through instead of failing.
    x, where = masked_state(2, 6)
    noisy = ClassifierGuide(LinearInOneHot(6), TOK, ["a", "b"])
    tilt = noisy.tilt(x.to("meta"), 1, where.to("meta"), exact=False)
    assert tilt.device.type == "meta" and noisy.device.type == "meta"
    assert tilt.shape == (2, 6, 16)
    causal = ClassifierGuide(PerPositionClassifier(), TOK, ["a", "b", "c"])
    scores = causal.next_token_scores(BASES[None, :3].to("meta"), BASES.to("meta"), 0)
    assert scores.device.type == "meta" and scores.shape == (1, 4)


# ---------------------------------------------------------------------------------- FUDGE


@pytest.mark.parametrize("prefix_length", [0, 5])
def test_next_token_scores_are_the_causal_classifier_read_after_each_candidate(prefix_length):
    model = classifier("causal", "mamba", classes=3)
    guide = ClassifierGuide(model, TOK, ["a", "b", "c"])
    prefix = BASES[torch.randint(0, 4, (3, prefix_length), generator=gen(4))]
    scores = guide.next_token_scores(prefix, BASES, 1)
    assert scores.shape == (3, 4)
    with torch.no_grad():
        for row in range(3):
            for k, candidate in enumerate(BASES.tolist()):
                sequence = torch.tensor([[*prefix[row].tolist(), candidate]])
                logits = model.score(model.backbone.hidden_states(sequence))[0, -1]  # (C,)
                expected = logits.log_softmax(-1)[1].item()
                assert scores[row, k].item() == pytest.approx(expected, abs=1e-5)


def test_causal_log_probabilities_at_a_position_ignore_what_follows():
    model = classifier("causal", "mamba", classes=2)
    ids = BASES[torch.randint(0, 4, (1, 8), generator=gen(6))]
    changed = ids.clone()
    changed[0, 5:] = BASES[0]
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[:, :5], model(changed)[:, :5])


# ---------------------------------------------------------------------------------- noise


@pytest.mark.parametrize(
    "schedule", [LogLinearSchedule(eps=0.3), CosineSchedule(eps=1e-3)], ids=["loglinear", "cosine"]
)
def test_noisy_inputs_are_masked_with_the_schedules_probability_at_their_time(schedule):
    process = MaskedForwardProcess(TOK.mask_id, TOK.pad_id, schedule)
    batch, length = 64, 3000
    ids = BASES[torch.randint(0, 4, (batch, length), generator=gen(7))]
    ids[:, :100] = TOK.pad_id  # padding: never masked
    t, noisy = process.draw_states(ids, gen(8))
    # times: low-discrepancy over the batch, in [1e-3, 1]
    spacing = torch.diff(t.sort().values)
    assert torch.allclose(spacing, torch.full_like(spacing, (1 - 1e-3) / batch), atol=1e-5)
    assert t.min() >= 1e-3 and t.max() <= 1
    assert (noisy[:, :100] == TOK.pad_id).all()
    masked = (noisy[:, 100:] == TOK.mask_id).double().sum(dim=1)  # (B,)
    unmasked = noisy[:, 100:] != TOK.mask_id
    assert (noisy[:, 100:][unmasked] == ids[:, 100:][unmasked]).all()
    p = schedule.mask_probability(t.double())  # (B,)
    n = length - 100
    z = (masked - n * p).sum() / (n * p * (1 - p)).sum().sqrt()
    assert abs(z) < 4  # binomial counts: mean n p, variance n p (1 - p)
    # fixed times (validation): t = 0 is clean, t = 0.5 masks the schedule's fraction
    assert torch.equal(inputs_at_time(process, ids, 0.0, gen(9)), ids)
    at_half = (inputs_at_time(process, ids, 0.5, gen(9))[:, 100:] == TOK.mask_id).sum().item()
    p_half = schedule.mask_probability(0.5).item()
    total = batch * n
    assert abs(at_half - total * p_half) < 4 * math.sqrt(total * p_half * (1 - p_half))

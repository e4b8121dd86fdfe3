"""``objective.padding``, how the masked objectives (MDLM, SEDD, D3PM) treat [PAD]: "given"
(never corrupted nor scored: DNA's N), "bound" (corrupted and scored: a bound on the padded
sequence, its length included) and "upstream" (corrupted, never scored: upstream MDLM's text
convention, not a bound). Against values computed by hand on a 5-id toy, and against the exact
NLL of an enumerable toy language: with the exact denoiser and every masking enumerated, the
bound convention's expected NELBO equals the entropy H(p) exactly, "given" equals
H(p) - H(length), and "upstream" sits below H(p)."""

import itertools
import math

import pytest
import torch
from torch import nn

from genodiff.checkpoints import load_model
from genodiff.config import ConfigError
from genodiff.evaluate import EvalResult
from genodiff.model import GenerativeModel, build_objective
from genodiff.objectives import AR, D3PM, MDLM, SEDD
from genodiff.samplers.request import SampleRequest
from tests.test_generative_perplexity import save

# A toy vocabulary: [PAD]=0 [MASK]=1 [SEP]=2 a=3 b=4; sentences "a b [SEP]" or "a [SEP] [PAD]".
PAD, MASK, SEP, A, B = range(5)
IDS = {"mask_id": MASK, "pad_id": PAD, "sample_ids": [SEP, A, B]}
# Two fixed distributions over the 5 ids: the model predicts TABLE_HIDDEN at every position
# while the last position reads [MASK] (the length is hidden), TABLE_SEEN otherwise.
TABLE_HIDDEN = {PAD: 0.1, MASK: 0.0, SEP: 0.3, A: 0.4, B: 0.2}
TABLE_SEEN = {PAD: 0.05, MASK: 0.0, SEP: 0.15, A: 0.5, B: 0.3}


def log_table(table: dict[int, float]) -> torch.Tensor:
    return torch.tensor([math.log(table[i]) if table[i] else -1e9 for i in range(5)])


class LengthReader(nn.Module):
    """Predicts TABLE_HIDDEN everywhere when the last position is [MASK], else TABLE_SEEN."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Parameter(log_table(TABLE_HIDDEN))
        self.seen = nn.Parameter(log_table(TABLE_SEEN))
        self.inputs: list[torch.Tensor] = []

    def forward(self, input_ids, sigma=None):
        self.inputs.append(input_ids.clone())
        hidden = (input_ids[:, -1] == MASK)[:, None, None]  # (B, 1, 1)
        return torch.where(hidden, self.hidden, self.seen).expand(*input_ids.shape, -1)


@pytest.mark.parametrize(("padding", "pad_scored"), [("upstream", False), ("bound", True)])
def test_mdlm_loss_replayed_by_hand(padding, pad_scored):
    x0 = torch.tensor([[A, SEP, PAD], [A, B, SEP]])
    objective = MDLM(**IDS, low_discrepancy=False, padding=padding)
    model = LengthReader()
    nelbo, tokens = objective.loss(model, x0, generator=torch.Generator().manual_seed(4))

    g = torch.Generator().manual_seed(4)  # replay the draws: t (2,), then u (2, 3)
    t = (1 - 1e-3) * torch.rand(2, generator=g) + 1e-3
    u = torch.rand(2, 3, generator=g)
    masked = u < (1 - 1e-3) * t[:, None]
    expected = []
    for b in range(2):
        table = TABLE_HIDDEN if masked[b, 2] else TABLE_SEEN  # is the last position hidden?
        terms = [
            -math.log(table[int(x0[b, i])]) / t[b].item()  # the log-linear weight is 1/t
            for i in range(3)
            if masked[b, i] and (pad_scored or x0[b, i] != PAD)
        ]
        expected.append(sum(terms))
    assert tokens.tolist() == ([3, 3] if pad_scored else [2, 3])
    assert masked[0, 2], "the seed must mask the [PAD] of the first sentence"
    assert model.inputs[0][0, 2] == MASK  # ... and the model saw it as [MASK]
    torch.testing.assert_close(nelbo, torch.tensor(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective_class", [MDLM, SEDD, D3PM])
@pytest.mark.parametrize("padding", ["given", "upstream", "bound"])
def test_pad_is_corrupted_and_scored_as_padding_says(objective_class, padding):
    x0 = torch.tensor([[A, SEP, PAD, PAD]] * 64)  # two [PAD] per sentence
    objective = objective_class(**IDS, padding=padding)
    objective.eval()  # D3PM: the NELBO alone
    model = LengthReader()
    nelbo, tokens = objective.loss(model, x0, generator=torch.Generator().manual_seed(0))
    pad_masked = torch.cat([x[:, 2:] == MASK for x in model.inputs]).any()
    assert bool(pad_masked) == (padding != "given")
    assert tokens.tolist() == [4 if padding == "bound" else 2] * 64
    # A model that differs from LengthReader only at the [PAD] positions gives the same loss
    # exactly when those positions are not scored.
    garbled, _ = objective.loss(GarbledAtPadding(), x0, generator=torch.Generator().manual_seed(0))
    assert nelbo.sum() > 0
    assert torch.allclose(garbled, nelbo) == (padding != "bound")


class GarbledAtPadding(LengthReader):
    """LengthReader with other predictions at positions 2 and 3 (where the sentences pad)."""

    def forward(self, input_ids, sigma=None):
        logits = super().forward(input_ids, sigma).clone()  # (B, L, V)
        logits[:, 2:] = torch.tensor([2.0, -1e9, -3.0, 1.0, 0.5])
        return logits


def test_samplers_draw_pad_only_where_it_is_corrupted():
    request = SampleRequest(num_samples=64, length=3, steps=8)

    class PadLover(nn.Module):
        def forward(self, input_ids, sigma=None):
            logits = torch.full((*input_ids.shape, 5), -4.0)
            logits[..., PAD] = 0.0
            return logits

    for padding in ("given", "upstream", "bound"):
        objective = MDLM(**IDS, padding=padding)
        blocked = objective.process.undrawable(5, torch.device("cpu"))
        assert blocked.tolist() == [padding == "given", True, False, False, False]
        model = PadLover()
        model.dummy = nn.Parameter(torch.zeros(1))
        x = objective.sample(model, request, torch.Generator().manual_seed(0))
        assert bool((x == PAD).any()) == (padding != "given")
        assert not (x == MASK).any()


# --------------------------------------------------------------- the exact NLL of a toy language

# Six padded sentences of L = 4 tokens and their probabilities (sum 1).
LANGUAGE = {
    (A, SEP, PAD, PAD): 0.30,
    (B, SEP, PAD, PAD): 0.10,
    (A, B, SEP, PAD): 0.20,
    (B, A, SEP, PAD): 0.15,
    (A, A, B, SEP): 0.15,
    (B, B, B, SEP): 0.10,
}
SENTENCES = torch.tensor(list(LANGUAGE))  # (6, L)
P = torch.tensor(list(LANGUAGE.values()), dtype=torch.float64)  # (6,)
L = SENTENCES.shape[1]


class ExactDenoiser(nn.Module):
    """The exact x0 posterior of LANGUAGE: for each row, the sentences agreeing with its
    visible (non-[MASK]) tokens weighted by p, and per position the marginal of the token.
    ``pad_masked``: whether a [MASK] may hide a [PAD] (not with padding "given", where [PAD]
    is never corrupted: there a [MASK] says "not [PAD]")."""

    def __init__(self, pad_masked: bool = True) -> None:
        super().__init__()
        self.pad_masked = pad_masked
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, sigma=None):
        hidden = input_ids[:, None, :] == MASK  # (B, 1, L)
        if not self.pad_masked:
            hidden = hidden & (SENTENCES[None] != PAD)  # (B, 6, L)
        agrees = (input_ids[:, None, :] == SENTENCES[None]) | hidden  # (B, 6, L)
        weight = P * agrees.all(dim=-1)  # (B, 6)
        weight = weight / weight.sum(dim=-1, keepdim=True)
        onehot = nn.functional.one_hot(SENTENCES, 5).double()  # (6, L, V)
        marginal = torch.einsum("bs,slv->blv", weight, onehot)  # (B, L, V)
        return torch.log(marginal.clamp_min(1e-30)).float()


def by_hand(sentence: tuple[int, ...], padding: str) -> float:
    """The expected continuous-time NELBO of one sentence, written out: positions C that may
    be masked ([PAD] only when corrupted), each masked with probability t; a masked set M of m
    positions has weight int_0^1 (1/t) t^m (1-t)^(|C|-m) dt = B(m, |C| - m + 1), and costs
    sum over its scored positions of -log p(x_i | the unmasked tokens), from LANGUAGE itself."""
    corruptible = [i for i in range(L) if padding != "given" or sentence[i] != PAD]
    total = 0.0
    for m in range(1, len(corruptible) + 1):
        weight = math.gamma(m) * math.gamma(len(corruptible) - m + 1)
        weight /= math.gamma(len(corruptible) + 1)
        for masked in itertools.combinations(corruptible, m):
            seen = [i for i in range(L) if i not in masked]
            agree = {  # "given": a masked position is not [PAD]
                s: p
                for s, p in LANGUAGE.items()
                if all(s[i] == sentence[i] for i in seen)
                and (padding != "given" or all(s[i] != PAD for i in masked))
            }
            for i in masked:
                if padding == "bound" or sentence[i] != PAD:
                    hit = sum(p for s, p in agree.items() if s[i] == sentence[i])
                    total -= weight * math.log(hit / sum(agree.values()))
    return total


def enumerated(padding: str) -> float:
    """E_p of genodiff's NELBO of MDLM with the exact denoiser, every masking enumerated:
    ``nelbo_terms`` at t = 1/2 (weight 1/t = 2) for each masked set M allowed by the forward
    process, weighted by B(m, |C| - m + 1)."""
    objective = MDLM(**IDS, padding=padding)
    model, expected = ExactDenoiser(pad_masked=padding != "given"), 0.0
    for sentence, p in LANGUAGE.items():
        x = torch.tensor([sentence])
        t = torch.tensor([0.5])
        corruptible = objective.process.masked_by(x, torch.ones(1), torch.zeros(1, L))[0]
        positions = corruptible.nonzero().flatten().tolist()
        for m in range(1, len(positions) + 1):
            weight = math.gamma(m) * math.gamma(len(positions) - m + 1)
            weight /= math.gamma(len(positions) + 1)
            for chosen in itertools.combinations(positions, m):
                masked = torch.zeros(1, L, dtype=torch.bool)
                masked[0, list(chosen)] = True
                nelbo, _ = objective.nelbo_terms(model, x, t, masked)
                expected += p * weight * 0.5 * float(nelbo)
    return expected


def test_the_bound_convention_is_the_exact_nll_and_upstream_sits_below_it():
    entropy = float(-(P * P.log()).sum())  # H(p), nats per sentence
    lengths: dict[int, float] = {}
    for sentence, p in LANGUAGE.items():
        lengths[sentence.index(SEP)] = lengths.get(sentence.index(SEP), 0.0) + p
    length_entropy = -sum(p * math.log(p) for p in lengths.values())
    # per sentence, by hand: the bound convention is -log p(x) itself (any-order chain rule)
    for sentence, p in LANGUAGE.items():
        assert by_hand(sentence, "bound") == pytest.approx(-math.log(p), abs=1e-12)
    bound, given, upstream = (enumerated(padding) for padding in ("bound", "given", "upstream"))
    assert bound == pytest.approx(entropy, abs=1e-5)
    assert given == pytest.approx(entropy - length_entropy, abs=1e-5)  # the length is given
    for padding, value in (("given", given), ("upstream", upstream)):
        hand = sum(p * by_hand(s, padding) for s, p in LANGUAGE.items())
        assert value == pytest.approx(hand, abs=1e-5)
    assert upstream < entropy - 0.1  # [PAD]'s terms left out: below the true NLL


def test_the_drawn_loss_averages_to_the_exact_nll():
    """``loss`` itself (its own t and masks, noise_eps = 1e-3) on 4,000 copies of each sentence
    averages to H(p) within its Monte-Carlo error (and the eps effect, below L eps log V)."""
    objective = MDLM(**IDS, padding="bound")
    x = SENTENCES.repeat(4000, 1)
    nelbo, tokens = objective.loss(ExactDenoiser(), x, torch.Generator().manual_seed(0))
    assert (tokens == L).all()  # every token scored, [PAD] included
    per_sentence = (nelbo.double().view(4000, 6) * P).sum(dim=1)  # (4000,): E_p per draw
    mean, se = float(per_sentence.mean()), float(per_sentence.std() / 4000**0.5)
    entropy = float(-(P * P.log()).sum())
    assert abs(mean - entropy) < 4 * se + L * 1e-3 * math.log(5)


# --------------------------------------------------------------------- names, reports, old runs


def test_each_convention_says_what_its_number_is():
    for padding, likelihood in (("given", "bound"), ("bound", "bound"), ("upstream", "upstream")):
        objective = MDLM(**IDS, padding=padding)
        assert (objective.padding, objective.likelihood) == (padding, likelihood)
    assert "not a bound" in MDLM(**IDS, padding="upstream").scoring
    assert "[PAD] included" in MDLM(**IDS, padding="bound").scoring
    assert AR(bos_id=SEP, pad_id=PAD, sample_ids=[A, B]).likelihood == "exact"
    fields = dict(checkpoint="c.ckpt", objective="mdlm", source="s", length=4, windows=2)
    fields.update(tokens=8, t_samples=1, seed=0, batch_size=2, nelbo=1.0, nelbo_se=0.1)
    fields.update(bits_per_token=1.4, bits_per_token_se=0.1, perplexity=2.7, perplexity_se=0.3)
    upstream = EvalResult(likelihood="upstream", scoring="s", windows_sha256="0" * 64, **fields)
    text = upstream.describe()
    assert "not a bound" in text and "(bound)" not in text
    bound = EvalResult(likelihood="bound", scoring="s", windows_sha256="0" * 64, **fields)
    assert "NELBO (bound)" in bound.describe()


def test_runs_saved_with_mask_padding_keep_their_convention(tmp_path):
    for old, padding in ((True, "upstream"), (False, "given")):
        config = {
            "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
            "objective": {"name": "mdlm", "mask_padding": old},  # as earlier versions saved it
            "data": {"name": "fasta", "max_length": 32},
            "ema": {"decay": 0.0},
        }
        path = save(GenerativeModel(config), tmp_path / f"{old}.ckpt")
        assert load_model(path, torch.device("cpu")).eval_objective.padding == padding
    saved = {"name": "mdlm", **IDS}
    assert build_objective({**saved, "mask_padding": True}).padding == "upstream"
    assert build_objective({**saved, "mask_padding": False}).padding == "given"
    assert build_objective({**saved, "name": "sedd", "mask_padding": True}).padding == "upstream"
    with pytest.raises(ValueError, match="mask_padding and objective.padding are both set"):
        build_objective({**saved, "mask_padding": True, "padding": "bound"})


def test_bad_paddings_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="objective.padding must be one of given, bound, upst"):
        MDLM(**IDS, padding="yes")
    with pytest.raises(ConfigError, match="pads with its \\[MASK\\] id") as caught:
        MDLM(mask_id=MASK, pad_id=MASK, padding="bound")  # gpt2: [PAD] is the mask id
    assert "\n" not in str(caught.value)
    assert MDLM(mask_id=MASK, pad_id=MASK, padding="upstream").padding == "upstream"


def test_a_d3pm_run_of_an_earlier_version_opens_and_an_edited_one_is_one_line(tmp_path):
    """Opening a checkpoint checks its objective section as this version names it: D3PM's
    retired flags, at the values earlier versions saved, pass; another value is refused."""
    from genodiff.checkpoints import read_checkpoint_file
    from genodiff.errors import InputValueError

    config = {
        "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "objective": {"name": "d3pm", "num_steps": 20, "zero_masking": False, "carry_over": True},
        "data": {"name": "fasta", "max_length": 32},
        "ema": {"decay": 0.0},
    }
    path = save(GenerativeModel(config), tmp_path / "old.ckpt")
    assert isinstance(load_model(path, torch.device("cpu")).eval_objective, D3PM)
    content = read_checkpoint_file(path)
    content["hyper_parameters"]["config"]["objective"]["carry_over"] = False
    torch.save(content, path)
    refusal = rf"{path} is inconsistent .*objective\.carry_over=False; D3PM no longer takes"
    with pytest.raises(InputValueError, match=refusal):
        load_model(path, torch.device("cpu"))

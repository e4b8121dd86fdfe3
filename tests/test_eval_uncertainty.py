"""The "+-" of ``genodiff eval``: its standard error is the spread of the reported number.

``genodiff eval`` reports R = sum S_i / sum n_i over windows (S_i a window's NELBO in nats,
the mean of its noise draws; n_i its scored tokens) with the delta-method standard error over
windows (``ratio_and_se``). Since each S_i carries its own noise draws, that error must hold
both the spread between windows and the Monte-Carlo noise. Checked here against the truth: a
context-free model of i.i.d. letters scored on fresh windows of i.i.d. letters (some cut short
by [PAD], so that windows hold very different numbers of tokens) under fresh seeds, many times; the
reported errors must match the spread of the reported numbers, and those numbers average to
the analytic value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from genodiff.backbones.capabilities import Capabilities
from genodiff.errors import InputValueError
from genodiff.evaluate import paired_difference, ratio_and_se, score_windows
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import ar, mdlm
from tests.test_udlm_exact_laws import Windows

TOK = DNATokenizer()
MODEL_LAW = np.array([0.1, 0.2, 0.3, 0.4])  # the model's p(A), p(C), p(G), p(T)
DATA_LAW = np.array([0.4, 0.3, 0.2, 0.1])  # the letters of the windows
NOISE_EPS = 1e-3
WINDOWS, LENGTH, REPEATS = 20, 32, 300


class Letters(nn.Module):
    """Logits log ``law`` at every position whatever the context (the other ids far below)."""

    def __init__(self, causal: bool, law: np.ndarray = MODEL_LAW) -> None:
        super().__init__()
        logits = torch.full((TOK.vocab_size,), -1e4)
        logits[list(TOK.sample_ids)] = torch.tensor(np.log(law), dtype=torch.float32)
        self.logits = nn.Parameter(logits)
        self.capabilities = Capabilities(vocab_size=TOK.vocab_size, causal=causal)

    def forward(self, ids: torch.Tensor, sigma: torch.Tensor | None = None) -> torch.Tensor:
        return self.logits.expand(*ids.shape, -1)  # (B, L, V)


def fresh_windows(rng: np.random.Generator) -> Windows:
    """WINDOWS windows of DATA_LAW letters, each whole or (by a coin) cut to its first 2 to 4
    tokens by [PAD]: token counts as unequal as windows of mostly N."""
    letters = rng.choice(4, size=(WINDOWS, LENGTH), p=DATA_LAW)
    ids = torch.tensor(np.array(TOK.sample_ids)[letters])  # (N, L)
    kept = np.where(rng.random(WINDOWS) < 0.5, rng.integers(2, 5, WINDOWS), LENGTH)  # (N,)
    for row, tokens in zip(ids, kept, strict=True):
        row[tokens:] = TOK.pad_id
    return Windows(ids)


# (objective, causal backbone, noise draws per window, expected per-token value). AR: the
# exact NLL, E[-log p(x)] under the data law. MDLM: for a context-free model a token costs
# -log p(x) / t when masked, with probability (1 - eps) t: (1 - eps) times the NLL for any t.
# Times in [0.3, 1] (sampling_eps) keep the 1/t weight's tail short, so that each run's
# standard error is itself well estimated; the noise draws still dominate the spread.
NLL = float(DATA_LAW @ -np.log(MODEL_LAW))
CASES = {
    "ar": (ar, True, 1, NLL),
    "mdlm": (lambda: mdlm(noise_eps=NOISE_EPS, sampling_eps=0.3), False, 2, (1 - NOISE_EPS) * NLL),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_standard_error_is_the_spread_of_the_reported_number(name):
    make_objective, causal, draws, expected = CASES[name]
    objective, backbone = make_objective(), Letters(causal)
    numbers, errors = [], []
    for repeat in range(REPEATS):
        data = fresh_windows(np.random.default_rng(repeat))
        indices = list(range(WINDOWS))
        sums, counts, _ = score_windows(objective, backbone, data, indices, draws, repeat, 8)
        number, error = ratio_and_se(sums, counts)
        numbers.append(number)
        errors.append(error)
    numbers, errors = np.array(numbers), np.array(errors)
    spread = numbers.std(ddof=1)
    assert abs(numbers.mean() - expected) < 4 * spread / math.sqrt(REPEATS)
    # the root-mean-square reported error against the spread: measured 0.94 (AR), 0.99 (MDLM);
    # the standard error of the unweighted per-window ratios s_i / n_i would give 1.7 and 1.8
    assert 0.8 < math.sqrt((errors**2).mean()) / spread < 1.25


OTHER_LAW = np.array([0.15, 0.2, 0.3, 0.35])  # close to MODEL_LAW: their errors move together


def report(sums: np.ndarray, counts: np.ndarray, digest: str = "same") -> dict:
    """The parts of a ``genodiff eval --json --per-window`` report ``paired_difference`` reads."""
    per_window = [{"window": i, "tokens": int(n), "nelbo": float(s)} for i, (s, n) in
                  enumerate(zip(sums, counts, strict=True))]  # fmt: skip
    return {"windows_sha256": digest, "per_window": per_window}


def test_the_paired_difference_and_its_error_are_those_of_the_same_windows():
    """Two exact models of i.i.d. letters on the same fresh windows, many times: the paired
    difference averages to the analytic one, its error is its spread, and that error is far
    below the two reports' errors combined (what the windows share cancels)."""
    first, second = Letters(True), Letters(True, OTHER_LAW)
    differences, errors, combined = [], [], []
    for repeat in range(REPEATS):
        data = fresh_windows(np.random.default_rng(repeat))
        indices = list(range(WINDOWS))
        a = score_windows(ar(), first, data, indices, 1, repeat, 8)[:2]
        b = score_windows(ar(), second, data, indices, 1, repeat, 8)[:2]
        difference, error = paired_difference(report(*a), report(*b))
        differences.append(difference)
        errors.append(error)
        combined.append(math.hypot(ratio_and_se(*a)[1], ratio_and_se(*b)[1]))
    differences, errors = np.array(differences), np.array(errors)
    spread = differences.std(ddof=1)
    expected = float(DATA_LAW @ (np.log(OTHER_LAW) - np.log(MODEL_LAW)))
    assert abs(differences.mean() - expected) < 4 * spread / math.sqrt(REPEATS)
    assert 0.8 < math.sqrt((errors**2).mean()) / spread < 1.25
    assert math.sqrt((errors**2).mean()) < 0.5 * math.sqrt((np.array(combined) ** 2).mean())


def test_reports_that_do_not_pair_are_refused():
    sums, counts = np.array([10.0, 12.0]), np.array([8, 8])
    with pytest.raises(InputValueError, match="other windows"):
        paired_difference(report(sums, counts), report(sums, counts, digest="other"))
    with pytest.raises(InputValueError, match="other tokens"):
        paired_difference(report(sums, counts), report(sums, np.array([8, 7])))
    with pytest.raises(
        InputValueError, match="the second report holds no per-window NELBOs.*per_window=True"
    ):
        paired_difference(report(sums, counts), {"windows_sha256": "same"})

"""Categorical draws in float64, and the temperature / nucleus reshaping of a distribution.

float32 Gumbel noise truncates the tails of a distribution, which lowers diversity (and
flatters generative perplexity), so every sampler draws through ``sample_categorical``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from genodiff.errors import NonFiniteOutputError

# Finite stand-in for -inf in logits: a category removed with it gets probability 0, and
# log_softmax and its gradient stay free of NaN in fp32/bf16.
NEG_INF = -1e6


#: Up to this many categories (DNA's vocabulary, not a text model's) a CUDA draw takes the
#: running sum along the leading axis (``leading_axis_sum``).
FEW_CATEGORIES = 64


def leading_axis_sum(probs: Tensor) -> bool:
    """Whether ``sample_categorical`` sums ``probs`` (..., V) along the leading axis and counts
    the categories below u instead of searching for it: on CUDA for few categories, where the
    scan of a short innermost axis runs one small block per row (0.4 ms for 64 x 1,024 rows of
    DNA's vocabulary, BENCHMARKS.md "GPU sampler") and over an outer axis each thread sums one
    row in order. Elsewhere the innermost sum and a binary search are faster (on the CPU 1.8
    against 9 ms for those rows, in a quick check). On the CPU either way sums in the same order."""
    return probs.device.type == "cuda" and probs.shape[-1] <= FEW_CATEGORIES


def sample_categorical(
    probs: Tensor, generator: torch.Generator | None = None, u: Tensor | None = None
) -> Tensor:
    """Draw one category per row of ``probs`` (..., V) by inverting the float64 CDF.

    Rows need not be normalised; zero-probability categories are never drawn. ``u`` (..., 1)
    gives the float64 uniforms to invert (the samplers draw them from their ``Noise``, row by
    row); without it one is drawn per row from ``generator``.
    """
    probs = probs.to(torch.float64)
    if u is None:
        u = torch.rand(
            (*probs.shape[:-1], 1), dtype=torch.float64, device=probs.device, generator=generator
        )
    if leading_axis_sum(probs):
        cdf = probs.movedim(-1, 0).cumsum(dim=0).movedim(0, -1)  # (..., V)
        draws = (cdf <= u * cdf[..., -1:]).sum(dim=-1)  # (...): the search, as a count
    else:
        cdf = probs.cumsum(dim=-1)  # (..., V)
        draws = torch.searchsorted(cdf, u * cdf[..., -1:], right=True).squeeze(-1)  # (...)
    return draws.clamp_max(cdf.shape[-1] - 1)


def sharpen(
    log_probs: Tensor, temperature: float = 1.0, top_p: float = 1.0, check: bool = True
) -> Tensor:
    """float64 probabilities (..., V) from log-probabilities, with temperature and nucleus.

    Temperature divides the log-probabilities; nucleus (top-p) keeps the smallest set of
    most likely categories whose mass reaches ``top_p`` (always at least the top one) and
    renormalises. ``temperature=1, top_p=1`` returns the distribution unchanged. A category of
    probability 0 at temperature 1 (a removed id, ``NEG_INF``) stays impossible at every
    temperature, and no temperature > 0 overflows (``temper``).
    Every sampler draws from what this returns, so a network output that is NaN or +inf (or a
    row without any possible category) stops sampling here (``refuse_non_finite``); a
    sampler that must not wait for the device in its loop passes ``check=False`` and checks
    the rows it drew from once, after the loop (a NaN row is then NaN here).
    """
    log_probs = log_probs.to(torch.float64)
    if temperature != 1.0:
        log_probs = temper(log_probs, temperature)
    probs = log_probs.softmax(dim=-1)  # (..., V)
    if check:
        refuse_non_finite(probs.isnan().any())
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V)
        keep_sorted = mass_before < top_p  # the top category always has mass_before = 0
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def temper(log_probs: Tensor, temperature: float) -> Tensor:
    """float64 log-probabilities (..., V) divided by ``temperature``, up to a constant per row.

    They are taken relative to the row's most likely category first (0 there), so the division
    never overflows however small the temperature. A category whose probability is 0 in float64
    (exp underflows: the finite ``NEG_INF`` of a removed id) gets -inf: divided by a large
    temperature, -1e6 would otherwise become a likely log-probability and draw [MASK] or a
    special token. A row with a NaN or +inf stays NaN after the softmax (``refuse_non_finite``).
    """
    shifted = log_probs - log_probs.amax(dim=-1, keepdim=True)  # (..., V), <= 0
    return torch.where(shifted.exp() > 0, shifted / temperature, -torch.inf)


def refuse_non_finite(seen: Tensor) -> None:
    """NonFiniteOutputError if ``seen`` (a 0-d bool tensor: some row drawn from was NaN)."""
    if seen:
        raise NonFiniteOutputError(
            "the network's output is not finite (NaN or inf), so there is no distribution to "
            "draw from: the run diverged or its weights are damaged; use another checkpoint, "
            "e.g. the previous one"
        )

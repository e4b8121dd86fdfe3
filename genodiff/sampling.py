"""What a user asks a sampler for, and categorical draws in float64.

float32 Gumbel noise truncates the tails of a distribution, which lowers diversity (and
flatters generative perplexity), so every sampler draws through ``sample_categorical``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class SampleRequest:
    """One sampling job: how many sequences, how long, which sampler, which constraints.

    ``template`` and ``given`` (both (length,)) fix positions chosen by the user (a prefix or
    the known bases of an infilling task): where ``given`` is True the output holds
    ``template``, and no sampler may change it. ``block``/``stride`` drive the
    semi-autoregressive sampler (windows of ``block`` tokens, advancing by ``stride``).
    """

    num_samples: int
    length: int
    steps: int = 1024
    sampler: str | None = None  # None: the objective's default (its first sampler)
    temperature: float = 1.0
    top_p: float = 1.0
    template: Tensor | None = None
    given: Tensor | None = None
    block: int | None = None
    stride: int | None = None

    def __post_init__(self) -> None:
        if self.num_samples < 1 or self.length < 1:
            raise ValueError(
                f"need num_samples >= 1 and length >= 1, got {self.num_samples}, {self.length}"
            )
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p (nucleus) must be in (0, 1], got {self.top_p}")
        if (self.template is None) != (self.given is None):
            raise ValueError("template and given come together (both or neither)")
        if self.template is not None and (
            self.template.shape != (self.length,) or self.given.shape != (self.length,)
        ):
            raise ValueError(
                f"template and given must have shape ({self.length},), got "
                f"{tuple(self.template.shape)} and {tuple(self.given.shape)}"
            )

    def canvas(self, fill_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """The starting sequences (n, L): ``fill_id`` everywhere except the given positions,
        and the (n, L) bool mask of given positions."""
        n, length = self.num_samples, self.length
        x = torch.full((n, length), fill_id, dtype=torch.long, device=device)
        if self.given is None:
            return x, torch.zeros(n, length, dtype=torch.bool, device=device)
        given = self.given.to(device).expand(n, length)
        x = torch.where(given, self.template.to(device).expand(n, length), x)
        return x, given.clone()


def sample_categorical(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Draw one category per row of ``probs`` (..., V) by inverting the float64 CDF.

    Rows need not be normalised; zero-probability categories are never drawn.
    """
    cdf = probs.to(torch.float64).cumsum(dim=-1)  # (..., V)
    u = torch.rand(
        (*cdf.shape[:-1], 1), dtype=torch.float64, device=cdf.device, generator=generator
    )
    draws = torch.searchsorted(cdf, u * cdf[..., -1:], right=True)  # (..., 1)
    return draws.squeeze(-1).clamp_max(cdf.shape[-1] - 1)


def sharpen(log_probs: Tensor, temperature: float = 1.0, top_p: float = 1.0) -> Tensor:
    """float64 probabilities (..., V) from log-probabilities, with temperature and nucleus.

    Temperature divides the log-probabilities; nucleus (top-p) keeps the smallest set of
    most likely categories whose mass reaches ``top_p`` (always at least the top one) and
    renormalises. ``temperature=1, top_p=1`` returns the distribution unchanged.
    """
    log_probs = log_probs.to(torch.float64)
    if temperature != 1.0:
        log_probs = log_probs / temperature
    probs = log_probs.softmax(dim=-1)  # (..., V)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V)
        keep_sorted = mass_before < top_p  # the top category always has mass_before = 0
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs

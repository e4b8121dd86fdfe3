"""What a user asks a sampler for, and categorical draws in float64.

float32 Gumbel noise truncates the tails of a distribution, which lowers diversity (and
flatters generative perplexity), so every sampler draws through ``sample_categorical``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from genodiff.errors import InputValueError


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
        # The messages name the fields and the `genodiff sample` options that set them.
        for name, option in (("num_samples", "--num-samples"), ("length", "--length")):
            if getattr(self, name) < 1:
                raise InputValueError(f"{name} must be >= 1 ({option}), got {getattr(self, name)}")
        if self.steps < 1:
            raise InputValueError(f"steps must be >= 1 (--steps), got {self.steps}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise InputValueError(
                f"temperature must be > 0 and finite (--temperature), got {self.temperature}"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise InputValueError(f"top_p (nucleus) must be in (0, 1], got {self.top_p}")
        if (self.template is None) != (self.given is None):
            raise InputValueError("template and given come together (both or neither)")
        if self.template is not None and (
            self.template.shape != (self.length,) or self.given.shape != (self.length,)
        ):
            raise InputValueError(
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


def time_grid(
    start: float, end: float, steps: int, device: torch.device | str | None = None
) -> Iterator[tuple[Tensor, Tensor]]:
    """The ``steps`` steps (t, s) of the uniform grid t_0 = start, ..., t_steps = end, as 0-d
    float64 tensors on ``device``, computed one step at a time: memory does not grow with
    ``steps`` (``--steps 100000000`` allocates nothing up front).

    t_i = start + i * delta for i < (steps + 1) // 2, else end - (steps - i) * delta, with
    delta = (end - start) / steps: the formula of ``torch.linspace(start, end, steps + 1)``
    (from both ends, so both end points are exact). torch.linspace itself may differ from it
    in the last bit: its vectorised CPU kernel adds the step lane by lane.
    """
    if steps < 1:
        raise InputValueError(f"steps must be >= 1 (--steps), got {steps}")
    delta = (end - start) / steps
    half = (steps + 1) // 2

    def at(i: int) -> Tensor:
        value = start + delta * i if i < half else end - delta * (steps - i)
        return torch.tensor(value, dtype=torch.float64, device=device)

    t = at(0)
    for i in range(1, steps + 1):
        s = at(i)
        yield t, s
        t = s


def sample_categorical(
    probs: Tensor, generator: torch.Generator | None = None, u: Tensor | None = None
) -> Tensor:
    """Draw one category per row of ``probs`` (..., V) by inverting the float64 CDF.

    Rows need not be normalised; zero-probability categories are never drawn. ``u`` (..., 1)
    gives the float64 uniforms to invert (drawn by the caller); by default one is drawn per
    row from ``generator``.
    """
    cdf = probs.to(torch.float64).cumsum(dim=-1)  # (..., V)
    if u is None:
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

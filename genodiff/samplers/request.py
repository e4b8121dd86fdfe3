"""What a user asks a sampler for: ``SampleRequest``."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TypeVar

import torch
from torch import Tensor

from genodiff.errors import InputValueError
from genodiff.generation_config import GenerationConfig
from genodiff.guidance import Guidance

Step = TypeVar("Step")
# (steps done, steps in all): told as a sampler advances, for a progress display only.
StepReport = Callable[[int, int], None]


@dataclass
class SampleRequest:
    """One sampling job: how many sequences, how long, which sampler, which constraints.

    ``template`` and ``given`` (both (length,)) fix positions chosen by the user (a prefix or
    the known bases of an infilling task): where ``given`` is True the output holds
    ``template``, and no sampler may change it. ``block``/``stride`` drive the
    semi-autoregressive sampler (windows of ``block`` tokens, advancing by ``stride``).
    ``on_step`` hears (steps done, steps in all) as the sampler advances; it shows progress and
    changes nothing drawn.

    ``guidance`` (``genodiff.guidance.Guidance``: a class id, gamma, its schedule, an optional
    classifier) draws sequences of one class; None draws from p(x).
    """

    num_samples: int
    length: int
    steps: int = GenerationConfig.steps
    sampler: str | None = None  # None: the objective's default (its first sampler)
    temperature: float = 1.0
    top_p: float = 1.0
    template: Tensor | None = None
    given: Tensor | None = None
    block: int | None = None
    stride: int | None = None
    guidance: Guidance | None = None
    on_step: StepReport | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("num_samples", "length", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InputValueError(f"{name} must be an integer, got {value!r}", parameter=name)
            value = int(value)  # a NumPy integer as the Python one it equals
            setattr(self, name, value)
            if value < 1:
                raise InputValueError(f"{name} must be >= 1, got {value}", parameter=name)
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise InputValueError(
                f"temperature must be > 0 and finite, got {self.temperature}",
                parameter="temperature",
            )
        if not 0.0 < self.top_p <= 1.0:
            raise InputValueError(
                f"top_p (nucleus) must be in (0, 1], got {self.top_p}", parameter="top_p"
            )
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

    def report_step(self, done: int, total: int) -> None:
        """Tell ``on_step`` that ``done`` of the sampler's ``total`` steps are finished."""
        if self.on_step is not None:
            self.on_step(done, total)

    def reporting(self, steps: Iterable[Step], total: int) -> Iterator[Step]:
        """``steps`` one by one, reporting each finished one (of ``total``) to ``on_step``."""
        for done, step in enumerate(steps, 1):
            yield step
            self.report_step(done, total)

    def part(self, index: int, parts: int) -> SampleRequest:
        """This request with its steps reported as part ``index`` (from 0) of ``parts`` equal
        parts of a larger run (a batch of a run, a window of a sequence)."""
        if self.on_step is None:
            return self
        return replace(self, on_step=partial(_report_part, self.on_step, index, parts))


def _report_part(report: StepReport, index: int, parts: int, done: int, total: int) -> None:
    report(index * total + done, parts * total)

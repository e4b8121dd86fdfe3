"""The uniform time grid every step sampler walks, one step at a time."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from genodiff.errors import InputValueError


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
        raise InputValueError(f"steps must be >= 1, got {steps}", parameter="steps")
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

"""The noisy inputs a noisy classifier learns from: states z_t of its generator's forward
process, drawn as the generator's own training draws them (times low-discrepancy or iid in
[sampling_eps, 1], or on the discrete grid of a discrete-time process; [PAD] as the process
treats it). The process decides how to corrupt: the masked process of MDLM, SEDD and D3PM
puts [MASK] at each token with the schedule's probability, UDLM's uniform process replaces
each letter by a uniform letter (``Objective.noisy_states`` names which); both offer the two
methods of ``NoisyStates``."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from genodiff.batch_shard import BatchShard


class NoisyStates(Protocol):
    """A forward process as a noisy classifier's training reads it."""

    def draw_states(
        self,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Times t (B,) drawn by the process and z_t (B, L) at them. With a ``shard``, the
        draws are the global batch's (data-parallel runs), our rows kept."""
        ...

    def states_at(
        self, input_ids: Tensor, t: Tensor, generator: torch.Generator | None = None
    ) -> Tensor:
        """z_t (B, L) at the given times ``t`` (B,)."""
        ...


def inputs_at_time(
    process: NoisyStates, input_ids: Tensor, t: float, generator: torch.Generator | None
) -> Tensor:
    """z_t (B, L) at the fixed time ``t`` (validation at given noise levels; t = 0: clean)."""
    times = torch.full((input_ids.shape[0],), t, device=input_ids.device)  # (B,)
    return process.states_at(input_ids, times, generator)

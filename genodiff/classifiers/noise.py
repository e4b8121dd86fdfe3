"""The noisy inputs a noisy classifier learns from: states z_t of the generator's masked
forward process (``genodiff.objectives.masked_process.MaskedForwardProcess``), drawn as the
generator's own training draws them (times low-discrepancy or iid in [sampling_eps, 1], or on
the discrete grid of a discrete-time process; each token masked with the schedule's
probability; [PAD] as the process treats it)."""

from __future__ import annotations

import torch
from torch import Tensor

from genodiff.batch_shard import BatchShard
from genodiff.objectives.masked_process import MaskedForwardProcess


def noisy_inputs(
    process: MaskedForwardProcess,
    input_ids: Tensor,
    generator: torch.Generator | None,
    shard: BatchShard | None = None,
) -> tuple[Tensor, Tensor]:
    """Times t (B,) drawn by the process and z_t (B, L): ``input_ids`` masked at them. With a
    ``shard``, the draws are the global batch's (data-parallel runs), our rows kept."""
    t, masked = process.draw_noise(input_ids, generator, shard)
    return t, process.corrupt(input_ids, masked)


def inputs_at_time(
    process: MaskedForwardProcess, input_ids: Tensor, t: float, generator: torch.Generator | None
) -> Tensor:
    """z_t (B, L) at the fixed time ``t`` (validation at given noise levels; t = 0: clean)."""
    times = torch.full((input_ids.shape[0],), t, device=input_ids.device)  # (B,)
    draw = torch.rand(input_ids.shape, device=input_ids.device, generator=generator)  # (B, L)
    return process.corrupt(input_ids, process.masked_by(input_ids, times, draw))

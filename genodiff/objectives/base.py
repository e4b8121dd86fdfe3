"""The interface every objective implements; an objective never knows which backbone it drives.

An objective is an ``nn.Module`` so that objectives with parameters of their own (Plaid's
embeddings and learned schedule) are trained, averaged (EMA) and checkpointed with the
backbone; parameter-free objectives (MDLM, SEDD, D3PM, AR) simply hold none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from genodiff.sampling import SampleRequest


@dataclass(frozen=True)
class BatchShard:
    """This process's rows ``start : start + B`` of a global batch of ``total`` rows (data-parallel
    training). An objective draws its noise for all ``total`` rows, from a generator in the same
    state on every process, and keeps these rows, so N processes x batch b draw exactly the noise
    that one process x batch N*b draws."""

    start: int
    total: int


def shard_rows(shard: BatchShard | None, batch: int) -> tuple[int, slice]:
    """(the number of rows to draw noise for, the slice of them that ``batch`` rows are)."""
    if shard is None:
        return batch, slice(0, batch)
    if shard.start < 0 or shard.start + batch > shard.total:
        raise ValueError(f"rows {shard.start}:{shard.start + batch} lie outside {shard}")
    return shard.total, slice(shard.start, shard.start + batch)


class Objective(nn.Module, ABC):
    """A training loss (a per-token NELBO or NLL in nats) and the samplers that go with it."""

    #: Names accepted by ``SampleRequest.sampler``; the first is the default.
    samplers: tuple[str, ...] = ("ancestral",)
    #: Those of ``samplers`` that ignore ``SampleRequest.steps``.
    stepless_samplers: tuple[str, ...] = ()
    #: True when ``loss`` is the exact NLL (AR) rather than an upper bound (diffusion).
    exact_likelihood: bool = False
    #: Noise draws per held-out sequence when evaluating (set by configs that have it).
    eval_t_samples: int = 1
    #: What the objective needs of the backbone's ``capabilities.causal``: False for diffusion
    #: (a masked position is predicted from the context on both sides), True for next-token
    #: prediction, None when either works. Checked before training (``training.py``).
    causal_backbone: bool | None = False
    #: Allowed ranges of constructor arguments, checked when a config is loaded
    #: (``genodiff.config_values``); merged with a subclass's own table.
    config_ranges: dict[str, str] = {"eval_t_samples": ">=1"}

    @abstractmethod
    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its scored tokens in nats (B,), scored tokens (B,)).

        ``input_ids`` is (B, L); [PAD] positions are neither corrupted nor scored. ``shard``
        places the batch in a data-parallel global batch (see ``BatchShard``).
        """

    @abstractmethod
    def sample(
        self, model: nn.Module, request: SampleRequest, generator: torch.Generator | None = None
    ) -> Tensor:
        """(request.num_samples, request.length) token ids drawn from ``model``.

        Positions where ``request.given`` is True hold ``request.template`` unchanged.
        """

    def sampler_name(self, request: SampleRequest) -> str:
        """The sampler ``request`` asks for (the default when None); ValueError if unknown."""
        name = request.sampler or self.samplers[0]
        if name not in self.samplers:
            raise ValueError(
                f"{type(self).__name__} has no sampler {name!r}; "
                f"choose one of: {', '.join(self.samplers)}"
            )
        return name

    def steps_used(self, request: SampleRequest) -> int | None:
        """``request.steps``, or None when the sampler ``request`` asks for ignores it (what
        the samples' provenance records)."""
        return None if self.sampler_name(request) in self.stepless_samplers else request.steps

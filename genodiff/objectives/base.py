"""The interface every objective implements; an objective never knows which backbone it drives.

An objective is an ``nn.Module`` so that objectives with parameters of their own (Plaid's
embeddings and learned schedule) are trained, averaged (EMA) and checkpointed with the
backbone; parameter-free objectives (MDLM, SEDD, D3PM, AR) simply hold none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.errors import InputValueError
from genodiff.sampling import SampleRequest


class Objective(nn.Module, ABC):
    """A training loss (a per-token NELBO or NLL in nats) and the samplers that go with it."""

    #: Names accepted by ``SampleRequest.sampler``; the first is the default.
    samplers: tuple[str, ...] = ("ancestral",)
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
            raise InputValueError(
                f"{type(self).__name__} has no sampler {name!r}; "
                f"choose one of: {', '.join(self.samplers)}"
            )
        return name

"""D3PM with the absorbing ([MASK]) forward process (Austin et al., 2021).

T discrete steps with alpha_bar_t = 1 - t/T (a token is masked by step t with probability
t/T: Austin et al.'s 1/(T - t + 1) absorbing schedule). The reverse step is the
x0-parameterised posterior p_theta(x_{t-1} | x_t) = sum_x0 q(x_{t-1} | x_t, x0) p(x0 | x_t)
with p(x0 | x_t) ∝ q(x_t | x0) x_theta(x0), and x_theta keeps its [MASK] logit. The NELBO is

    sum_{t=2..T} KL(q(x_{t-1} | x_t, x0) || p_theta(x_{t-1} | x_t)) - log p_theta(x0 | x_1),

the prior term being zero (alpha_bar_T = 0). It is estimated with one t per sequence drawn
uniformly (low-discrepancy) on {1..T} and multiplied by T; the t = 1 draw is the
reconstruction term. This is MDLM's discrete-time NELBO with ``noise_eps=0`` and without zero
masking, so D3PM reuses that code (see ``genodiff.objectives.mdlm``).

Hybrid loss: in training mode (``self.training``, i.e. ``nn.Module.train()``) ``loss`` adds
``hybrid_lambda`` * the cross-entropy -log x_theta(x0 | x_t) of the masked tokens to the
NELBO (Austin et al.'s L_vb + lambda L_aux, lambda = 0.01). In eval mode (validation and test
run the module in eval mode) ``loss`` returns the NELBO alone, so reported perplexities are
bounds. ``hybrid_lambda=0`` trains on the pure NELBO.

Upstream MDLM's D3PM baseline (``parameterization=d3pm``) also adds -log x_theta(x0 | x0) from
the clean sequence; ``carry_over=False`` reproduces that, at the cost of a second forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.errors import InputValueError
from genodiff.objectives.mdlm import MDLM
from genodiff.registry import register_objective


@register_objective("d3pm")
class D3PM(MDLM):
    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        num_steps: int = 1000,
        hybrid_lambda: float = 0.01,
        zero_masking: bool = False,
        carry_over: bool = True,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        eval_t_samples: int = 1,
        sample_ids: Sequence[int] | None = None,
    ) -> None:
        if not isinstance(num_steps, int) or num_steps < 1:
            raise InputValueError(f"D3PM needs num_steps >= 1 (discrete time), got {num_steps!r}")
        if hybrid_lambda < 0:
            raise InputValueError(
                f"hybrid_lambda must be >= 0 (0 = pure NELBO), got {hybrid_lambda}"
            )
        super().__init__(
            mask_id=mask_id,
            pad_id=pad_id,
            noise_schedule="loglinear",
            noise_eps=0.0,
            num_steps=num_steps,
            carry_over=carry_over,
            zero_masking=zero_masking,
            sampling_eps=sampling_eps,
            low_discrepancy=low_discrepancy,
            time_conditioning=time_conditioning,
            eval_t_samples=eval_t_samples,
            sample_ids=sample_ids,
        )
        self.hybrid_lambda = hybrid_lambda

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(NELBO (B,) [+ hybrid_lambda * CE (B,) in training mode], scored tokens (B,))."""
        t, masked = self.draw_noise(input_ids, generator, shard)
        nelbo, cross_entropy = self.nelbo_terms(model, input_ids, t, masked)  # (B,), (B,)
        if self.training and self.hybrid_lambda > 0:
            nelbo = nelbo + self.hybrid_lambda * cross_entropy
        return nelbo, (input_ids != self.pad_id).sum(dim=-1)

"""D3PM with the absorbing ([MASK]) forward process (Austin et al., 2021).

T discrete steps with alpha_bar_t = 1 - t/T (a token is masked by step t with probability
t/T: Austin et al.'s 1/(T - t + 1) absorbing schedule). The reverse step is the
x0-parameterised posterior p_theta(x_{t-1} | x_t) = sum_x0 q(x_{t-1} | x_t, x0) p(x0 | x_t)
with p(x0 | x_t) ∝ q(x_t | x0) x_theta(x0), and x_theta keeps its [MASK] logit. The NELBO is

    sum_{t=2..T} KL(q(x_{t-1} | x_t, x0) || p_theta(x_{t-1} | x_t)) - log p_theta(x0 | x_1),

the prior term being zero (alpha_bar_T = 0). It is estimated with one t per sequence drawn
uniformly (low-discrepancy) on {1..T} and multiplied by T; the t = 1 draw is the
reconstruction term. This is MDLM's discrete-time NELBO with ``noise_eps=0`` and the [MASK]
logit kept: both hold a ``MaskedForwardProcess`` and share the KL terms (``x0_posterior``),
and both are sampled by the masked-diffusion samplers.

Hybrid loss: in training mode (``self.training``, i.e. ``nn.Module.train()``) ``loss`` adds
the auxiliary cross-entropy -log x_theta(x0 | x_t) of the masked tokens, weighted as Austin et
al. weight it. Their training loss at the sampled step is KL_t + lambda * CE_t (one bound term,
not T of them, beside the cross-entropy at the same x_t; lambda = 0.01 was tuned on that
scale). ``loss`` estimates the NELBO as T * KL_t, so the same loss on this scale is
T * (KL_t + lambda CE_t) = NELBO + T * ``hybrid_lambda`` * CE: lambda = 0.01 weighs the
cross-entropy as it does there (without the factor T it would be T times weaker, and at
T = 1000 negligible). Unmasked tokens add no cross-entropy: the reverse process copies them,
so x_theta there is never used. In eval mode (validation and test run the module in eval
mode) ``loss`` returns the NELBO alone, so reported perplexities are bounds.
``hybrid_lambda=0`` trains on the pure NELBO.

Checkpoints of earlier genodiff versions list ``zero_masking: false`` and ``carry_over: true`` in
their objective section (MDLM's flags, which D3PM took then); they load (``retired_options``,
``Objective.from_saved``). Upstream MDLM's D3PM baseline (``parameterization=d3pm``, which
also adds -log x_theta(x0 | x0)) is ``objective=mdlm`` with ``num_steps`` = T, ``noise_eps=0``,
``zero_masking=false`` and ``carry_over=false``, without the hybrid term.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.objectives import x0_posterior
from genodiff.objectives.base import Objective
from genodiff.processes.masked import HoldsMaskedProcess, MaskedForwardProcess, Padding
from genodiff.processes.schedules import LogLinearSchedule
from genodiff.randomness.noise import Noise
from genodiff.registry import register_objective
from genodiff.samplers import MASKED_SAMPLERS


@register_objective("d3pm")
class D3PM(HoldsMaskedProcess, Objective):
    """Absorbing D3PM; ``padding`` as MDLM's (``MaskedForwardProcess``)."""

    samplers = MASKED_SAMPLERS
    config_ranges = {
        "num_steps": ">=1; D3PM runs in discrete time",
        "hybrid_lambda": ">=0; 0 = pure NELBO",
        "sampling_eps": "(0, 1)",
    }
    retired_options = {"zero_masking": False, "carry_over": True}
    retired_advice = (
        "Load it as objective=mdlm with num_steps = D3PM's, noise_eps=0 and the same "
        "zero_masking / carry_over: the same NELBO and samplers, without the hybrid term."
    )

    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        num_steps: int = 1000,
        hybrid_lambda: float = 0.01,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        eval_t_samples: int = 1,
        sample_ids: Sequence[int] | None = None,
        padding: Padding = "given",
    ) -> None:
        super().__init__()
        self.process = MaskedForwardProcess(
            mask_id,
            pad_id,
            LogLinearSchedule(eps=0.0),
            num_steps=num_steps,
            sampling_eps=sampling_eps,
            low_discrepancy=low_discrepancy,
            time_conditioning=time_conditioning,
            sample_ids=sample_ids,
            padding=padding,
        )
        self.hybrid_lambda = hybrid_lambda
        self.eval_t_samples = eval_t_samples

    def x0_log_probs(
        self, model: nn.Module, x_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """What the masked samplers draw from: ``x0_posterior.x0_log_probs`` (B, L, V)."""
        return x0_posterior.x0_log_probs(self.process, model, x_t, t, labels)

    def nelbo_terms(
        self,
        model: nn.Module,
        input_ids: Tensor,
        t: Tensor,
        masked: Tensor,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """For given times ``t`` (B,) and masked positions ``masked`` (B, L): the NELBO
        estimate (B,) and the cross-entropy -log x_theta(x0) of the masked tokens (B,)."""
        return x0_posterior.nelbo_terms(self.process, model, input_ids, t, masked, None, labels)

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(NELBO (B,) [+ T * hybrid_lambda * CE (B,) in training mode: module doc], scored
        tokens (B,))."""
        t, masked = self.process.draw_noise(input_ids, generator, shard)
        nelbo, cross_entropy = self.nelbo_terms(model, input_ids, t, masked, labels)  # (B,) x 2
        if self.training and self.hybrid_lambda > 0:
            nelbo = nelbo + self.process.num_steps * self.hybrid_lambda * cross_entropy
        return nelbo, self.process.scored(input_ids).sum(dim=-1)

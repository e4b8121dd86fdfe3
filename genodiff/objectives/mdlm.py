"""MDLM (Sahoo et al., 2024): masked diffusion with the SUBS parameterisation.

The forward process (``genodiff.processes.masked.MaskedForwardProcess``) replaces each scored
token by [MASK] with probability p_t = 1 - alpha(t); the reverse process is x0-parameterised,
and the NELBO terms of a masked token (discrete time with ``num_steps`` T > 0, continuous time
with T = 0) are derived in ``x0_posterior``. SUBS adds two flags:

- Zero masking (``zero_masking=True``): the [MASK] logit is removed, x_theta([MASK]) = 0, and
  the KL of a masked token is (alpha_s - alpha_t) / (1 - alpha_t) * -log x_theta(x0): the
  paper's Eq. 9 (continuous time: w(t) * -log x_theta(x0), w = sigma'(t) / expm1(sigma(t))).
  Without it the network may put mass on [MASK]; that mass is wasted (the NELBO is larger).
- Carry-over (``carry_over=True``): the prediction at an unmasked position is the input
  token itself. The KL terms already copy unmasked tokens, so carry-over changes only the
  reconstruction from the clean sequence, -log x_theta(x0 | x0) at t = 0, which it makes zero.
  ``carry_over=False`` adds that term, summed over the scored tokens, from a second forward
  pass of the network on the clean sequence. This is upstream MDLM's semantics: its
  ``subs`` parameterisation carries over, its ``d3pm`` parameterisation (the "w/o carry-over"
  ablation of the paper's Table 8, ``subs_masking`` being zero masking) adds
  ``_reconstruction_loss`` = -log x_theta(x0 | x0) to ``_d3pm_loss``.

As upstream, the prior term at t = 1 (zero when alpha(1) = 0) and any noise at t = 0 (alpha(0)
< 1 for the geometric schedule) are ignored, so with ``noise_eps`` > 0 a fraction eps of the
tokens is never scored: the bound may sit below the NLL, in expectation over the data by up to
about L * eps * log V (per sequence by about eps times its NLL).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.objectives import x0_posterior
from genodiff.objectives.base import Objective
from genodiff.processes.masked import HoldsMaskedProcess, MaskedForwardProcess, Padding
from genodiff.processes.schedules import build_schedule
from genodiff.randomness.noise import Noise
from genodiff.registry import register_objective
from genodiff.samplers import MASKED_SAMPLERS


@register_objective("mdlm")
class MDLM(HoldsMaskedProcess, Objective):
    """Masked diffusion; see the module docstring for the maths of every flag.

    ``noise_eps`` parameterises the loglinear and cosine schedules, ``sigma_min`` and
    ``sigma_max`` the linear and geometric ones (None = that schedule's default).
    ``mask_id``, ``pad_id`` and ``sample_ids`` (the ids samplers may draw; None = every id
    but [MASK]) come from the run's tokenizer. ``padding`` says how [PAD] is treated: "given"
    (never corrupted nor scored: DNA), "bound" (corrupted and scored: a bound on the padded
    sequence, its length included) or "upstream" (corrupted, never scored: upstream MDLM's
    text convention, not a bound); ``genodiff.processes.masked``.
    """

    samplers = MASKED_SAMPLERS
    config_ranges = {"num_steps": ">=0; 0 = continuous time", "sampling_eps": "(0, 1)"}

    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        noise_schedule: str = "loglinear",
        noise_eps: float = 1e-3,
        sigma_min: float | None = None,
        sigma_max: float | None = None,
        num_steps: int = 0,
        carry_over: bool = True,
        zero_masking: bool = True,
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
            build_schedule(noise_schedule, noise_eps, sigma_min, sigma_max),
            num_steps=num_steps,
            sampling_eps=sampling_eps,
            low_discrepancy=low_discrepancy,
            time_conditioning=time_conditioning,
            sample_ids=sample_ids,
            padding=padding,
        )
        self.carry_over = carry_over
        self.zero_masking = zero_masking
        self.eval_t_samples = eval_t_samples

    @property
    def _removed(self) -> str | None:
        """The column the training loss removes: [MASK] with zero masking, none without."""
        return "mask" if self.zero_masking else None

    def x0_log_probs(
        self, model: nn.Module, x_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """What the masked samplers draw from: ``x0_posterior.x0_log_probs`` (B, L, V)."""
        return x0_posterior.x0_log_probs(self.process, model, x_t, t, labels)

    def _reconstruction(
        self, model: nn.Module, input_ids: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """-log x_theta(x0 | x0) at t = 0 summed over the scored tokens: (B,)."""
        t0 = torch.zeros(input_ids.shape[0], device=input_ids.device)
        log_x = x0_posterior.log_x_theta(self.process, model, input_ids, t0, self._removed, labels)
        nll = -log_x.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        return torch.where(self.process.scored(input_ids), nll, 0.0).sum(dim=-1)

    def nelbo_terms(
        self,
        model: nn.Module,
        input_ids: Tensor,
        t: Tensor,
        masked: Tensor,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """For given times ``t`` (B,) and masked positions ``masked`` (B, L): the NELBO
        estimate (B,) and the cross-entropy -log x_theta(x0) summed over masked tokens (B,).

        ``loss`` draws t and ``masked``; this lets tests and evaluations enumerate them.
        """
        nelbo, cross_entropy = x0_posterior.nelbo_terms(
            self.process, model, input_ids, t, masked, self._removed, labels
        )
        if not self.carry_over:
            nelbo = nelbo + self._reconstruction(model, input_ids, labels)
        return nelbo, cross_entropy

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its tokens in nats (B,), scored tokens (B,)).

        Positions holding [PAD] (N bases, padding) are corrupted and scored as ``padding``
        says (``MaskedForwardProcess``).
        """
        t, masked = self.process.draw_noise(input_ids, generator, shard)
        nelbo, _ = self.nelbo_terms(model, input_ids, t, masked, labels)
        return nelbo, self.process.scored(input_ids).sum(dim=-1)

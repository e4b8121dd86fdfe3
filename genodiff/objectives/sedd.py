"""SEDD (Lou et al., 2024) with the absorbing graph: score entropy on masked diffusion.

Forward process and time draws are MDLM's in continuous time (each scored token becomes
[MASK] with probability 1 - alpha(t) = -expm1(-sigma(t)); low-discrepancy t in
[sampling_eps, 1]): SEDD holds the same ``MaskedForwardProcess``; the parameterisation, the
loss and the samplers (``genodiff.samplers.score_entropy``) differ. sigma(1) must be finite
(noise_eps > 0 for the log-linear schedule): the scores are scaled by 1 / expm1(sigma).

Scores. At a masked position the network estimates the ratios s_y = p_t(y) / p_t([MASK]) for
every "real" category y. The real categories are all output columns except [MASK] (the same
set MDLM's SUBS softmax normalises over), so V - 1 = logits.shape[-1] - 1 (15 for the padded
DNA vocabulary). The log-score is

    log s_y = out_y - log expm1(sigma) - log(V - 1),   log s_{x_t} = 0,   [MASK] removed,

which makes a zero network output the uniform ratio r / (V - 1), r = 1 / expm1(sigma).
sigma always enters this scaling, even when the network is not time-conditioned (it is passed
to the network only when ``time_conditioning`` is True).

Loss (continuous time, per masked token, weighted by sigma'(t)):

    sigma'(t) * [ sum_{y != mask} s_y - r log s_{x0} + r (log r - 1) ].

For normalised scores s_y = r p(y) this is exactly MDLM's  -log p(x0) sigma'(t) / expm1(sigma).

Samplers: ``analytic`` (Tweedie tau-leaping, the default) and ``euler``; see
``genodiff.samplers.score_entropy``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.conditioning import network_kwargs
from genodiff.errors import InputValueError
from genodiff.objectives.base import Objective
from genodiff.processes.masked import HoldsMaskedProcess, MaskedForwardProcess, Padding
from genodiff.processes.schedules import build_schedule
from genodiff.randomness.noise import Noise
from genodiff.registry import register_objective
from genodiff.samplers.base import Sampler
from genodiff.samplers.categorical import NEG_INF
from genodiff.samplers.score_entropy import tau_leaping


@register_objective("sedd")
class SEDD(HoldsMaskedProcess, Objective):
    """Score entropy on the masked forward process; ``mask_id``, ``pad_id`` and
    ``sample_ids`` come from the run's tokenizer; ``padding`` as MDLM's."""

    samplers = {
        # Tweedie tau-leaping; first-order tau-leaping. Guided by score tempering: the x0 form.
        "analytic": Sampler(partial(tau_leaping, rule="analytic"), guidance_forms=("x0",)),
        "euler": Sampler(partial(tau_leaping, rule="euler"), guidance_forms=("x0",)),
    }
    config_ranges = {"sampling_eps": "(0, 1)"}

    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        noise_schedule: str = "loglinear",
        noise_eps: float = 1e-3,
        sigma_min: float | None = None,
        sigma_max: float | None = None,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        eval_t_samples: int = 1,
        sample_ids: Sequence[int] | None = None,
        padding: Padding = "given",
    ) -> None:
        super().__init__()
        schedule = build_schedule(noise_schedule, noise_eps, sigma_min, sigma_max)
        sigma_1 = float(schedule.sigma(torch.tensor(1.0, dtype=torch.float64)))
        if not math.isfinite(sigma_1):
            raise InputValueError(
                f"SEDD needs a finite sigma(1) (its scores scale with 1 / expm1(sigma)); the "
                f"{noise_schedule!r} schedule gives {sigma_1}. Use noise_eps > 0."
            )
        self.process = MaskedForwardProcess(
            mask_id,
            pad_id,
            schedule,
            sampling_eps=sampling_eps,
            low_discrepancy=low_discrepancy,
            time_conditioning=time_conditioning,
            sample_ids=sample_ids,
            padding=padding,
        )
        self.eval_t_samples = eval_t_samples

    def log_score(
        self, model: nn.Module, x_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """log s_theta(x_t, t[, labels]) in float32: (B, L, V); the [MASK] column is NEG_INF."""
        sigma = self.process.schedule.sigma(t)  # (B,)
        network_sigma = self.process.network_sigma(t)
        out = model(x_t, network_sigma, **network_kwargs(labels)).float()  # (B, L, V)
        offset = torch.log(torch.expm1(sigma)) + math.log(out.shape[-1] - 1)  # (B,)
        log_score = (out - offset[:, None, None]).scatter(-1, x_t[..., None], 0.0)
        mask_column = torch.tensor([self.process.mask_id], device=out.device)
        return log_score.index_fill(-1, mask_column, NEG_INF)

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (score-entropy NELBO summed over its tokens (B,), scored tokens (B,)).

        Draws t and the mask from the forward process as MDLM does, so both see identical
        corruptions for the same generator state. [PAD] positions are corrupted and scored as
        ``padding`` says.
        """
        t, masked = self.process.draw_noise(input_ids, generator, shard)  # (B,), (B, L)
        sigma = self.process.schedule.sigma(t)  # (B,)
        x_t = self.process.corrupt(input_ids, masked)
        log_score = self.log_score(model, x_t, t, labels)  # (B, L, V)
        ratio = (1.0 / torch.expm1(sigma))[:, None]  # (B, 1): r, the true total score
        # (B, L); exp(NEG_INF) drops [MASK]; unmasked rows are blanked before exp so that
        # their unused scores cannot overflow into a NaN gradient
        positive = torch.where(masked[..., None], log_score, NEG_INF).exp().sum(dim=-1)
        negative = ratio * log_score.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        constant = ratio * (torch.log(ratio) - 1)  # (B, 1)
        entropy = positive - negative + constant  # (B, L)
        weight = self.process.schedule.dsigma(t)[:, None]  # (B, 1)
        scored = self.process.scored_masked(input_ids, masked)  # (B, L)
        nelbo = torch.where(scored, entropy * weight, 0.0).sum(dim=-1)  # (B,)
        return nelbo, self.process.scored(input_ids).sum(dim=-1)

"""SEDD (Lou et al., 2024) with the absorbing graph: score entropy on masked diffusion.

Forward process and time draws are MDLM's in continuous time (each scored token becomes
[MASK] with probability 1 - alpha(t) = -expm1(-sigma(t)); low-discrepancy t in
[sampling_eps, 1]), so this class reuses MDLM's schedule and ``draw_noise``; the
parameterisation, the loss and the samplers differ. sigma(1) must be finite (noise_eps > 0
for the log-linear schedule): the scores are scaled by 1 / expm1(sigma).

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

Samplers (both from all-[MASK], given positions never masked, then a final denoiser step that
unmasks everything left with the score distribution at t = sampling_eps):
- ``analytic`` (Tweedie tau-leaping): between t and s a masked token jumps to y with
  probability s_y expm1(sigma(t) - sigma(s)), else stays masked. With normalised scores this is
  the exact posterior: jump mass (alpha_s - alpha_t) / (1 - alpha_t), value ~ p.
- ``euler``: jump to y with probability s_y sigma'(t) (t - s) (first-order in the step).
  For the log-linear schedule expm1(sigma_t - sigma_s) = sigma'(t) (t - s): both coincide.
Temperature, top-p and ``sample_ids`` reshape which token a jump lands on (the score
distribution), not the jump mass; when a jump mass exceeds 1 (possible for unnormalised
scores) the token always jumps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.objectives.base import BatchShard
from genodiff.objectives.mdlm import MAX_CONDITIONING_SIGMA, MDLM, NEG_INF
from genodiff.registry import register_objective
from genodiff.sampling import SampleRequest, sample_categorical, sharpen, time_grid


@register_objective("sedd")
class SEDD(MDLM):
    samplers = ("analytic", "euler")
    stepless_samplers = ()

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
    ) -> None:
        super().__init__(
            mask_id=mask_id,
            pad_id=pad_id,
            noise_schedule=noise_schedule,
            noise_eps=noise_eps,
            sigma_min=sigma_min,
            sigma_max=sigma_max,
            num_steps=0,
            sampling_eps=sampling_eps,
            low_discrepancy=low_discrepancy,
            time_conditioning=time_conditioning,
            eval_t_samples=eval_t_samples,
            sample_ids=sample_ids,
        )
        sigma_1 = float(self.schedule.sigma(torch.tensor(1.0, dtype=torch.float64)))
        if not math.isfinite(sigma_1):
            raise ValueError(
                f"SEDD needs a finite sigma(1) (its scores scale with 1 / expm1(sigma)); the "
                f"{noise_schedule!r} schedule gives {sigma_1}. Use noise_eps > 0."
            )

    def log_score(self, model: nn.Module, x_t: Tensor, t: Tensor) -> Tensor:
        """log s_theta(x_t, t) in float32: (B, L, V); the [MASK] column is NEG_INF."""
        sigma = self.schedule.sigma(t)  # (B,)
        conditioning = sigma.clamp_max(MAX_CONDITIONING_SIGMA) if self.time_conditioning else None
        out = model(x_t, conditioning).float()  # (B, L, V)
        offset = torch.log(torch.expm1(sigma)) + math.log(out.shape[-1] - 1)  # (B,)
        log_score = (out - offset[:, None, None]).scatter(-1, x_t[..., None], 0.0)
        mask_column = torch.tensor([self.mask_id], device=out.device)
        return log_score.index_fill(-1, mask_column, NEG_INF)

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (score-entropy NELBO summed over its tokens (B,), scored tokens (B,)).

        Draws t and the mask with MDLM's ``draw_noise``, so both see identical corruptions for
        the same generator state. [PAD] positions are never masked and never scored.
        """
        t, masked = self.draw_noise(input_ids, generator, shard)  # (B,), (B, L)
        sigma = self.schedule.sigma(t)  # (B,)
        x_t = input_ids.masked_fill(masked, self.mask_id)
        log_score = self.log_score(model, x_t, t)  # (B, L, V)
        ratio = (1.0 / torch.expm1(sigma))[:, None]  # (B, 1): r, the true total score
        # (B, L); exp(NEG_INF) drops [MASK]; unmasked rows are blanked before exp so that
        # their unused scores cannot overflow into a NaN gradient
        positive = torch.where(masked[..., None], log_score, NEG_INF).exp().sum(dim=-1)
        negative = ratio * log_score.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        constant = ratio * (torch.log(ratio) - 1)  # (B, 1)
        entropy = positive - negative + constant  # (B, L)
        weight = self.schedule.dsigma(t)[:, None]  # (B, 1)
        nelbo = torch.where(masked, entropy * weight, 0.0).sum(dim=-1)  # (B,)
        return nelbo, (input_ids != self.pad_id).sum(dim=-1)

    def transition_probs(
        self, log_score: Tensor, t: Tensor, s: Tensor, rule: str, request: SampleRequest
    ) -> Tensor:
        """float64 probabilities (..., V) of the state at time s for a token masked at t, from
        its log-scores (..., V) (``t``, ``s`` 0-d float64 tensors).

        The jump mass to the real categories is total_score * rate, rate = expm1(sigma_t -
        sigma_s) (analytic) or sigma'(t) (t - s) (euler), split by the (sharpened) score
        distribution; the rest stays on [MASK].
        """
        if rule == "analytic":
            rate = torch.expm1(self.schedule.sigma(t) - self.schedule.sigma(s))
        else:
            rate = self.schedule.dsigma(t) * (t - s)
        log_score = log_score.double()
        total = log_score.logsumexp(dim=-1).exp()  # (n, L)
        jump = (total * rate).clamp_max(1.0)  # (n, L)
        probs = sharpen(self._landing(log_score), request.temperature, request.top_p)
        probs = probs * jump[..., None]
        probs[..., self.mask_id] = 1.0 - jump
        return probs  # (..., V)

    def _landing(self, log_score: Tensor) -> Tensor:
        """Log-scores (..., V) with the undrawable ids removed: where a jump may land. The
        jump mass itself still counts every real category."""
        return log_score.masked_fill(
            self.undrawable(log_score.shape[-1], log_score.device), NEG_INF
        )

    @torch.no_grad()
    def sample(
        self, model: nn.Module, request: SampleRequest, generator: torch.Generator | None = None
    ) -> Tensor:
        """``request.steps`` steps of the requested rule from t = 1 to sampling_eps, then the
        final denoiser: every token still masked draws from the score distribution. Only the
        masked positions' scores go to float64 (``_draw_masked``)."""
        rule = self.sampler_name(request)
        device = next(model.parameters()).device
        n = request.num_samples
        x, given = request.canvas(self.mask_id, device)  # (n, L), (n, L)
        for t, s in time_grid(1.0, self.sampling_eps, request.steps):
            masked = (x == self.mask_id) & ~given  # (n, L)
            if not masked.any():
                break
            log_score = self.log_score(model, x, t.expand(n).float().to(device))  # (n, L, V)
            x = _draw_masked(
                x, masked, self.transition_probs(log_score[masked], t, s, rule, request), generator
            )
        masked = (x == self.mask_id) & ~given
        if masked.any():
            t_final = torch.full((n,), self.sampling_eps, device=device)
            log_score = self.log_score(model, x, t_final)[masked]  # (M, V)
            probs = sharpen(self._landing(log_score), request.temperature, request.top_p)
            x = _draw_masked(x, masked, probs, generator)
        return x


def _draw_masked(
    x: Tensor, masked: Tensor, probs: Tensor, generator: torch.Generator | None
) -> Tensor:
    """x (n, L) with its M masked positions (row-major order) drawn from ``probs`` (M, V).

    One uniform is drawn for every position, masked or not, exactly as one draw over all
    (n, L) positions would, and the masked ones are used: the same seed gives the same
    samples as drawing everywhere and keeping the masked positions, at the float64 cost of the
    masked rows alone."""
    u = torch.rand((*x.shape, 1), dtype=torch.float64, device=x.device, generator=generator)
    return x.masked_scatter(masked, sample_categorical(probs, u=u[masked]))

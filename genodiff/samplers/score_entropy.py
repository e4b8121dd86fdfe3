"""SEDD's samplers: tau-leaping on the scores of a masked (absorbing) diffusion model.

Both start from all-[MASK] (given positions never masked), take ``request.steps`` steps from
t = 1 to sampling_eps, then a final denoiser step that unmasks everything left with the score
distribution at t = sampling_eps:

- ``analytic`` (Tweedie tau-leaping): between t and s a masked token jumps to y with
  probability s_y expm1(sigma(t) - sigma(s)), else stays masked. With normalised scores this is
  the exact posterior: jump mass (alpha_s - alpha_t) / (1 - alpha_t), value ~ p.
- ``euler``: jump to y with probability s_y sigma'(t) (t - s) (first-order in the step).
  For the log-linear schedule expm1(sigma_t - sigma_s) = sigma'(t) (t - s): both coincide.

Temperature, top-p and ``sample_ids`` reshape which token a jump lands on (the score
distribution), not the jump mass; when a jump mass exceeds 1 (possible for unnormalised
scores) the token always jumps. Only the masked positions' scores go to float64.

Classifier-free guidance (``request.guidance``, ``Guide.combine_scores``): for an absorbing
process the concrete score of a masked position is s_v = p(x0_l = v | z_t) / expm1(sigma(t)),
its total the data-independent rate 1 / expm1(sigma(t)) times the normalised score
distribution p(x0_l | z_t). Tempering the scores of the class and of the null label,
log s~ = gamma log s(., y) + (1 - gamma) log s(., null), and renormalising the distribution
while keeping the (geometric mean) total is therefore MDLM's D-CFG exactly: the landing
distribution is the tempered x0 prediction and the jump rate is unchanged. Tempering alone,
without renormalising, would change the jump rate with gamma (by Hoelder's inequality the
total of a geometric mean of two score vectors is below the true rate for gamma in (0, 1)).
This is the x0 form of guidance (``genodiff.guidance``), the only one these samplers draw
(``Sampler.guidance_forms``): a transition form would temper the tau-leaping transitions,
staying masked included (the geometric mean of the two stay masses beside the letters'), which
changes the jump rate; it is not offered (MDLM and D3PM offer it). Classifier guidance (D-CBG)
is refused here: it is offered for MDLM and D3PM.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal, Protocol

import torch
from torch import Tensor, nn

from genodiff.guidance import Guide
from genodiff.randomness.noise import Noise
from genodiff.samplers.categorical import NEG_INF, sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid

if TYPE_CHECKING:
    from genodiff.processes.masked import MaskedForwardProcess

Rule = Literal["analytic", "euler"]


class ScoreModel(Protocol):
    """What a score-entropy objective (SEDD) offers these samplers."""

    process: MaskedForwardProcess

    def log_score(
        self, model: nn.Module, x_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """(B, L, V) log-scores at times t (B,)[, labels (B,)]; the [MASK] column NEG_INF."""
        ...


def tau_leaping(
    objective: ScoreModel,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
    rule: Rule,
) -> Tensor:
    """``request.steps`` steps of ``rule`` from t = 1 to sampling_eps, then the final
    denoiser: every token still masked draws from the score distribution."""
    process = objective.process
    device = next(model.parameters()).device
    n = request.num_samples
    x, given = request.canvas(process.mask_id, device)  # (n, L), (n, L)
    network = partial(objective.log_score, model)
    guide = Guide(request.guidance, model, network, "SEDD", allow_classifier=False)
    grid = time_grid(1.0, process.sampling_eps, request.steps)
    for t, s in request.reporting(grid, request.steps):
        masked = (x == process.mask_id) & ~given  # (n, L)
        if not masked.any():
            request.report_step(request.steps, request.steps)  # the steps left draw nothing
            break
        parts = guide.parts(x, t.expand(n).float().to(device), masked)  # (n, L, K, V)
        log_score = guide.combine_scores(parts[masked], 1 - t)  # (M, V)
        probs = transition_probs(process, log_score, t, s, rule, request)  # (M, V)
        x = _draw_masked(x, masked, probs, noise)
    masked = (x == process.mask_id) & ~given
    if masked.any():
        t_final = torch.full((n,), process.sampling_eps, device=device)
        parts = guide.parts(x, t_final, masked)[masked]  # (M, K, V)
        log_score = guide.combine_scores(parts, 1 - t_final[0])  # (M, V)
        probs = sharpen(landing(process, log_score), request.temperature, request.top_p)
        x = _draw_masked(x, masked, probs, noise)
    return x


def transition_probs(
    process: MaskedForwardProcess,
    log_score: Tensor,
    t: Tensor,
    s: Tensor,
    rule: Rule,
    request: SampleRequest,
) -> Tensor:
    """float64 probabilities (..., V) of the state at time s for a token masked at t, from
    its log-scores (..., V) (``t``, ``s`` 0-d float64 tensors).

    The jump mass to the real categories is total_score * rate, rate = expm1(sigma_t -
    sigma_s) (analytic) or sigma'(t) (t - s) (euler), split by the (sharpened) score
    distribution; the rest stays on [MASK].
    """
    schedule = process.schedule
    if rule == "analytic":
        rate = torch.expm1(schedule.sigma(t) - schedule.sigma(s))
    else:
        rate = schedule.dsigma(t) * (t - s)
    log_score = log_score.double()
    total = log_score.logsumexp(dim=-1).exp()  # (...,)
    jump = (total * rate).clamp_max(1.0)  # (...,)
    probs = sharpen(landing(process, log_score), request.temperature, request.top_p)
    probs = probs * jump[..., None]
    probs[..., process.mask_id] = 1.0 - jump
    return probs  # (..., V)


def landing(process: MaskedForwardProcess, log_score: Tensor) -> Tensor:
    """Log-scores (..., V) with the undrawable ids removed: where a jump may land. The
    jump mass itself still counts every real category."""
    return log_score.masked_fill(process.undrawable(log_score.shape[-1], log_score.device), NEG_INF)


def _draw_masked(x: Tensor, masked: Tensor, probs: Tensor, noise: Noise) -> Tensor:
    """x (n, L) with its M masked positions (row-major order) drawn from ``probs`` (M, V).

    One uniform is drawn for every position of every row, masked or not, and the masked ones
    are used: a row's draws never depend on the other rows, and the float64 cost is that of
    the masked positions alone."""
    u = noise.uniform(*x.shape, 1)  # (n, L, 1)
    return x.masked_scatter(masked, sample_categorical(probs, u=u[masked]))

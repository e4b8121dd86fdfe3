"""Step samplers for masked diffusion: from all-[MASK] (except user-given positions) to DNA.

The samplers need from the objective only what ``MaskedDiffusion`` lists (MDLM and D3PM offer
it: their ``MaskedForwardProcess`` and their prediction of x0). Every category is
drawn in float64 (``sample_categorical``) from x_theta sharpened by temperature / nucleus
(``sharpen``); positions where ``given`` is True are never changed, and unmasked tokens are
carried over. A request for a class draws the value of an unmasking token from the guided
prediction x~ instead of x_theta (``genodiff.guidance.Guide``: the network side is what the
cached sampler keeps, gamma(t) is applied at every step). In the x0 form of guidance the
unmasking rate is the unguided sampler's; in the transition form (the paper's, normalised over
every outcome of the step, staying masked included) each masked token's odds of unmasking are
multiplied by the guided normaliser Z (``Guide.log_rate_factor``; ``genodiff.guidance``).
Temperature and top-p reshape x~ only, never the odds of unmasking.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor, nn

from genodiff import syncs
from genodiff.backbones.graphed import GraphedNetwork
from genodiff.guidance import Guide
from genodiff.randomness.noise import Noise
from genodiff.samplers.categorical import refuse_non_finite, sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid

if TYPE_CHECKING:
    from genodiff.processes.masked import MaskedForwardProcess


class MaskedDiffusion(Protocol):
    """What a masked-diffusion objective (MDLM, D3PM) offers its samplers."""

    process: MaskedForwardProcess  # mask_id, sampling_eps, time_conditioning, schedule

    def x0_log_probs(
        self, model: nn.Module, x_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """(B, L, V) log p_theta(x0 | x_t[, labels]) at times t (B,)."""
        ...


def masked_guide(objective: MaskedDiffusion, model: nn.Module, request: SampleRequest) -> Guide:
    """The guidance of ``request`` for a masked-diffusion sampler (D-CFG and D-CBG)."""
    return Guide(
        request.guidance, model, partial(objective.x0_log_probs, model), "masked diffusion"
    )


def ancestral(
    objective: MaskedDiffusion,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """``request.steps`` uniform steps in t from 1 to sampling_eps, the network called on
    every sequence at every step, then the final noise-removal step (see ``unmask``)."""
    x, given = request.canvas(objective.process.mask_id, _device(model))
    return unmask(objective, model, x, given, request, noise, reuse=False)


def cached(
    objective: MaskedDiffusion,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """``ancestral`` reusing x_theta per sequence while that sequence is unchanged.

    Without time conditioning x_theta(x_t) depends on x_t alone, so a step in which no token
    of a sequence unmasked leaves its prediction valid; only the sequences that changed go
    through the network. The random draws are those of ``ancestral``, so the same seed gives
    the same samples (up to the network's own batch-size-dependent rounding). A
    time-conditioned network's prediction changes with t at every step, so there is nothing
    to reuse: the sampler table marks this sampler ``reuses_predictions``, and
    ``Objective.sampler_name`` refuses it for such an objective.
    """
    x, given = request.canvas(objective.process.mask_id, _device(model))
    return unmask(objective, model, x, given, request, noise, reuse=True)


def unmask(
    objective: MaskedDiffusion,
    model: nn.Module,
    x: Tensor,
    given: Tensor,
    request: SampleRequest,
    noise: Noise,
    reuse: bool,
    sync_free: bool | None = None,
) -> Tensor:
    """Ancestral sampling of the partly masked ``x`` (n, L); ``given`` (n, L) is never changed.

    Steps t -> s on the uniform grid 1 = t_0 > ... > t_T = sampling_eps. Under the forward
    process a token masked at t was already masked at s with probability p(s)/p(t)
    (p = mask probability), so each masked token unmasks in the step with probability
    (p(t) - p(s)) / p(t), and an unmasking token takes a value drawn from x_theta (together:
    the categorical [x_theta * (p(t) - p(s)), p(s) for [MASK]] / p(t)). Then the final
    noise-removal step (``denoise_remaining``). With ``reuse`` the network runs only on the
    rows that changed since their last call; the random draws do not depend on ``reuse``.
    Guided (``request.guidance``): the network side of each row's latest call is kept (K parts:
    both network outputs for D-CFG, the classifier's tilt for D-CBG) and weighed by gamma(t)
    at every step; the transition form unmasks with odds (p(t) - p(s)) Z : p(s)
    (``unmasking``), the value is drawn from x~ in both forms.

    ``sync_free`` (default: ``genodiff.syncs.sync_free_on``, i.e. on CUDA) runs every step in
    fixed shapes with no host sync (no ``nonzero``, ``any`` or ``item`` in the loop, so a step
    can be captured as a CUDA graph): every row goes through the network at every step
    (``reuse`` is then moot: a row that did not change gets the prediction it had), a value is
    drawn at every position from the same uniform and kept where the position unmasks, and the
    finite-output check runs once, after the loop; the step's times and uniforms reach the
    device without a wait (``Noise.staging``), and with CUDA graphs the whole step is replayed
    from one (``unmask_sync_free``). Otherwise only unmasking positions draw a value, the
    network sees only the rows that changed (``reuse``) and still hold a mask, the final
    noise removal reuses the prediction of a row that did not change in the last step
    (``reuse``), and the loop stops once nothing is masked. Both draw the same sequences: the
    same uniforms decide the same positions.
    """
    x = x.clone()
    sync_free = syncs.sync_free_on(x.device) if sync_free is None else sync_free
    if sync_free:
        return unmask_sync_free(objective, model, x, given, request, noise)
    schedule = objective.process.schedule
    guide = masked_guide(objective, model, request)
    n = x.shape[0]
    parts = None  # (n, L, K, V): the network side of each row's latest call
    stale = torch.ones(n, dtype=torch.bool, device=x.device)  # rows needing a network call
    grid = time_grid(1.0, objective.process.sampling_eps, request.steps)
    for t, s in request.reporting(grid, request.steps):
        masked = (x == objective.process.mask_id) & ~given  # (n, L)
        if not masked.any():
            request.report_step(request.steps, request.steps)  # the steps left draw nothing
            break
        # None: every row; else the rows that changed and still have something to draw
        rows = (stale & masked.any(dim=-1)).nonzero().squeeze(-1) if reuse else None
        if rows is None:
            parts = guide.parts(x, t.expand(n).to(x.device), masked)  # (n, L, K, V)
        elif rows.numel():
            fresh = guide.parts(x[rows], t.expand(rows.numel()).to(x.device), masked[rows])
            if parts is None:  # a row without a mask keeps zeros: nothing reads them
                parts = fresh.new_zeros((n, *fresh.shape[1:]))
            parts.index_copy_(0, rows, fresh)
        p_t, p_s = schedule.mask_probability(t), schedule.mask_probability(s)
        # Two uniforms per position of every row, used where the position is masked: a row's
        # draws never depend on the other rows (genodiff.randomness.noise).
        u_go, u_value = noise.uniform(n, 2, x.shape[1]).unbind(1)  # (n, L) each
        log_factor = guide.log_rate_factor(parts, 1 - t)  # (n, L)
        refuse_non_finite((log_factor.isnan() & masked).any())  # would never unmask
        go = unmasking(p_t, p_s, log_factor, u_go) & masked  # (n, L): tokens that unmask
        row, position = go.nonzero().unbind(-1)  # (U,) each
        log_x0 = guide.combine(parts[row, position], 1 - t)  # (U, V)
        p_x0 = sharpen(log_x0, request.temperature, request.top_p)  # (U, V)
        x[row, position] = sample_categorical(p_x0, u=u_value[row, position, None])
        stale = go.any(dim=-1)
    known = Known(~stale, parts) if reuse else None  # unchanged rows: parts at their state
    return denoise_remaining(objective, x, given, guide, known)


def unmask_sync_free(
    objective: MaskedDiffusion,
    model: nn.Module,
    x: Tensor,
    given: Tensor,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """``unmask``'s sync-free form (its doc): every step is ``sync_free_step`` on the step's
    numbers, sent to the device without waiting for it (``Noise.staging``). Given a
    ``GraphedNetwork`` (``--cuda-graphs``), the whole step -- network and sampler arithmetic
    -- is replayed from one CUDA graph per (rows, length, sampler settings); with a classifier
    (D-CBG, which differentiates its input) only the network call is (``whole_step_graphs``)."""
    n, length = x.shape
    schedule = objective.process.schedule
    graphs = whole_step_graphs(model, request)
    model = graphs.network if graphs is not None else model
    guide = masked_guide(objective, model, request)
    step = partial(sync_free_step, objective.process.mask_id, guide, request)
    key = ("masked step", id(objective), request.guidance, request.temperature, request.top_p)
    non_finite = torch.zeros((), dtype=torch.bool, device=x.device)  # seen a NaN
    grid = time_grid(1.0, objective.process.sampling_eps, request.steps)
    for t, s in request.reporting(grid, request.steps):
        times = torch.stack((t, schedule.mask_probability(t), schedule.mask_probability(s)))
        times = noise.staging.stage((3,), torch.float64, partial(Tensor.copy_, other=times))
        # Two uniforms per position of every row, used where the position is masked: a row's
        # draws never depend on the other rows (genodiff.randomness.noise).
        u = noise.uniform(n, 2, length)  # (n, 2, L)
        inputs = (x, given, times, u)
        x, seen = step(*inputs) if graphs is None else graphs.call(key, step, *inputs)
        non_finite |= seen
    refuse_non_finite(non_finite)
    return denoise_remaining(objective, x, given, guide)


def sync_free_step(
    mask_id: int,
    guide: Guide,
    request: SampleRequest,
    x: Tensor,
    given: Tensor,
    times: Tensor,
    u: Tensor,
) -> tuple[Tensor, Tensor]:
    """One step t -> s of ``unmask`` in fixed shapes, with no host sync: x (n, L) at t,
    ``given`` (n, L), ``times`` (3,) float64 (t, p(t), p(s); p the mask probability), ``u``
    (n, 2, L) float64 uniforms (whether each position unmasks, its value) -> x at s (n, L) and
    whether a position that unmasked was drawn from a NaN row, or a masked one's rate was NaN
    (0-d bool). Every row goes
    through the network; a value is drawn at every position and kept where it unmasks. Reads
    nothing but its tensor arguments (and the request's settings): a CUDA graph can replay it.
    """
    n = x.shape[0]
    t, p_t, p_s = times.unbind()  # 0-d each
    masked = (x == mask_id) & ~given  # (n, L)
    parts = guide.parts(x, t.expand(n), masked)  # (n, L, K, V)
    u_go, u_value = u.unbind(1)  # (n, L) each
    log_factor = guide.log_rate_factor(parts, 1 - t)  # (n, L)
    go = unmasking(p_t, p_s, log_factor, u_go) & masked  # (n, L)
    p_x0 = sharpen(guide.combine(parts, 1 - t), request.temperature, request.top_p, False)
    seen = ((p_x0.isnan().any(dim=-1) & go) | (log_factor.isnan() & masked)).any()
    return torch.where(go, sample_categorical(p_x0, u=u_value[..., None]), x), seen


def whole_step_graphs(model: nn.Module, request: SampleRequest) -> GraphedNetwork | None:
    """``model`` where a sync-free step is to be replayed whole from CUDA graphs: a
    ``GraphedNetwork`` (CUDA graphs asked for), and no classifier (D-CBG's tilt differentiates
    the classifier: its step keeps the network call alone replayed). None: steps run as
    called."""
    if not isinstance(model, GraphedNetwork):
        return None
    guidance = request.guidance
    return model if guidance is None or guidance.classifier is None else None


def unmasking(p_t: Tensor, p_s: Tensor, log_factor: Tensor, u: Tensor) -> Tensor:
    """(...) bool: which masked tokens unmask in the step t -> s (mask probabilities ``p_t``,
    ``p_s``, 0-d float64), each with odds (p_t - p_s) Z : p_s against staying masked,
    log Z = ``log_factor`` (...) (0: the unguided (p_t - p_s) / p_t), drawn by inverting the
    float64 uniforms ``u`` (...) as ``sample_categorical`` would invert them over the two
    categories (it unmasks where u (stay + go) >= stay), without a cumulative sum. Both odds
    are divided by max(Z, 1) before the draw, so no Z overflows."""
    log_factor = log_factor.double()
    # the sparse step's p_t, p_s are 0-d CPU tensors, which join CUDA ones as scalars; the
    # sync-free step's are on the device, read anew by each replay of a CUDA graph
    stay = p_s * torch.exp(-log_factor.clamp_min(0.0))
    go = (p_t - p_s) * torch.exp(log_factor.clamp_max(0.0))
    return u * (stay + go) >= stay


@dataclass
class Known:
    """The network side of the guided prediction (``Guide.parts``) that a sampler has already
    computed at some rows' current states: the rows where ``fresh`` (n,) is True, in ``parts``
    (n, L, K, V) (None: no row). Without time conditioning (the cached sampler; first-hitting
    in the transition form) it is the prediction at any time, the final noise removal's
    included, and the classifier's tilt reads no time (``genodiff.guidance``)."""

    fresh: Tensor
    parts: Tensor | None = None

    def keep(self, rows: Tensor, parts: Tensor) -> None:
        """Record ``parts`` (r, L, K, V) as those of ``rows`` (r,) at their current states."""
        if self.parts is None:
            self.parts = parts.new_zeros((len(self.fresh), *parts.shape[1:]))
        self.parts[rows] = parts
        self.fresh[rows] = True


def denoise_remaining(
    objective: MaskedDiffusion,
    x: Tensor,
    given: Tensor,
    guide: Guide,
    known: Known | None = None,
) -> Tensor:
    """Final noise-removal step: tokens still masked take the argmax of the (guided) x0
    prediction at t = sampling_eps. Only the rows that hold a mask, and whose prediction is
    not ``known``, go through the network."""
    masked = (x == objective.process.mask_id) & ~given  # (n, L)
    rows = masked.any(dim=-1).nonzero().squeeze(-1)
    non_finite = torch.zeros((), dtype=torch.bool, device=x.device)  # argmax would take a NaN
    if rows.numel():
        t_final = torch.full((rows.numel(),), objective.process.sampling_eps, device=x.device)
        parts = final_parts(guide, x, masked, rows, t_final, known)  # (rows, L, K, V)
        log_x0 = guide.combine(parts, 1 - t_final[:, None])  # (rows, L, V)
        non_finite = (log_x0.isnan().any(dim=-1) & masked[rows]).any()
        best = log_x0.argmax(-1)  # (rows, L)
        x = x.index_copy(0, rows, torch.where(masked[rows], best, x[rows]))
    refuse_non_finite(non_finite)
    return x


def final_parts(
    guide: Guide, x: Tensor, masked: Tensor, rows: Tensor, t: Tensor, known: Known | None
) -> Tensor:
    """``guide.parts`` (r, L, K, V) of ``rows`` (r,) of x (n, L) at times ``t`` (r,), taken
    from ``known`` where it has them: only the other rows go through the network."""
    if known is None or known.parts is None:
        return guide.parts(x[rows], t, masked[rows])
    parts = known.parts[rows]  # (r, L, K, V), a copy
    missing = (~known.fresh[rows]).nonzero().squeeze(-1)  # (m,) indices into rows
    if missing.numel():
        lacking = rows[missing]
        parts[missing] = guide.parts(x[lacking], t[missing], masked[lacking])
    return parts


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device

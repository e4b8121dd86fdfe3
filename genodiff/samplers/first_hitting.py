"""First-hitting sampler: jump straight to the time of the next unmasking event.

Under the forward process each token's masking time tau is independent with
P(tau <= s) = p(s) (p = mask probability, increasing in time). Going backwards, a token still
masked at time t stays masked until s < t with probability p(s) / p(t); with k masked tokens
the next unmasking time s (the largest of their k masking times) therefore has
P(s' <= s) = (p(s) / p(t))^k, and inverting this CDF with u ~ U(0, 1) gives

    p(s) = p(t) * u^(1/k).

By exchangeability the token that unmasks at s is uniform among the k masked positions. On
(s, t] nothing changed, so just before the event the state is the current x and the
revealed value is drawn from x_theta(x, s) -- the posterior over x0 given the state at the
event time (for a network without time conditioning the time is irrelevant). One token per
network call: at most L calls per sequence, and with exact conditionals the chain rule in a
random order samples the joint exactly -- the T -> infinity limit of ancestral sampling.
The loop stops when the next event would fall below sampling_eps; the final noise-removal
step then fills what is left (a token is still masked there with probability
p(sampling_eps) / p(1)).

Guided in the x0 form, the revealed value is drawn from the guided x0 prediction x~ at the
event time, and the events are the unguided ones. Guided in the transition form (the paper's:
``genodiff.guidance``), a step t -> s unmasks masked position l with probability
(p(t) - p(s)) Z_l / (p(s) + (p(t) - p(s)) Z_l) ~ Z_l d log p: as the steps shrink, position l
unmasks at the rate Z_l times the unguided one (per unit of log p), Z_l = sum_v m_l(v) the
guided normaliser (``Guide.log_rate_factor``). While every Z_l stays fixed between events --
a constant guidance schedule and a network without time conditioning (the classifier reads no
time: ``genodiff.guidance``), the only case this sampler takes the transition form in
(``Sampler.event_driven``) -- the next event with total rate R = sum over masked l of Z_l has
P(s' <= s) = (p(s) / p(t))^R, so

    p(s) = p(t) * u^(1/R),

the position is l with probability Z_l / R, and its value is drawn from x~_l: the exact
T -> infinity limit of the ancestral sampler in the transition form
(tests/test_guidance_forms.py). With Z_l = 1 this is the unguided event law above. The rates
need the guidance at every masked position, so the network (and classifier) is called on the
current state before the event time is drawn; when that time falls below sampling_eps, the
same call serves the final noise removal of the row (its state has not changed, and neither
the network nor the classifier reads the time): one call per state, at most L per sequence.

On CUDA (``genodiff.syncs.sync_free_on``) the loop runs without host syncs (``hit_sync_free``):
every row goes through every iteration in fixed shapes, a row that has stopped drawing its
three uniforms too and changing nothing, for as many iterations as the most masked row has
masked tokens (each iteration reveals one token of every running row, or stops it). A row's
draws are those of the sparse loop, so with per-sequence noise (``genodiff.generate``) the
sequences are the same; with one generator for the whole batch the law is the same, the numbers
are not. With CUDA graphs the whole iteration is replayed from one
(``genodiff.samplers.masked.whole_step_graphs`` says when).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor, nn

from genodiff import syncs
from genodiff.guidance import Guide
from genodiff.randomness.noise import Noise
from genodiff.samplers.categorical import refuse_non_finite, sample_categorical, sharpen
from genodiff.samplers.masked import (
    Known,
    MaskedDiffusion,
    denoise_remaining,
    masked_guide,
    whole_step_graphs,
)
from genodiff.samplers.request import SampleRequest


def first_hitting(
    objective: MaskedDiffusion,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """Sample ``request`` one unmasking event at a time (``request.steps`` is unused)."""
    x, given = request.canvas(objective.process.mask_id, next(model.parameters()).device)
    return hit(objective, model, x, given, request, noise)


def hit(
    objective: MaskedDiffusion,
    model: nn.Module,
    x: Tensor,
    given: Tensor,
    request: SampleRequest,
    noise: Noise,
    sync_free: bool | None = None,
) -> Tensor:
    """First-hitting sampling of the partly masked ``x`` (n, L); ``given`` is never changed.

    Each row keeps its own time t (rows reach their events at different times); every
    iteration calls the network once on the rows still running: in the x0 form (and unguided)
    at their own event times, with a classifier's tilt computed at the revealed position only;
    in the transition form on their current states, tilted at every masked position (the
    rates need them all; module doc), and a row whose next event falls below sampling_eps
    keeps that prediction of its final state for the final noise removal (no time
    conditioning here). ``sync_free`` (default: on CUDA): ``hit_sync_free``.
    """
    n = x.shape[0]
    x = x.clone()
    sync_free = syncs.sync_free_on(x.device) if sync_free is None else sync_free
    if sync_free:
        return hit_sync_free(objective, model, x, given, request, noise)
    guide = masked_guide(objective, model, request)
    schedule = objective.process.schedule
    p_t = schedule.mask_probability(torch.ones(n, dtype=torch.float64, device=x.device))  # (n,)
    stop = torch.tensor(objective.process.sampling_eps, dtype=torch.float64)
    p_stop = schedule.mask_probability(stop)
    running = torch.ones(n, dtype=torch.bool, device=x.device)
    known = Known(torch.zeros(n, dtype=torch.bool, device=x.device))  # of the stopped rows
    events = int(((x == objective.process.mask_id) & ~given).sum(dim=-1).max())  # at most
    while True:
        masked = (x == objective.process.mask_id) & ~given  # (n, L)
        k = masked.sum(dim=-1)  # (n,)
        running &= k > 0
        rows = running.nonzero().squeeze(-1)
        if not rows.numel():
            request.report_step(events, events)  # the last event is done
            break
        request.report_step(events - int(k[rows].max()), events)
        if guide.changes_rates:
            t = schedule.time_of_mask_probability(p_t[rows])  # (r,)
            parts = guide.parts(x[rows], t, masked[rows])  # (r, L, K, V)
            rates, total = event_rates(guide.log_rate_factor(parts, 1 - t[:, None]), masked[rows])
            refuse_non_finite(total.isnan().any())  # no event would ever come
        else:
            rates, total = masked[rows].double(), k[rows]  # every rate 1
        # Three uniforms per running row and event (time, position, value): a row's draws
        # depend on its own state alone (genodiff.randomness.noise).
        u_time, u_position, u_value = noise.take(rows).uniform(rows.numel(), 3).unbind(1)
        p_next = p_t[rows] * u_time ** (1.0 / total)  # (r,)
        go = p_next >= p_stop  # (r,): else the next event would fall below sampling_eps
        running[rows[~go]] = False
        if guide.changes_rates and not go.all():  # their final states' predictions
            known.keep(rows[~go], parts[~go])
        rows, p_next, rates = rows[go], p_next[go], rates[go]
        u_position, u_value = u_position[go, None], u_value[go, None]  # (r, 1) each
        if not rows.numel():
            continue
        s = schedule.time_of_mask_probability(p_next)  # (r,)
        position = sample_categorical(rates, u=u_position)  # (r,) in proportion to the rates
        index = torch.arange(rows.numel(), device=x.device)
        if guide.changes_rates:
            parts = parts[go]
        else:
            revealed = torch.zeros_like(masked[rows])  # (r, L): where a classifier tilts
            revealed[index, position] = True
            parts = guide.parts(x[rows], s, revealed)  # (r, L, K, V)
        log_x0 = guide.combine(parts[index, position], 1 - s)  # (r, V)
        value = sample_categorical(sharpen(log_x0, request.temperature, request.top_p), u=u_value)
        x[rows, position] = value
        p_t[rows] = p_next
    return denoise_remaining(objective, x, given, guide, known)


def hit_sync_free(
    objective: MaskedDiffusion,
    model: nn.Module,
    x: Tensor,
    given: Tensor,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """``hit`` without host syncs in its loop (module doc): ``first_hitting_step`` once per
    masked token of the most masked row, its uniforms sent to the device without a wait
    (``Noise.staging``); with a ``GraphedNetwork`` each iteration is replayed whole from a
    CUDA graph (``whole_step_graphs``)."""
    n = x.shape[0]
    graphs = whole_step_graphs(model, request)
    model = graphs.network if graphs is not None else model
    guide = masked_guide(objective, model, request)
    step = partial(first_hitting_step, objective, guide, request)
    settings = (request.guidance, request.temperature, request.top_p)
    key = ("first-hitting step", id(objective), *settings)
    process = objective.process
    p_t = process.schedule.mask_probability(torch.ones(n, dtype=torch.float64, device=x.device))
    running = torch.ones(n, dtype=torch.bool, device=x.device)  # (n,)
    non_finite = torch.zeros((), dtype=torch.bool, device=x.device)  # seen a NaN
    events = int(((x == process.mask_id) & ~given).sum(dim=-1).max())  # before the loop
    for done in range(1, events + 1):
        # three uniforms per row and event (time, position, value), as the sparse loop's
        u = noise.uniform(n, 3)  # (n, 3)
        inputs = (x, given, p_t, running, u)
        x, p_t, running, seen = step(*inputs) if graphs is None else graphs.call(key, step, *inputs)
        non_finite |= seen
        request.report_step(done, events)
    refuse_non_finite(non_finite)
    return denoise_remaining(objective, x, given, guide)


def first_hitting_step(
    objective: MaskedDiffusion,
    guide: Guide,
    request: SampleRequest,
    x: Tensor,
    given: Tensor,
    p_t: Tensor,
    running: Tensor,
    u: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One iteration of ``hit`` for every row, in fixed shapes and with no host sync: x (n, L),
    ``given`` (n, L), each row's mask probability ``p_t`` (n,) float64 and whether it still
    runs (n,) bool, ``u`` (n, 3) float64 uniforms (time, position, value) -> x, p_t, running
    after the iteration, and whether a revealed value was drawn from a NaN row or a running
    row's event rate was NaN (0-d bool).
    Rows that do not run (or stop now) keep their state. Reads nothing but its tensor
    arguments (and the request's settings): a CUDA graph can replay it."""
    n = x.shape[0]
    process = objective.process
    schedule = process.schedule
    masked = (x == process.mask_id) & ~given  # (n, L)
    k = masked.sum(dim=-1)  # (n,)
    running = running & (k > 0)
    if guide.changes_rates:
        t = schedule.time_of_mask_probability(p_t)  # (n,)
        parts = guide.parts(x, t, masked)  # (n, L, K, V)
        rates, total = event_rates(guide.log_rate_factor(parts, 1 - t[:, None]), masked)
    else:
        rates, total = masked.double(), k  # every rate 1
    u_time, u_position, u_value = u.unbind(1)  # (n,) each
    p_next = p_t * u_time ** (1.0 / total)  # (n,)
    p_stop = schedule.mask_probability(torch.tensor(process.sampling_eps, dtype=torch.float64))
    go = running & (p_next >= p_stop)  # (n,): the rows whose next event is above sampling_eps
    s = schedule.time_of_mask_probability(p_next)  # (n,)
    position = sample_categorical(rates, u=u_position[:, None])  # (n,) in proportion to the rates
    at = torch.zeros_like(masked).scatter_(1, position[:, None], True)  # (n, L): the position
    if not guide.changes_rates:
        parts = guide.parts(x, s, at)  # (n, L, K, V), a classifier tilting ``at`` only
    log_x0 = guide.combine(parts[torch.arange(n, device=x.device), position], 1 - s)  # (n, V)
    p_x0 = sharpen(log_x0, request.temperature, request.top_p, False)
    seen = ((p_x0.isnan().any(dim=-1) & go) | (total.isnan() & running)).any()
    value = sample_categorical(p_x0, u=u_value[:, None])  # (n,)
    x = torch.where(at & go[:, None], value[:, None], x)
    return x, torch.where(go, p_next, p_t), go, seen


def event_rates(log_factor: Tensor, masked: Tensor) -> tuple[Tensor, Tensor]:
    """From log Z_l (r, L) (``Guide.log_rate_factor``) at the ``masked`` positions (r, L):
    the rates scaled by each row's largest, (r, L) float64 (0 where not masked: the weights of
    the position draw), and each row's total R (r,) (inf where it overflows: the event is then
    at once)."""
    log_rate = log_factor.double().masked_fill(~masked, -torch.inf)  # (r, L)
    top = log_rate.amax(dim=-1, keepdim=True)  # (r, 1), finite: every row has a masked token
    rates = (log_rate - top).exp()
    return rates, rates.sum(dim=-1) * top.squeeze(-1).exp()

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
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from genodiff.samplers.categorical import sample_categorical, sharpen
from genodiff.samplers.masked import MaskedDiffusion, denoise_remaining, masked_guide
from genodiff.samplers.noise import Noise
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
) -> Tensor:
    """First-hitting sampling of the partly masked ``x`` (n, L); ``given`` is never changed.

    Each row keeps its own time t (rows reach their events at different times); every
    iteration calls the network once on the rows still running, at their own event times.
    Guided (``request.guidance``), the value is drawn from the guided x0 prediction at the event
    time, with a classifier's tilt computed at the revealed position only.
    """
    n = x.shape[0]
    x = x.clone()
    guide = masked_guide(objective, model, request)
    schedule = objective.process.schedule
    p_t = schedule.mask_probability(torch.ones(n, dtype=torch.float64, device=x.device))  # (n,)
    stop = torch.tensor(objective.process.sampling_eps, dtype=torch.float64)
    p_stop = schedule.mask_probability(stop)
    running = torch.ones(n, dtype=torch.bool, device=x.device)
    events = int(((x == objective.process.mask_id) & ~given).sum(dim=-1).max())  # at most
    while True:
        masked = (x == objective.process.mask_id) & ~given  # (n, L)
        k = masked.sum(dim=-1)  # (n,)
        running &= k > 0
        rows = running.nonzero().squeeze(-1)
        if not rows.numel():
            break
        request.report_step(events - int(k[rows].max()), events)
        # Three uniforms per running row and event (time, position, value): a row's draws
        # depend on its own state alone (genodiff.samplers.noise).
        u_time, u_position, u_value = noise.take(rows).uniform(rows.numel(), 3).unbind(1)
        p_next = p_t[rows] * u_time ** (1.0 / k[rows])  # (r,)
        running[rows[p_next < p_stop]] = False  # the next event would fall below sampling_eps
        go = p_next >= p_stop
        rows, p_next = rows[go], p_next[go]
        u_position, u_value = u_position[go, None], u_value[go, None]  # (r, 1) each
        if not rows.numel():
            continue
        s = schedule.time_of_mask_probability(p_next)  # (r,)
        position = sample_categorical(masked[rows].double(), u=u_position)  # (r,) uniform
        index = torch.arange(rows.numel(), device=x.device)
        revealed = torch.zeros_like(masked[rows])  # (r, L): where a classifier tilts
        revealed[index, position] = True
        parts = guide.parts(x[rows], s, revealed)  # (r, L, K, V)
        log_x0 = guide.combine(parts[index, position], 1 - s)  # (r, V)
        value = sample_categorical(sharpen(log_x0, request.temperature, request.top_p), u=u_value)
        x[rows, position] = value
        p_t[rows] = p_next
    return denoise_remaining(objective, x, given, guide)

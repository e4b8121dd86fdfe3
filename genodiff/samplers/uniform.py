"""The UDLM sampler: ancestral steps of the exact reverse posterior of uniform-noise diffusion.

From z_1 drawn uniform over the alphabet (the prior), each step t -> s of the uniform grid
1 = t_0 > ... > t_T = 0 draws every free position from q(z_s | z_t, x_theta)
(``UniformForwardProcess.posterior``, with the clean letter replaced by x_theta(z_t, t), the
objective's ``x0_log_probs``: one network call per step, which a guidance layer may replace).
Temperature and nucleus reshape x_theta (``sharpen``) before it enters the posterior. Every
position can change at every step, so there is nothing to cache: the network, time-conditioned,
is called on all rows at every step.

The last step goes to s = 0, where alpha_0 = 1 and the posterior is that of the clean letter,
x_theta(v) (N alpha_t [v = z_t] + 1 - alpha_t) up to normalisation: the final step **draws**
the output from it (no argmax), so with the exact x_theta the output follows the data law.
Positions the request gives (prefix, infill) hold their template letter at every step and in
the output. This conditioning is approximate: the network reads a given letter as it reads any
letter of z_t, which may be noise, so the free letters follow a law between p(x_free) and
p(x_free | x_given), nearer the latter as t falls (tests/test_udlm_exact_laws.py measures it
with the exact network). Draws are in float64.

A request for a class is guided at the transition level (``genodiff.guidance``): each network
part x_theta (the label's and the null label's for D-CFG) is sharpened and turned into its
posterior log q(z_s | z_t, x_theta) (``log_transitions``), and ``Guide.combine`` weighs them
with gamma(1 - t) and renormalises per position; D-CBG adds gamma(1 - t) times the classifier's
tilt at every free position (every letter may change). gamma 0 or 1 takes one network call.
This is the transition form of guidance, the only one UDLM has (``Sampler.guidance_forms``:
there is no x0 to draw a letter from, every step is a transition); ``--guidance-form x0`` is
refused.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor, nn

from genodiff.guidance import Guide
from genodiff.randomness.noise import Noise
from genodiff.samplers.categorical import NEG_INF, sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid

if TYPE_CHECKING:
    from genodiff.processes.uniform import UniformForwardProcess


class UniformDiffusion(Protocol):
    """What a uniform-noise objective (UDLM) offers its sampler."""

    process: UniformForwardProcess  # alphabet, to_alphabet, posterior

    def x0_log_probs(
        self, model: nn.Module, z_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """(B, L, N) log x_theta over the letters at times t (B,)."""
        ...


def ancestral(
    objective: UniformDiffusion,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
) -> Tensor:
    """``request.steps`` steps of the exact reverse posterior from t = 1 to t = 0 (the module
    docstring); (n, L) token ids."""
    process = objective.process
    device = next(model.parameters()).device
    letters = process.alphabet_ids(device)  # (N,)
    network = partial(objective.x0_log_probs, model)
    guide = Guide(request.guidance, model, network, "UDLM", columns=letters)
    n, length = request.num_samples, request.length
    template, given = request.canvas(process.alphabet[0], device)  # (n, L) each
    prior = torch.ones(n, length, process.size, dtype=torch.float64, device=device)
    z = sample_categorical(prior, u=noise.uniform(n, length, 1))  # (n, L) letters, uniform
    z_ids = torch.where(given, template, letters[z])
    for t, s in request.reporting(time_grid(1.0, 0.0, request.steps, device), request.steps):
        z = process.to_alphabet(z_ids).clamp_min(0)  # given non-letters: overwritten below
        transitions = partial(log_transitions, process, request, z, t, s)
        parts = guide.parts(z_ids, t.expand(n), ~given, transitions)  # (n, L, K, N)
        step = guide.combine(parts, 1 - t).exp()  # (n, L, N)
        drawn = sample_categorical(step, u=noise.uniform(n, length, 1))  # (n, L)
        z_ids = torch.where(given, template, letters[drawn])
    return z_ids


def log_transitions(
    process: UniformForwardProcess,
    request: SampleRequest,
    z: Tensor,
    t: Tensor,
    s: Tensor,
    log_x: Tensor,
) -> Tensor:
    """log q(z_s | z_t, x_theta) (n, L, K, N) in float64 for the K network parts log x_theta
    ``log_x`` (n, L, K, N) at the letters ``z`` (n, L) of z_t, each x_theta reshaped by the
    request's temperature and top-p first. A letter that a part gives probability 0 (top-p
    removed it from x_theta; only at s = 0) gets the finite log NEG_INF, so a weighting never
    meets inf - inf and is the limit of the tempered law: a letter that a part of positive
    weight excludes is never drawn, and one that only a part of negative weight excludes (the
    null label's, gamma > 1) is preferred to every other (gamma log q_c + (1 - gamma) log 0)."""
    x_theta = sharpen(log_x, request.temperature, request.top_p)  # (n, L, K, N)
    step = process.posterior(x_theta, z[..., None].expand(log_x.shape[:-1]), t, s)
    return step.log().clamp_min(NEG_INF)

"""Plaid's sampler: ancestral steps of Gaussian diffusion on the objective's embeddings."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from genodiff.samplers.categorical import sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid

if TYPE_CHECKING:
    from genodiff.objectives.plaid import Plaid


def ancestral(
    objective: Plaid,
    model: nn.Module,
    request: SampleRequest,
    generator: torch.Generator | None,
) -> Tensor:
    """``request.steps`` ancestral steps from z_1 ~ N(0, I) down to z_0, each drawing z_s
    from q(z_s | z_t, x = x_hat):  c = -expm1(gamma_s - gamma_t),
    mean = (alpha_s / alpha_t)(1 - c) z_t + alpha_s c x_hat,  var = sigma_s^2 c;
    then x0 ~ p(x0 | z_0) (temperature/top-p apply). Given positions hold the forward-noised
    embedding of their template token at every step and keep the template in the output.
    """
    objective.check_backbone(model)
    schedule = objective.schedule
    device = objective.embedding.device
    n, length, dim = request.num_samples, request.length, objective.embed_dim
    template, given = request.canvas(objective.token_list[0], device)  # (n, L) each
    e_given = objective.embeddings()[objective.categories(template)]  # (n, L, D)

    def randn() -> Tensor:
        return torch.randn(n, length, dim, device=device, generator=generator)

    def hold(z: Tensor, gamma: Tensor) -> Tensor:
        return torch.where(given[..., None], objective.noised(e_given, gamma, randn()), z)

    z, x_self = randn(), torch.zeros(n, length, dim, device=device)
    for t, s in request.reporting(time_grid(1.0, 0.0, request.steps, device), request.steps):
        gamma_t, gamma_s = schedule(t.expand(n)).gamma, schedule(s.expand(n)).gamma
        z = hold(z, gamma_t)
        _, x_hat = objective.predict(model, z, gamma_t, x_self)  # (n, L, D)
        if objective.self_condition:
            x_self = x_hat
        alpha_t, _ = schedule.alpha_sigma2(gamma_t)
        alpha_s, sigma2_s = schedule.alpha_sigma2(gamma_s)
        c = -torch.expm1(gamma_s - gamma_t)  # (n,)
        mean = ((alpha_s / alpha_t) * (1 - c)).float()[:, None, None] * z
        mean = mean + (alpha_s * c).float()[:, None, None] * x_hat
        z = mean + (sigma2_s * c).sqrt().float()[:, None, None] * randn()
    gamma_0 = schedule.endpoints()[0].expand(n)
    logits, _ = objective.predict(model, hold(z, gamma_0), gamma_0, x_self)  # (n, L, K)
    probs = sharpen(logits.log_softmax(-1), request.temperature, request.top_p)
    draws = objective.token_ids()[sample_categorical(probs, generator)]  # (n, L)
    return torch.where(given, template, draws)

"""Exact laws of uniform-noise diffusion (UDLM): the reverse posterior and the NELBO terms.

Notation per token: N letters, alpha_t the probability that a token is kept
(``genodiff.processes.uniform``), i = the letter z_t holds, x the clean letter (one-hot) or a
distribution over letters (x_theta, the network's prediction). Everything is in float64.

**Posterior** (Bayes with q(z_t | z_s) = Cat(alpha_{t|s} z_s + (1 - alpha_{t|s}) / N),
alpha_{t|s} = alpha_t / alpha_s):

    q(z_s | z_t, x) = [N alpha_t z_t * x + (alpha_t / alpha_s - alpha_t) z_t
                       + (alpha_s - alpha_t) x + (alpha_s - alpha_t)(1 - alpha_s) / (N alpha_s)]
                      / [N alpha_t x_i + 1 - alpha_t].

With x -> x_theta it is the reverse step p_theta(z_s | z_t) of the sampler and of the
discrete-time bound; at s = 0 (alpha_0 = 1) it is the Bayes posterior of the clean letter,
x_theta(v) (N alpha_t [v = i] + 1 - alpha_t) / (N alpha_t x_theta_i + 1 - alpha_t): x_theta acts
as the *prior* of the clean letter and the formula multiplies in the evidence of z_t's own
letter i. So the optimal x_theta at position l is p(x^l | z_t^{-l}), the clean letter given the
*other* positions of z_t (then the reverse process is exact in continuous time), not
p(x^l | z_t), which would count z_t^l twice (tests/test_udlm_exact_laws.py: the bound with the
former equals the NLL plus the prior gap; with the latter it is far looser).

**Discrete time** (T steps, t on {1/T, ..., 1}, s = t - 1/T): the NELBO is the sum over the T
steps of E_{z_t} KL(q(z_s | z_t, x) || q(z_s | z_t, x_theta)); the step into s = 0 is the
reconstruction term -log p_theta(x | z_{1/T}) (q(z_0 | z_t, x) = x).

**Continuous time** (T -> infinity), with xbar = N alpha_t x + (1 - alpha_t) 1 and xbar_theta
likewise from x_theta, alpha' = d alpha / dt (< 0), per token and per unit of time:

    (alpha' / (N alpha_t)) [N / xbar_i - N / xbar_theta_i
        - sum_{j != i} (xbar_j / xbar_i) log(xbar_theta_i xbar_j / (xbar_theta_j xbar_i))],

integrated over t in [0, 1] (the j = i term of the sum is zero, so the code sums over all j).
Derivation: for s = t - dt the posterior puts mass 1 - O(dt) on z_s = z_t and
(-alpha' dt / (N alpha_t)) xbar_j / xbar_i on each j != i (x's) or with xbar_theta
(x_theta's); the KL of two such laws is, to first order in dt, sum_j (a_j log(a_j / b_j) -
a_j + b_j) over the jump masses a (x) and b (x_theta); summing b_j over j != i gives
N / xbar_theta_i - 1 and a_j likewise, which is the bracket. The tests check it against the
T-step bound as T grows. The reconstruction term vanishes in continuous time (alpha_0 = 1).

**Prior**: KL(q(z_1 | x) || uniform) per token, constant (alpha_1 = eps): added so that the
bound is a bound on -log p(x) also with eps > 0 (the reference code drops it; it is tiny,
about (N - 1) eps^2 / 2 nats).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def posterior(x: Tensor, z_t: Tensor, alpha_t: Tensor, alpha_s: Tensor) -> Tensor:
    """q(z_s | z_t, x) (..., N) in float64.

    ``x`` (..., N): a distribution over the letters (one-hot for the clean letter);
    ``z_t`` (...): the letter index z_t holds; ``alpha_t``, ``alpha_s`` broadcastable to
    ``z_t``'s shape, with alpha_s >= alpha_t."""
    x = x.double()
    size = x.shape[-1]
    a_t, a_s = alpha_t.double()[..., None], alpha_s.double()[..., None]  # (..., 1)
    onehot = torch.nn.functional.one_hot(z_t, size).double()  # (..., N)
    x_i = x.gather(-1, z_t[..., None])  # (..., 1)
    numerator = (
        size * a_t * onehot * x
        + (a_t / a_s - a_t) * onehot
        + (a_s - a_t) * x
        + (a_s - a_t) * (1 - a_s) / (size * a_s)
    )
    return numerator / (size * a_t * x_i + 1 - a_t)


def step_kl(
    log_x_theta: Tensor, x0: Tensor, z_t: Tensor, alpha_t: Tensor, alpha_s: Tensor
) -> Tensor:
    """KL(q(z_s | z_t, x0) || q(z_s | z_t, x_theta)) per token (...) in float64.

    ``log_x_theta`` (..., N) log-probabilities over the letters; ``x0`` and ``z_t`` (...) letter
    indices; alphas as in ``posterior``. At alpha_s = 1 it is -log p_theta(x0 | z_t)."""
    size = log_x_theta.shape[-1]
    q = posterior(torch.nn.functional.one_hot(x0, size), z_t, alpha_t, alpha_s)  # (..., N)
    p = posterior(log_x_theta.double().exp(), z_t, alpha_t, alpha_s)  # (..., N)
    return (torch.xlogy(q, q) - torch.xlogy(q, p)).sum(-1)


def continuous_nelbo_rate(
    log_x_theta: Tensor, x0: Tensor, z_t: Tensor, alpha_t: Tensor, dalpha_t: Tensor
) -> Tensor:
    """The continuous-time NELBO integrand per token (...) in float64 (module docstring):
    ``log_x_theta`` (..., N), ``x0`` and ``z_t`` (...) letter indices, ``alpha_t`` and
    ``dalpha_t`` = d alpha / dt broadcastable to ``z_t``'s shape."""
    size = log_x_theta.shape[-1]
    a_t = alpha_t.double()[..., None]  # (..., 1)
    log_keep, log_noise = torch.log(size * a_t), torch.log1p(-a_t)  # (..., 1)
    log_xbar = torch.where(
        torch.nn.functional.one_hot(x0, size).bool(),
        torch.logaddexp(log_keep, log_noise),
        log_noise,
    )  # (..., N): log(N alpha_t x + 1 - alpha_t)
    log_xbar_theta = torch.logaddexp(log_keep + log_x_theta.double(), log_noise)  # (..., N)
    at_i = z_t[..., None]
    log_xbar_i = log_xbar.gather(-1, at_i)  # (..., 1)
    log_xbar_theta_i = log_xbar_theta.gather(-1, at_i)  # (..., 1)
    ratio = (log_xbar - log_xbar_i).exp()  # (..., N): xbar_j / xbar_i, 0 for j != x at t = 0
    # xlogy: a letter with xbar_j = 0 (alpha_t = 1) adds nothing, not 0 * -inf
    jumps = (torch.xlogy(ratio, ratio) + ratio * (log_xbar_theta_i - log_xbar_theta)).sum(-1)
    bracket = size * (torch.exp(-log_xbar_i) - torch.exp(-log_xbar_theta_i)).squeeze(-1) - jumps
    return dalpha_t.double() / (size * alpha_t.double()) * bracket


def prior_kl(alpha_1: float, size: int) -> float:
    """KL(Cat(alpha_1 x + (1 - alpha_1) / N) || uniform over N) in nats, for any letter x."""
    kept = alpha_1 + (1 - alpha_1) / size
    other = (1 - alpha_1) / size
    return kept * math.log(size * kept) + (size - 1) * (
        other * math.log(size * other) if other > 0 else 0.0
    )

"""Noise schedules for masked diffusion, t in [0, 1].

sigma(t) is the total noise and alpha(t) = exp(-sigma(t)) the probability that a token is
still clean at time t; the mask probability is 1 - alpha(t) = -expm1(-sigma(t)). Every
schedule gives sigma, its exact derivative dsigma, alpha, dalpha = -dsigma * alpha, the mask
probability, and the inverse ``time_of_mask_probability`` (samplers use it to place steps at
given mask fractions). The parameterisations follow the MDLM code (kuleshov-group/mdlm,
``noise_schedule.py``):

- loglinear(eps):   mask probability (1 - eps) t,  sigma = -log(1 - (1 - eps) t)
- cosine(eps):      alpha = eps + (1 - eps) cos(pi t / 2)
- linear(min, max): sigma = sigma_min + t (sigma_max - sigma_min)
- geometric(min, max): sigma = sigma_min^(1 - t) sigma_max^t

Inputs may be Python floats (treated as float64) or tensors of any float dtype; outputs keep
the tensor's dtype.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import Tensor

from genodiff.errors import InputValueError


def _as_tensor(t: Tensor | float) -> Tensor:
    return t if isinstance(t, Tensor) else torch.tensor(t, dtype=torch.float64)


class NoiseSchedule(ABC):
    """Shared maths; subclasses define sigma, its derivative and the inverse."""

    @abstractmethod
    def sigma(self, t: Tensor | float) -> Tensor:
        """Total noise sigma(t) (increasing)."""

    @abstractmethod
    def dsigma(self, t: Tensor | float) -> Tensor:
        """d sigma / dt."""

    @abstractmethod
    def time_of_mask_probability(self, p: Tensor | float) -> Tensor:
        """Inverse of ``mask_probability``: the t in [0, 1] where the mask probability is p.

        p outside the schedule's range [mask_probability(0), mask_probability(1)] gives the
        nearest end, 0 or 1.
        """

    def alpha(self, t: Tensor | float) -> Tensor:
        """P(token still clean) = exp(-sigma(t))."""
        return torch.exp(-self.sigma(t))

    def dalpha(self, t: Tensor | float) -> Tensor:
        """d alpha / dt = -sigma'(t) alpha(t) (<= 0)."""
        return -self.dsigma(t) * self.alpha(t)

    def mask_probability(self, t: Tensor | float) -> Tensor:
        """1 - alpha(t) = -expm1(-sigma(t)), accurate near t = 0."""
        return -torch.expm1(-self.sigma(t))


class LogLinearSchedule(NoiseSchedule):
    """Mask probability (1 - eps) t;  sigma = -log(1 - (1 - eps) t),
    dsigma = (1 - eps) / (1 - (1 - eps) t);  weight dsigma / expm1(sigma) = 1 / t."""

    def __init__(self, eps: float = 1e-3) -> None:
        if not 0.0 <= eps < 1.0:
            raise InputValueError(
                f"noise_eps must be in [0, 1) for the loglinear schedule, got {eps}"
            )
        self.eps = eps

    def sigma(self, t: Tensor | float) -> Tensor:
        return -torch.log1p(-(1 - self.eps) * _as_tensor(t))

    def dsigma(self, t: Tensor | float) -> Tensor:
        return (1 - self.eps) / (1 - (1 - self.eps) * _as_tensor(t))

    def mask_probability(self, t: Tensor | float) -> Tensor:
        return (1 - self.eps) * _as_tensor(t)

    def time_of_mask_probability(self, p: Tensor | float) -> Tensor:
        return (_as_tensor(p) / (1 - self.eps)).clamp(0.0, 1.0)


class CosineSchedule(NoiseSchedule):
    """alpha = eps + (1 - eps) cos(pi t / 2);  sigma = -log(alpha),
    dsigma = (1 - eps) (pi / 2) sin(pi t / 2) / alpha."""

    def __init__(self, eps: float = 1e-3) -> None:
        if not 0.0 <= eps < 1.0:
            raise InputValueError(f"noise_eps must be in [0, 1) for the cosine schedule, got {eps}")
        self.eps = eps

    def alpha(self, t: Tensor | float) -> Tensor:
        return self.eps + (1 - self.eps) * torch.cos(_as_tensor(t) * (math.pi / 2))

    def sigma(self, t: Tensor | float) -> Tensor:
        return -torch.log(self.alpha(t))

    def dsigma(self, t: Tensor | float) -> Tensor:
        t = _as_tensor(t)
        return (1 - self.eps) * (math.pi / 2) * torch.sin(t * (math.pi / 2)) / self.alpha(t)

    def mask_probability(self, t: Tensor | float) -> Tensor:
        # 1 - cos(x) = 2 sin^2(x / 2), without cancellation near t = 0
        return 2 * (1 - self.eps) * torch.sin(_as_tensor(t) * (math.pi / 4)) ** 2

    def time_of_mask_probability(self, p: Tensor | float) -> Tensor:
        # p = 2 (1 - eps) sin^2(pi t / 4)
        half = (_as_tensor(p) / (2 * (1 - self.eps))).clamp(0.0, 0.5)
        # asin(sqrt(0.5)) * 4 / pi rounds to 1 + 2e-16: clamp, as the other schedules do
        return ((4 / math.pi) * torch.asin(torch.sqrt(half))).clamp(0.0, 1.0)


class LinearSchedule(NoiseSchedule):
    """sigma = sigma_min + t (sigma_max - sigma_min);  dsigma = sigma_max - sigma_min."""

    def __init__(self, sigma_min: float = 0.0, sigma_max: float = 10.0) -> None:
        if not 0.0 <= sigma_min < sigma_max:
            raise InputValueError(
                "the linear schedule needs 0 <= sigma_min < sigma_max, "
                f"got {sigma_min}, {sigma_max}"
            )
        self.sigma_min, self.sigma_max = sigma_min, sigma_max

    def sigma(self, t: Tensor | float) -> Tensor:
        return self.sigma_min + _as_tensor(t) * (self.sigma_max - self.sigma_min)

    def dsigma(self, t: Tensor | float) -> Tensor:
        return torch.full_like(_as_tensor(t), self.sigma_max - self.sigma_min)

    def time_of_mask_probability(self, p: Tensor | float) -> Tensor:
        sigma = -torch.log1p(-_as_tensor(p))
        return ((sigma - self.sigma_min) / (self.sigma_max - self.sigma_min)).clamp(0.0, 1.0)


class GeometricSchedule(NoiseSchedule):
    """sigma = sigma_min^(1 - t) sigma_max^t;  dsigma = sigma log(sigma_max / sigma_min)."""

    def __init__(self, sigma_min: float = 1e-4, sigma_max: float = 20.0) -> None:
        if not 0.0 < sigma_min < sigma_max:
            raise InputValueError(
                "the geometric schedule needs 0 < sigma_min < sigma_max, "
                f"got {sigma_min}, {sigma_max}"
            )
        self.sigma_min, self.sigma_max = sigma_min, sigma_max
        self.log_ratio = math.log(sigma_max / sigma_min)

    def sigma(self, t: Tensor | float) -> Tensor:
        return self.sigma_min * torch.exp(_as_tensor(t) * self.log_ratio)

    def dsigma(self, t: Tensor | float) -> Tensor:
        return self.sigma(t) * self.log_ratio

    def time_of_mask_probability(self, p: Tensor | float) -> Tensor:
        sigma = -torch.log1p(-_as_tensor(p))
        return (torch.log(sigma / self.sigma_min) / self.log_ratio).clamp(0.0, 1.0)


SCHEDULES: dict[str, type[NoiseSchedule]] = {
    "loglinear": LogLinearSchedule,
    "cosine": CosineSchedule,
    "linear": LinearSchedule,
    "geometric": GeometricSchedule,
}
#: Schedules parameterised by noise_eps; the others take sigma_min / sigma_max.
EPS_SCHEDULES = ("loglinear", "cosine")


def build_schedule(
    name: str, eps: float = 1e-3, sigma_min: float | None = None, sigma_max: float | None = None
) -> NoiseSchedule:
    """The schedule ``name``: loglinear and cosine use ``eps``; linear and geometric use
    ``sigma_min``/``sigma_max`` (None = that schedule's default: linear 0 and 10, geometric
    1e-4 and 20)."""
    if name not in SCHEDULES:
        raise InputValueError(
            f"unknown noise_schedule {name!r}; choose one of: {', '.join(SCHEDULES)}"
        )
    if name in EPS_SCHEDULES:
        if sigma_min is not None or sigma_max is not None:
            raise InputValueError(
                f"sigma_min/sigma_max apply to the linear and geometric schedules, not {name!r}; "
                "set them to null (use noise_eps for this schedule)"
            )
        return SCHEDULES[name](eps=eps)
    given = {"sigma_min": sigma_min, "sigma_max": sigma_max}
    return SCHEDULES[name](**{k: v for k, v in given.items() if v is not None})

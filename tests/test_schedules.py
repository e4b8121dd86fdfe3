"""Noise schedules: derivatives against autograd and finite differences, the inverse, ranges."""

import math

import pytest
import torch

from genodiff.processes.schedules import SCHEDULES, build_schedule

ALL = [
    build_schedule("loglinear", eps=1e-3),
    build_schedule("loglinear", eps=0.0),
    build_schedule("cosine", eps=1e-3),
    build_schedule("linear"),
    build_schedule("linear", sigma_min=0.5, sigma_max=6.0),
    build_schedule("geometric"),
    build_schedule("geometric", sigma_min=1e-3, sigma_max=1.0),
]
IDS = ["loglinear", "loglinear-eps0", "cosine", "linear", "linear-0.5-6", "geometric", "geo-1e-3-1"]
T = torch.linspace(0.02, 0.98, 49, dtype=torch.float64)


@pytest.mark.parametrize("schedule", ALL, ids=IDS)
def test_dsigma_is_the_autograd_derivative_of_sigma(schedule):
    t = T.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(schedule.sigma(t).sum(), t)
    torch.testing.assert_close(schedule.dsigma(T), grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("schedule", ALL, ids=IDS)
def test_loss_weight_matches_finite_differences_of_alpha(schedule):
    # The continuous-time weight dsigma / expm1(sigma) equals -alpha'(t) / (1 - alpha(t)).
    # alpha is taken from mask_probability (1 - alpha), independently of sigma and dsigma.
    h = 1e-6
    alpha = lambda t: 1 - schedule.mask_probability(t)  # noqa: E731
    d_alpha = (alpha(T + h) - alpha(T - h)) / (2 * h)
    expected = -d_alpha / schedule.mask_probability(T)
    weight = schedule.dsigma(T) / torch.expm1(schedule.sigma(T))
    torch.testing.assert_close(weight, expected, rtol=1e-6, atol=0)
    torch.testing.assert_close(schedule.dalpha(T), d_alpha, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("schedule", ALL, ids=IDS)
def test_mask_probability_is_one_minus_exp_minus_sigma(schedule):
    expected = 1 - torch.exp(-schedule.sigma(T))
    torch.testing.assert_close(schedule.mask_probability(T), expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(schedule.alpha(T), torch.exp(-schedule.sigma(T)))
    p = schedule.mask_probability(T)
    assert (p[1:] > p[:-1]).all()  # more noise as t grows


@pytest.mark.parametrize("schedule", ALL, ids=IDS)
def test_inverse_recovers_t_and_clamps_outside_the_range(schedule):
    torch.testing.assert_close(
        schedule.time_of_mask_probability(schedule.mask_probability(T)), T, rtol=1e-9, atol=1e-9
    )
    ends = torch.tensor([0.0, 1.0], dtype=torch.float64)
    p0, p1 = schedule.mask_probability(ends)
    assert schedule.time_of_mask_probability(max(p0.item() - 1e-3, 0.0)).item() == 0.0
    if p1 < 1:
        assert schedule.time_of_mask_probability(min(p1.item() + 1e-3, 1.0)).item() == 1.0
    # Python floats and float32 tensors work too (samplers pass either).
    assert schedule.mask_probability(0.5).dtype == torch.float64
    assert schedule.mask_probability(torch.tensor([0.5])).dtype == torch.float32


def test_known_values_of_each_parameterisation():
    t = torch.tensor([0.3], dtype=torch.float64)
    eps = 1e-3
    assert build_schedule("loglinear", eps).mask_probability(t).item() == pytest.approx(
        (1 - eps) * 0.3
    )
    cosine_alpha = eps + (1 - eps) * math.cos(math.pi * 0.3 / 2)
    assert build_schedule("cosine", eps).alpha(t).item() == pytest.approx(cosine_alpha)
    assert build_schedule("linear", sigma_min=1.0, sigma_max=5.0).sigma(t).item() == (
        pytest.approx(1.0 + 0.3 * 4.0)
    )
    geometric = build_schedule("geometric", sigma_min=1e-2, sigma_max=10.0)
    assert geometric.sigma(t).item() == pytest.approx(1e-2**0.7 * 10.0**0.3)


def test_cosine_mask_probability_is_accurate_near_zero():
    # 1 - cos(x) loses all digits for tiny x; the schedule must not.
    cosine = build_schedule("cosine", 0.0)
    t = torch.tensor([1e-6], dtype=torch.float64)
    x = math.pi * 1e-6 / 2  # 1 - cos(x) = x^2/2 - x^4/24 + ...
    assert cosine.mask_probability(t).item() == pytest.approx(x**2 / 2 - x**4 / 24, rel=1e-12)


def test_bad_schedule_settings_say_what_to_do():
    with pytest.raises(ValueError, match="choose one of"):
        build_schedule("quadratic")
    with pytest.raises(ValueError, match="sigma_min/sigma_max apply"):
        build_schedule("loglinear", sigma_max=3.0)
    with pytest.raises(ValueError, match="sigma_min < sigma_max"):
        build_schedule("geometric", sigma_min=2.0, sigma_max=1.0)
    with pytest.raises(ValueError, match="noise_eps"):
        build_schedule("cosine", eps=1.0)
    assert set(SCHEDULES) == {"loglinear", "cosine", "linear", "geometric"}

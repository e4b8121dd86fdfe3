"""D3PM (absorbing): the T-step NELBO against exact values, and the hybrid term."""

import math

import pytest
import torch

from genodiff.model import build_objective
from genodiff.objectives import D3PM, MDLM
from genodiff.samplers.request import SampleRequest
from tests.dna_objectives import IDS, d3pm, mdlm
from tests.test_mdlm import (
    TOK,
    FixedDistribution,
    JointOracle,
    all_sequences,
    discrete_nelbo,
    explicit_absorbing_kl,
)

P = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)  # p(A), p(C), p(G), p(T)


@pytest.mark.parametrize("steps", [1, 2, 3, 10, 1000])
def test_oracle_nelbo_is_exactly_minus_log_p_for_every_step_count(steps):
    # L = 1 with x_theta = p(x0): sum over all t in {1..T} and both masking outcomes.
    nelbo = discrete_nelbo(d3pm(num_steps=steps), JointOracle(P), all_sequences(1))
    torch.testing.assert_close(nelbo, -P.log(), rtol=1e-5, atol=1e-5)


def test_mass_on_mask_is_scored_by_the_mixture_posterior():
    # D3PM keeps the [MASK] logit: x_theta = ((1 - mu) p, mu). Reference: the KL of explicit
    # distributions, sum_t (t / T) KL_t; larger than -log p(x0).
    mu, steps = 0.25, 6
    nelbo = discrete_nelbo(d3pm(num_steps=steps), JointOracle(P, mask_mass=mu), all_sequences(1))
    x_theta = torch.cat([(1 - mu) * P, torch.tensor([mu], dtype=torch.float64)])
    for v in range(4):
        reference = sum(
            (k / steps) * explicit_absorbing_kl(x_theta, v, 1 - (k - 1) / steps, 1 - k / steps)
            for k in range(1, steps + 1)
        )
        assert nelbo[v].item() == pytest.approx(reference, rel=1e-5)
    assert (nelbo > -P.log() + 0.05).all()


def test_hybrid_term_only_in_training_mode():
    # Austin et al.'s hybrid loss at the sampled step t is KL_t + lambda * CE_t: ONE bound term
    # (their vb_terms at t, not T of them) beside the cross-entropy -log x_theta(x0 | x_t),
    # both over the same tokens. D3PM.loss estimates the NELBO as T * KL_t, so the training
    # loss must be T times Austin's. Reference: KL_t from explicit distributions.
    steps, lam = 50, 0.5
    objective = d3pm(num_steps=steps, hybrid_lambda=lam)
    probs = {7: 0.1, 8: 0.2, 9: 0.3, 10: 0.4}
    model = FixedDistribution(probs)
    x0 = torch.tensor([[7, 8, 9, 10, 4, 7, 7, 10]] * 16)

    objective.eval()
    evaluated, tokens = objective.loss(model, x0, torch.Generator().manual_seed(4))
    objective.train()
    trained, _ = objective.loss(model, x0, torch.Generator().manual_seed(4))

    # The same draws by hand: the times and masked positions, then Austin's per-step loss.
    t, masked = objective.process.draw_noise(x0, torch.Generator().manual_seed(4))
    x_theta = torch.tensor([*probs.values(), 0.0], dtype=torch.float64)  # A C G T [MASK]
    austin, kl_only = [], []
    for row, mask, t_row in zip(x0, masked, t.tolist(), strict=True):
        alpha_t, alpha_s = 1 - t_row, 1 - (t_row - 1 / steps)
        kl = [explicit_absorbing_kl(x_theta, int(x) - 7, alpha_s, alpha_t) for x in row[mask]]
        ce = [-math.log(probs[int(x)]) for x in row[mask]]
        austin.append(sum(kl) + lam * sum(ce))
        kl_only.append(sum(kl))
    assert masked.any() and not masked[:, 4].any()  # [PAD] never masked
    torch.testing.assert_close(
        evaluated.double(), steps * torch.tensor(kl_only, dtype=torch.float64), rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(
        trained.double(), steps * torch.tensor(austin, dtype=torch.float64), rtol=1e-4, atol=1e-3
    )
    assert torch.equal(tokens, torch.full((16,), 7))

    pure = d3pm(num_steps=steps, hybrid_lambda=0.0).train()
    again, _ = pure.loss(model, x0, torch.Generator().manual_seed(4))
    torch.testing.assert_close(again, evaluated)


def test_d3pm_is_mdlm_discrete_time_without_zero_masking():
    # One mechanism: D3PM's NELBO is MDLM's with eps = 0, T steps and no zero masking.
    model = JointOracle(torch.tensor([[0.3, 0.1, 0.1, 0.5]] * 4, dtype=torch.float64) / 4, 0.1)
    x0 = all_sequences(2)
    reference = mdlm(noise_eps=0.0, num_steps=7, zero_masking=False)
    torch.testing.assert_close(
        discrete_nelbo(d3pm(num_steps=7, hybrid_lambda=0.0), model, x0),
        discrete_nelbo(reference, model, x0),
    )


def test_sampling_and_config_checks():
    objective = build_objective({"name": "d3pm", "num_steps": 20, **IDS})
    assert isinstance(objective, D3PM) and objective.samplers == MDLM.samplers
    model = FixedDistribution({7: 0.5, 10: 0.5})
    samples = objective.sample(model, SampleRequest(4, 32, steps=20), torch.Generator())
    assert samples.shape == (4, 32) and set(samples.unique().tolist()) <= {7, 10}
    assert objective.process.schedule.mask_probability(1.0).item() == 1.0  # alpha_bar_T = 0
    assert objective.process.mask_id == TOK.mask_id
    with pytest.raises(
        ValueError, match="objective.num_steps: 0 is out of range; set a value at least 1"
    ):
        d3pm(num_steps=0)
    with pytest.raises(ValueError, match="hybrid_lambda"):
        d3pm(hybrid_lambda=-1.0)

"""Plaid: the ELBO of i.i.d. tokens with the exact posterior denoiser, the learned schedule,
gradients and optimiser steps through GenerativeTrainingModule, the sampler and its constraints."""

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from genodiff import backbones
from genodiff.backbones import Capabilities
from genodiff.objectives.gamma_schedule import LearnedGammaSchedule
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer
from genodiff.training.module import GenerativeTrainingModule
from tests.dna_objectives import plaid

PI = torch.tensor([0.1, 0.2, 0.3, 0.4])  # law of A, C, G, T (ids 7..10)


class ConstantLogits(nn.Module):
    """A "backbone" predicting log pi everywhere: with Plaid's Gaussian posterior term the
    logits are the exact posterior p(x0 | z_t) for i.i.d. tokens with law pi."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = Capabilities(vocab_size=16, hidden_size=8)
        out = torch.full((16,), -1e9)
        out[7:11] = PI.log()
        self.out = nn.Parameter(out)

    def forward(self, input_ids, sigma=None, inputs_embeds=None):
        return self.out.expand(*inputs_embeds.shape[:2], -1)


def tiny_caduceus(**kwargs) -> nn.Module:
    return backbones.build(name="caduceus", d_model=16, n_layer=1, vocab_size=12, **kwargs)


def iid_tokens(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    return 7 + torch.multinomial(PI, n * length, replacement=True, generator=generator).view(
        n, length
    )


def test_exact_posterior_elbo_bounds_the_entropy_and_is_close_to_it():
    # Exact denoiser: NELBO = H(pi) + KL(q(z_1) || N(0, I)) per token, and that KL is at most
    # the prior term KL(N(alpha_1 e, sigma_1^2) || N(0, I)) (0.0013 nats at gamma_1 = 6).
    # Seen: 1.2831 +- 0.0093 (1 SE) against H = 1.2799.
    torch.manual_seed(0)
    objective = plaid(d_model=8, schedule_hidden=64, self_condition=False).eval()
    g = torch.Generator().manual_seed(1)
    estimates = []
    with torch.no_grad():
        for _ in range(10):
            nelbo, tokens = objective.loss(ConstantLogits(), iid_tokens(16384, 1, g), g)
            estimates.append((nelbo.sum() / tokens.sum()).item())
    estimates = torch.tensor(estimates, dtype=torch.float64)
    mean, se = estimates.mean().item(), (estimates.std() / math.sqrt(len(estimates))).item()
    entropy = -(PI * PI.log()).sum().item()
    a2 = 1 / (1 + math.exp(6.0))
    prior = 0.5 * (16 * (1 - a2 - 1 - math.log(1 - a2)) + a2)
    assert entropy - 4 * se <= mean <= entropy + prior + 4 * se
    assert se < 0.015  # power: a wrong weight (e.g. a lost 1/2) moves the mean by ~0.6


def test_gamma_schedule_is_monotone_float64_with_exact_endpoints_and_derivative():
    schedule = LearnedGammaSchedule(gamma_0=-3.0, gamma_1=6.0, hidden=32)
    t = torch.linspace(0, 1, 1001, dtype=torch.float64)
    at = schedule(t)
    assert at.gamma.dtype == torch.float64 and at.dgamma.dtype == torch.float64
    assert (at.gamma.diff() > 0).all() and (at.dgamma > 0).all()
    assert at.gamma[0].item() == pytest.approx(-3.0, abs=1e-12)
    assert at.gamma[-1].item() == pytest.approx(6.0, abs=1e-12)
    h = 1e-6
    inner = t[1:-1]
    finite_difference = (schedule(inner + h).gamma - schedule(inner - h).gamma) / (2 * h)
    torch.testing.assert_close(schedule(inner).dgamma, finite_difference, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        schedule.gamma_1.fill_(4.0)
    assert schedule(torch.ones(1, dtype=torch.float64)).gamma.item() == pytest.approx(4.0)


def test_embeddings_are_unit_norm():
    objective = plaid(d_model=16, embed_dim=12)
    with torch.no_grad():
        objective.embedding.mul_(torch.rand(4, 1) * 5 + 0.1)
    norms = objective.embeddings().norm(dim=1)
    torch.testing.assert_close(norms, torch.ones(4))


def test_loss_is_finite_with_caduceus_and_gradients_reach_every_objective_parameter():
    torch.manual_seed(0)
    objective = plaid(d_model=16, schedule_hidden=16).train()
    x = torch.randint(7, 11, (4, 32))
    x[:, -3:] = 4  # [PAD] tail: not scored
    nelbo, tokens = objective.loss(tiny_caduceus(), x, torch.Generator().manual_seed(0))
    assert torch.isfinite(nelbo).all() and (nelbo > 0).all()
    assert tokens.tolist() == [29] * 4
    (nelbo.sum() / tokens.sum()).backward()
    for name, p in objective.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_rcps_backbone_and_width_mismatch_are_clear_errors():
    x = torch.randint(7, 11, (2, 8))
    with pytest.raises(ValueError, match="Caduceus-PS"):
        ps = tiny_caduceus(rcps=True, complement_map=DNATokenizer().complement_map)
        plaid(d_model=16).loss(ps, x)
    with pytest.raises(ValueError, match="d_model"):
        plaid(d_model=32).loss(tiny_caduceus(), x)
    with pytest.raises(ValueError, match=r"token ids \[7, 8, 9, 10\]"):
        plaid(d_model=16).loss(tiny_caduceus(), torch.full((2, 8), 11))


def test_a_plaid_run_on_a_backbone_it_cannot_drive_is_refused_before_it_writes(tmp_path, capsys):
    # Was: found by the first training step's loss, after the run folder was written.
    from genodiff import cli
    from tests.test_bad_input_cli import one_line_error
    from tests.test_cli import DEMO, TINY

    out = tmp_path / "run"
    options = ["objective=plaid", "model=caduceus_ps", "model.d_model=16", *TINY[1:]]
    assert cli.main(["train", DEMO, *options, f"output_dir={out}"]) == 2
    assert "Caduceus-PS (rcps=True)" in one_line_error(capsys, "train")
    assert not out.exists()


def test_training_module_optimizer_trains_the_objective_parameters():
    torch.manual_seed(0)
    config = {
        "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "objective": {"name": "plaid", "d_model": 16, "schedule_hidden": 16},
        "optim": {"lr": 1e-2},
        "ema": {"decay": 0.9},
    }
    module = GenerativeTrainingModule(config)
    module.trainer = SimpleNamespace(estimated_stepping_batches=10)
    optimizer = module.configure_optimizers()["optimizer"]
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert all(id(p) in in_optimizer for p in module.objective.parameters())
    before = {n: p.detach().clone() for n, p in module.objective.named_parameters()}
    x = torch.randint(7, 11, (4, 32))
    for _ in range(2):
        nelbo, tokens = module.objective.loss(module.backbone, x)
        optimizer.zero_grad()
        (nelbo.sum() / tokens.sum()).backward()
        optimizer.step()
    for name, p in module.objective.named_parameters():
        assert not torch.equal(p.detach(), before[name]), name
    assert module.objective_ema is not None  # GenerativeModel averages them too


def test_ancestral_sampler_marginals_with_the_exact_denoiser():
    torch.manual_seed(0)
    objective = plaid(d_model=8, schedule_hidden=64).eval()
    request = SampleRequest(64, 64, steps=10)
    samples = objective.sample(ConstantLogits(), request, torch.Generator().manual_seed(0))
    assert samples.shape == (64, 64)
    counts = torch.bincount(samples.flatten(), minlength=16).double()
    assert counts[7:11].sum() == samples.numel()
    freq = counts[7:11] / samples.numel()
    # 4096 draws: SE <= 0.008; 0.04 leaves room for the finite-step discretisation bias
    assert (freq - PI.double()).abs().max() < 0.04


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sampling_with_16_bit_weights_keeps_the_marginals(dtype):
    # genodiff sample --dtype casts the objective's weights too (its input projection and
    # time embedding): fed float32 inputs they raised "mat1 and mat2 must have the same dtype".
    torch.manual_seed(0)
    objective = plaid(d_model=8, schedule_hidden=64).eval().to(dtype)
    request = SampleRequest(64, 64, steps=10)
    samples = objective.sample(
        ConstantLogits().to(dtype), request, torch.Generator().manual_seed(0)
    )
    counts = torch.bincount(samples.flatten(), minlength=16).double()
    assert counts[7:11].sum() == samples.numel()
    freq = counts[7:11] / samples.numel()
    assert (freq - PI.double()).abs().max() < 0.04  # as in float32 (test above)


def test_given_positions_are_held_noised_and_kept_in_the_output():
    torch.manual_seed(0)
    objective = plaid(d_model=8, schedule_hidden=16).eval()
    template = torch.full((10,), 7)
    given = torch.zeros(10, dtype=torch.bool)
    template[[2, 5]], given[[2, 5]] = torch.tensor([10, 8]), True
    seen = []
    predict = objective.predict

    def spy(model, z, gamma, x_self):
        seen.append((z.clone(), gamma.clone()))
        return predict(model, z, gamma, x_self)

    objective.predict = spy
    n = 512
    request = SampleRequest(n, 10, steps=6, template=template, given=given)
    out = objective.sample(ConstantLogits(), request, torch.Generator().manual_seed(3))
    assert (out[:, given] == template[given]).all()
    # Every network call sees z = alpha_t e(template) + sigma_t eps at the given positions.
    E = objective.embeddings().detach()
    for z, gamma in seen:
        alpha = torch.sigmoid(-gamma[0]).sqrt().item()
        sigma = torch.sigmoid(gamma[0]).sqrt().item()
        for pos, token in ((2, 10), (5, 8)):
            mean = z[:, pos].mean(0)
            expected = alpha * E[token - 7]
            assert ((mean - expected).abs() < 5 * sigma / math.sqrt(n)).all()
            assert z[:, pos].std(0).mean().item() == pytest.approx(sigma, rel=0.1)

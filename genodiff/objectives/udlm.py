"""UDLM (Schiff et al., 2025): diffusion with uniform noise over the alphabet.

Every token may be replaced by a random letter and edited again later, so the network must be
told the noise level: a UDLM model is always time-conditioned (sigma(t) = -log alpha_t goes to
the backbone, which must declare ``capabilities.time_conditioning``: Caduceus with
``model.time_conditioning=true``). The forward process and its alphabet are
``genodiff.processes.uniform``; the exact posterior and the bound are
``genodiff.processes.uniform_posterior``.

x_theta is a plain softmax of the network's logits over the letters (other ids get
probability 0); there is no zero masking and no carry-over (a letter of z_t may be noise).
The NELBO of a sequence, summed over its scored tokens (the letters; [PAD] is neither
corrupted nor scored):

- continuous time (``num_steps`` = 0): E_t of the integrand of ``continuous_nelbo_rate``
  over t in [0, 1]. Training draws t in [sampling_eps, 1] as MDLM does; held-out scoring
  draws it in all of [0, 1] (below);
- discrete time (``num_steps`` T > 0): T * E_t KL(q(z_s | z_t, x) || p_theta(z_s | z_t)),
  t on {1/T, ..., 1}, s = t - 1/T, the last step being the reconstruction;

plus, in both, the prior term KL(q(z_1 | x) || uniform) per token (constant, about
(N - 1) eps^2 / 2).

Held-out scoring (``genodiff eval``, validation: the objective in eval mode) draws the times
with importance weights (``time_draws.weighted_times``, power ``eval_t_power``): the same
expectation, a far smaller variance. The integrand is large and noisy at small t (a letter
replaced by noise weighs about 1/t, log-divergently, where MDLM's masked tokens give a flat
integrand), so uniform t leaves the bound about 6x as noisy as MDLM's at the same draws;
t = s^2.5 (s stratified) with weight 2.5 s^1.5 cuts the sd about 4-fold on DNA-like data
(tests/test_udlm_exact_laws.py). The held-out times cover all of [0, 1]: the expected
integrand grows like ((N - 1) / N) log(1 / t) near t = 0 whatever the network, so the piece
[0, sampling_eps] that training leaves out holds about 0.006 nats per letter at 1e-3 (MDLM's
flat integrand loses about nothing there), and an estimate over [sampling_eps, 1] sat about
0.005 nats per letter below the bound. The weights keep the variance finite down to t = 0.
Training draws t uniformly in [sampling_eps, 1], as before.

Against the reference code (Schiff et al.'s ``diffusion.py``): it adds a reconstruction term
and computes the loss with alpha_t = 1 - t while it corrupts with 1 - (1 - eps) t. Here the
reconstruction term is left out because it vanishes in continuous time (alpha_0 = 1), and one
alpha_t = 1 - (1 - eps) t serves corruption, loss and sampler, as the bound requires.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.batch_shard import BatchShard
from genodiff.conditioning import network_kwargs
from genodiff.config_values import ConfigError
from genodiff.objectives.base import Objective
from genodiff.processes.uniform import UniformForwardProcess
from genodiff.processes.uniform_posterior import continuous_nelbo_rate, prior_kl, step_kl
from genodiff.randomness.noise import Noise
from genodiff.registry import register_objective
from genodiff.samplers import UNIFORM_SAMPLERS


@register_objective("udlm")
class UDLM(Objective):
    """Uniform-noise diffusion over the tokenizer's ``sample_ids`` (the alphabet: DNA A/C/G/T),
    log-linear schedule 1 - alpha_t = (1 - noise_eps) t."""

    samplers = UNIFORM_SAMPLERS
    time_conditioning = True
    noisy_states = "uniform"
    config_ranges = {
        "noise_eps": "[0, 1); alpha at t = 1",
        "num_steps": ">=0; 0 = continuous time",
        "sampling_eps": "(0, 1)",
        "eval_t_power": ">=1; 1 = uniform t, as in training",
    }

    def __init__(
        self,
        sample_ids: Sequence[int],
        noise_eps: float = 1e-3,
        num_steps: int = 0,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = True,
        eval_t_samples: int = 1,
        eval_t_power: float = 2.5,
    ) -> None:
        super().__init__()
        if not time_conditioning:
            raise ConfigError(
                "objective=udlm needs a time-conditioned model (uniform noise looks like data: "
                "only the time tells the network how much to trust each letter); remove "
                "objective.time_conditioning=false and build the backbone with "
                "model.time_conditioning=true"
            )
        self.process = UniformForwardProcess(
            sample_ids, noise_eps, num_steps, sampling_eps, low_discrepancy
        )
        self.eval_t_samples = eval_t_samples
        self.eval_t_power = eval_t_power

    @property
    def scoring(self) -> str:
        power = self.eval_t_power
        return (
            f"{self.process.scoring}; held-out times t = s^{power:g} with importance weights "
            f"(objective.eval_t_power {power:g}; 1 = uniform t)"
        )

    def x0_log_probs(
        self, model: nn.Module, z_t: Tensor, t: Tensor, labels: Tensor | None = None
    ) -> Tensor:
        """log x_theta(z_t, t[, labels]) over the letters, (B, L, N) in float32 (alphabet
        order, ``process.alphabet``): the one network call of a loss term or sampler step."""
        sigma = self.process.network_sigma(t)  # (B,)
        logits = model(z_t, sigma, **network_kwargs(labels)).float()  # (B, L, V)
        return logits[..., self.process.alphabet].log_softmax(dim=-1)

    def nelbo_terms(
        self,
        model: nn.Module,
        input_ids: Tensor,
        t: Tensor,
        z_t: Tensor,
        labels: Tensor | None,
        weight: Tensor | None = None,
    ) -> Tensor:
        """The NELBO estimate (B,) for given times ``t`` (B,) and noisy sequences ``z_t``
        (B, L) (``loss`` draws them; tests and evaluations may enumerate them), the time terms
        multiplied by the times' importance ``weight`` (B,) when given."""
        process = self.process
        log_x = self.x0_log_probs(model, z_t, t, labels)  # (B, L, N)
        scored = process.scored(input_ids)  # (B, L)
        x0 = process.to_alphabet(input_ids).clamp_min(0)  # (B, L); unscored: any letter
        z = process.to_alphabet(z_t).clamp_min(0)
        alpha_t = process.alpha(t)[:, None]  # (B, 1)
        if process.num_steps:
            alpha_s = process.alpha((t - 1 / process.num_steps).clamp_min(0.0))[:, None]
            per_token = process.num_steps * step_kl(log_x, x0, z, alpha_t, alpha_s)
        else:
            dalpha = process.dalpha(t)[:, None]  # (B, 1)
            per_token = continuous_nelbo_rate(log_x, x0, z, alpha_t, dalpha)  # (B, L)
        if weight is not None:
            per_token = per_token * weight.double()[:, None]
        prior = prior_kl(float(process.alpha(torch.tensor(1.0))), process.size)
        nelbo = torch.where(scored, per_token + prior, 0.0).sum(dim=-1)  # (B,)
        return nelbo.float()

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its letters in nats (B,), letters (B,)); in eval
        mode with importance-weighted times over all of [0, 1] (``eval_t_power``, module doc)."""
        power = 1.0 if self.training else self.eval_t_power
        t, weight, z_t = self.process.draw_weighted_states(
            input_ids, power, generator, shard, whole_range=not self.training
        )
        nelbo = self.nelbo_terms(model, input_ids, t, z_t, labels, weight)
        return nelbo, self.process.scored(input_ids).sum(dim=-1)

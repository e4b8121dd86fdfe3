"""Plaid (Gulrajani & Hashimoto, 2023): Gaussian diffusion on learned unit-norm embeddings.

Each modelled token x has an embedding e(x) in R^D, ||e|| = 1 (learned; normalised in the
forward). Variance preserving forward process with the learned schedule gamma(t)
(``gamma_schedule.LearnedGammaSchedule``): z_t = alpha_t e + sigma_t eps,
alpha_t^2 = sigmoid(-gamma_t), sigma_t^2 = sigmoid(gamma_t), SNR(t) = exp(-gamma_t).

Denoiser. The objective owns an input projection of [z_t (rescaled to unit variance),
self-conditioning x_hat] (2D -> d_model) plus a Fourier embedding of gamma_t (so a backbone
without time conditioning still knows the noise level), feeds the configured backbone through
``inputs_embeds`` and reads its logits at the modelled tokens only (``token_ids``, the tokenizer's
``sample_ids``: A/C/G/T for DNA;
hg38 N bases are [PAD], never scored). To those logits it adds the exact Gaussian posterior
term (alpha_t / sigma_t^2) z_t E^T, so a backbone outputting log pi is the exact posterior
p(x0 | z_t) for i.i.d. tokens with law pi. x_hat = softmax(logits) E.

NELBO per scored token (the loss returns it summed per sequence):
  diffusion   0.5 gamma'(t) exp(-gamma_t) ||e(x0) - x_hat(z_t)||^2,  t ~ U[0, 1] (stratified)
  reconstruct -log p(x0 | z_0)                                   (z_0 at gamma_0)
  prior       KL(N(alpha_1 e, sigma_1^2 I) || N(0, I)) = 0.5 (D (sigma_1^2 - 1 - log
              sigma_1^2) + alpha_1^2 ||e||^2)
Both denoiser evaluations (at t and at 0) run as one batch of 2B sequences.

Self-conditioning: in training, each row is self-conditioned with probability 1/2 (a first
no-grad pass gives the x_hat fed to the second); at evaluation every row is self-conditioned,
as Plaid evaluates; the sampler (``ancestral``, below) carries the previous step's x_hat. With
``schedule_variance_grad`` the schedule's interior (whose shape does not change the expected
NELBO, only its variance) gets the gradient of E[d^2] instead of E[d], d = per-token diffusion
term of the sequence, as in Plaid/VDM; its endpoints and all other parameters get the NELBO's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.backbones.capabilities import capabilities_of
from genodiff.batch_shard import BatchShard, shard_rows
from genodiff.conditioning import network_kwargs
from genodiff.errors import InputValueError
from genodiff.objectives.base import Objective
from genodiff.objectives.gamma_schedule import LearnedGammaSchedule
from genodiff.randomness.noise import Noise, as_noise
from genodiff.registry import register_objective
from genodiff.samplers.base import Sampler
from genodiff.samplers.categorical import sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid

_FOURIER_FEATURES = 32  # frequencies exp(linspace(-5, 5)) of gamma; sin and cos of each


def ancestral(
    objective: Plaid,
    model: nn.Module,
    request: SampleRequest,
    noise: Noise,
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

    def randn() -> Tensor:  # (n, L, D), row by row (genodiff.randomness.noise)
        return noise.normal(n, length, dim).to(device)

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
    u = noise.uniform(n, length, 1).to(device)  # (n, L, 1)
    draws = objective.token_ids()[sample_categorical(probs, u=u)]  # (n, L)
    return torch.where(given, template, draws)


@register_objective("plaid")
class Plaid(Objective):
    samplers = {"ancestral": Sampler(ancestral)}
    config_ranges = {"d_model": ">=1", "embed_dim": ">=1", "schedule_hidden": ">=1"}

    def __init__(
        self,
        d_model: int,
        token_ids: Sequence[int],
        pad_id: int,
        embed_dim: int = 16,
        gamma_0: float = -3.0,
        gamma_1: float = 6.0,
        schedule_hidden: int = 1024,
        schedule_variance_grad: bool = True,
        self_condition: bool = True,
        low_discrepancy: bool = True,
        eval_t_samples: int = 1,
    ) -> None:
        if len(token_ids) < 2 or len(set(token_ids)) != len(token_ids) or pad_id in token_ids:
            raise InputValueError(
                f"token_ids must be >= 2 distinct ids without [PAD] ({pad_id}), got {token_ids}"
            )
        super().__init__()
        self.d_model, self.embed_dim, self.pad_id = d_model, embed_dim, pad_id
        self.schedule_variance_grad = schedule_variance_grad
        self.self_condition = self_condition
        self.low_discrepancy = low_discrepancy
        self.eval_t_samples = eval_t_samples
        self.token_list = [int(i) for i in token_ids]  # a list, not a buffer: EMA averages those
        weight = torch.randn(len(token_ids), embed_dim)
        self.embedding = nn.Parameter(weight / weight.norm(dim=1, keepdim=True))  # (K, D)
        self.embedding._no_weight_decay = True
        self.schedule = LearnedGammaSchedule(gamma_0, gamma_1, schedule_hidden)
        self.in_proj = nn.Linear(2 * embed_dim, d_model)
        with torch.no_grad():  # self-conditioning starts switched off, as in Plaid
            self.in_proj.weight[:, embed_dim:].zero_()
        self.time_embed = nn.Linear(2 * _FOURIER_FEATURES, d_model)

    def token_ids(self) -> Tensor:
        """The modelled token ids (K,) on the objective's device."""
        return torch.tensor(self.token_list, device=self.embedding.device)

    def embeddings(self) -> Tensor:
        """The unit-norm embedding table E: (K, D)."""
        return self.embedding / self.embedding.norm(dim=1, keepdim=True)

    def check_backbone(self, model: nn.Module) -> None:
        """ValueError for a backbone Plaid cannot drive (RC-equivariant, or another width)."""
        capabilities = capabilities_of(model)
        if capabilities.rc_equivariant:
            raise InputValueError(
                "Plaid feeds the backbone d_model-wide inputs_embeds; Caduceus-PS (rcps=True) "
                "takes 2*d_model channels and is not supported. Use a Caduceus-Ph model "
                "(model=caduceus_ph or caduceus_tiny)."
            )
        width = capabilities.hidden_size
        if width is not None and width != self.d_model:
            raise InputValueError(
                f"objective.d_model={self.d_model} but the backbone's hidden width "
                f"(capabilities.hidden_size) is {width}; "
                "set objective.d_model to the model's (configs use ${model.d_model})"
            )

    def categories(self, input_ids: Tensor) -> Tensor:
        """Index into ``token_ids`` of each token (B, L); [PAD] maps to 0 (never scored)."""
        matches = input_ids[..., None] == self.token_ids()  # (B, L, K)
        known = matches.any(-1) | (input_ids == self.pad_id)
        if not known.all():
            bad = sorted(set(input_ids[~known].tolist()))
            raise InputValueError(
                f"Plaid models only token ids {self.token_list} (and [PAD]); the "
                f"input holds {bad}. Add them to objective.token_ids."
            )
        return matches.long().argmax(-1)

    def sample_t(
        self,
        n: int,
        device: torch.device,
        generator: Noise | torch.Generator | None = None,
    ) -> Tensor:
        """(n,) t in [0, 1) as float64; low-discrepancy: ``Noise.stratified`` (one generator:
        u_i = (U + i / n) mod 1; per-window streams: stratified within a window's draws)."""
        noise = as_noise(generator, device)
        return noise.stratified(n) if self.low_discrepancy else noise.uniform(n)

    def noised(self, e: Tensor, gamma: Tensor, noise: Tensor) -> Tensor:
        """z = alpha e + sigma eps: (N, L, D) float32 from (N, L, D) and gamma (N,)."""
        alpha, sigma2 = self.schedule.alpha_sigma2(gamma)
        return alpha.float()[:, None, None] * e + sigma2.sqrt().float()[:, None, None] * noise

    def predict(
        self,
        model: nn.Module,
        z: Tensor,
        gamma: Tensor,
        x_self: Tensor,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Logits of p(x0 | z) over ``token_ids`` (N, L, K) and x_hat = softmax E (N, L, D)."""
        E = self.embeddings()  # (K, D)
        alpha, sigma2 = self.schedule.alpha_sigma2(gamma)  # (N,), (N,)
        unit = torch.rsqrt(alpha.square() / self.embed_dim + sigma2).float()[:, None, None]
        weights = self.in_proj.weight.dtype  # bfloat16 for a model loaded with that dtype
        inputs = torch.cat([z * unit, x_self * math.sqrt(self.embed_dim)], dim=-1)  # (N, L, 2D)
        h = self.in_proj(inputs.to(weights))
        frequencies = torch.linspace(-5.0, 5.0, _FOURIER_FEATURES, dtype=torch.float64).exp()
        phases = gamma[:, None] * frequencies.to(gamma.device)  # (N, F)
        time = self.time_embed(torch.cat([phases.sin(), phases.cos()], dim=-1).to(weights))
        h = h + time[:, None, :]  # (N, L, d_model)
        out = model(None, None, inputs_embeds=h, **network_kwargs(labels)).float()
        out = out[..., self.token_list]  # (N, L, K)
        with torch.autocast(z.device.type, enabled=False):  # the exact posterior in float32
            posterior = (alpha / sigma2).float()[:, None, None] * (z.float() @ E.float().T)
            logits = out + posterior  # (N, L, K)
            return logits, logits.softmax(dim=-1) @ E.float()

    def denoise(
        self,
        model: nn.Module,
        z: Tensor,
        gamma: Tensor,
        self_cond: Tensor,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``predict`` with self-conditioning on the rows where ``self_cond`` (N,) is True:
        a first no-grad pass from x_self = 0 gives the x_hat fed to the second."""
        x_self = torch.zeros_like(z)  # (N, L, D)
        if self.self_condition and self_cond.any():
            rows = self_cond.nonzero()[:, 0]
            with torch.no_grad():
                row_labels = None if labels is None else labels[rows]
                first = self.predict(model, z[rows], gamma[rows], x_self[rows], row_labels)
                x_self[rows] = first[1]
        return self.predict(model, z, gamma, x_self, labels)

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its scored tokens in nats (B,), scored tokens (B,))."""
        self.check_backbone(model)
        batch, length = input_ids.shape
        device = input_ids.device
        scored = input_ids != self.pad_id  # (B, L)
        k = self.categories(input_ids)  # (B, L)
        e = torch.where(scored[..., None], self.embeddings()[k], 0.0)  # (B, L, D)
        total, rows = shard_rows(shard, batch)  # noise for the global batch, our rows kept
        noise = as_noise(generator, device)
        at = self.schedule(self.sample_t(total, device, noise)[rows])  # (B,) each
        gamma_0, gamma_1 = self.schedule.endpoints()
        gamma = torch.cat([at.gamma, gamma_0.expand(batch)])  # (2B,): t, then t = 0
        eps = noise.normal(total, 2, length, self.embed_dim, row_axis=1)  # (2, total, L, D)
        eps = eps[:, rows].reshape(2 * batch, length, self.embed_dim)  # (2B, L, D)
        z = self.noised(torch.cat([e, e]), gamma, eps)  # (2B, L, D)
        if self.training:
            draw = noise.uniform(total, 2, dtype=torch.float32, row_axis=1)  # (2, total)
            self_cond = draw[:, rows].reshape(-1) < 0.5
        else:
            self_cond = torch.ones(2 * batch, dtype=torch.bool, device=device)
        both = None if labels is None else torch.cat([labels, labels])  # (2B,): t, then t = 0
        logits, x_hat = self.denoise(model, z, gamma, self_cond, both)  # (2B, L, K), (2B, L, D)

        error = (e - x_hat[:batch]).double().square().sum(-1)  # (B, L)
        weight = 0.5 * at.dgamma * torch.exp(-at.gamma)  # (B,) = -SNR'(t) / 2
        diffusion = torch.where(scored, weight[:, None] * error, 0.0).sum(-1)  # (B,)
        nll = -logits[batch:].log_softmax(-1).gather(-1, k[..., None]).squeeze(-1)  # (B, L)
        reconstruction = torch.where(scored, nll.double(), 0.0).sum(-1)  # (B,)
        alpha2_1, sigma2_1 = torch.sigmoid(-gamma_1), torch.sigmoid(gamma_1)
        kl = 0.5 * (
            self.embed_dim * (sigma2_1 - 1 - torch.log(sigma2_1))
            + alpha2_1 * e.double().square().sum(-1)
        )  # (B, L)
        prior = torch.where(scored, kl, 0.0).sum(-1)  # (B,)
        tokens = scored.sum(-1)
        if self.schedule_variance_grad and self.training and at.shape.requires_grad:
            scale = 2 * (diffusion / tokens.clamp_min(1)).detach()  # (B,)
            for tensor in (at.shape, at.dshape):
                tensor.register_hook(lambda grad: grad * scale)
        return (diffusion + reconstruction + prior).float(), tokens

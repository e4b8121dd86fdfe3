"""MDLM (Sahoo et al., 2024): masked diffusion with the SUBS parameterisation.

Forward process: each scored token is replaced by [MASK] with probability
p_t = 1 - alpha(t) (``schedule.mask_probability``). The network gives x_theta(x_t, t), a
distribution over the vocabulary at every position. The reverse step from t to s < t is
Austin et al.'s x0-parameterised posterior

    p_theta(x_s | x_t) = sum_x0 q(x_s | x_t, x0) p(x0 | x_t),
    p(x0 | x_t) ∝ q(x_t | x0) x_theta(x0),

so an unmasked x_t is always copied (q(x_t | x0) is zero unless x0 = x_t) and only masked
positions carry KL terms. For a masked token, with x_m = x_theta([MASK]) and
Z = p_t + alpha_t x_m, the KL between q(x_s | x_t = [MASK], x0) and p_theta(x_s | x_t) is

    KL_t = q0 (log(Z / p_t) - log x_theta(x0)) + qm log(qm / pm),
    q0 = (alpha_s - alpha_t) / p_t,  qm = p_s / p_t,  pm = (p_s + alpha_s x_m) / Z.

- Zero masking (``zero_masking=True``, SUBS): the [MASK] logit is removed, x_m = 0, and
  KL_t = (alpha_s - alpha_t) / (1 - alpha_t) * -log x_theta(x0): the paper's Eq. 9.
  Without it the network may put mass on [MASK]; that mass is wasted (the NELBO is larger).
- Discrete time (``num_steps`` T > 0): t uniform on {1/T, ..., 1}, s = t - 1/T, and the
  NELBO is T * E_t[sum over masked tokens of KL_t] (the t = 1/T term is the reconstruction
  -log p_theta(x0 | x_{1/T})).
- Continuous time (T = 0, the limit T -> inf): per masked token
  w(t) * (-log x_theta(x0) + log(Z / p_t) - x_m / Z),  w = sigma'(t) / expm1(sigma(t))
  (= 1/t for the log-linear schedule); with zero masking, w(t) * -log x_theta(x0).
- Carry-over (``carry_over=True``, SUBS): the prediction at an unmasked position is the input
  token itself. The KL terms above already copy unmasked tokens, so carry-over changes only the
  reconstruction from the clean sequence, -log x_theta(x0 | x0) at t = 0, which it makes zero.
  ``carry_over=False`` adds that term, summed over the scored tokens, from a second forward
  pass of the network on the clean sequence. This is upstream MDLM's semantics: its
  ``subs`` parameterisation carries over, its ``d3pm`` parameterisation (the "w/o carry-over"
  ablation of the paper's Table 8, ``subs_masking`` being zero masking) adds
  ``_reconstruction_loss`` = -log x_theta(x0 | x0) to ``_d3pm_loss``.

As upstream, the prior term at t = 1 (zero when alpha(1) = 0) and any noise at t = 0 (alpha(0)
< 1 for the geometric schedule) are ignored, so with ``noise_eps`` > 0 a fraction eps of the
tokens is never scored: the bound may sit below the NLL, in expectation over the data by up to
about L * eps * log V (per sequence by about eps times its NLL).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.objectives.base import BatchShard, Objective, shard_rows
from genodiff.objectives.schedules import build_schedule
from genodiff.registry import register_objective
from genodiff.samplers import MASKED_SAMPLERS, sample_masked
from genodiff.sampling import SampleRequest

# Finite stand-in for -inf: keeps log_softmax and its gradient free of NaN in fp32/bf16.
NEG_INF = -1e6
# Time conditioning sees sigma(t) capped here (sigma(1) is infinite when alpha(1) = 0).
MAX_CONDITIONING_SIGMA = 20.0


@register_objective("mdlm")
class MDLM(Objective):
    """Masked diffusion; see the module docstring for the maths of every flag.

    ``noise_eps`` parameterises the loglinear and cosine schedules, ``sigma_min`` and
    ``sigma_max`` the linear and geometric ones (None = that schedule's default).
    ``mask_id``, ``pad_id`` and ``sample_ids`` (the ids samplers may draw; None = every id
    but [MASK]) come from the run's tokenizer.
    """

    samplers = tuple(MASKED_SAMPLERS)
    stepless_samplers = ("first-hitting",)

    def __init__(
        self,
        mask_id: int,
        pad_id: int,
        noise_schedule: str = "loglinear",
        noise_eps: float = 1e-3,
        sigma_min: float | None = None,
        sigma_max: float | None = None,
        num_steps: int = 0,
        carry_over: bool = True,
        zero_masking: bool = True,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        eval_t_samples: int = 1,
        sample_ids: Sequence[int] | None = None,
    ) -> None:
        if sample_ids is not None and (not sample_ids or mask_id in sample_ids):
            raise ValueError(
                f"sample_ids must be a non-empty list of ids without [MASK] ({mask_id}), "
                f"got {sample_ids}"
            )
        if eval_t_samples < 1:
            raise ValueError(f"eval_t_samples must be >= 1, got {eval_t_samples}")
        if not isinstance(num_steps, int) or num_steps < 0:
            raise ValueError(
                f"num_steps must be an integer >= 0 (0 = continuous time), got {num_steps!r}"
            )
        if not 0.0 < sampling_eps < 1.0:
            raise ValueError(f"sampling_eps must be in (0, 1), got {sampling_eps}")
        super().__init__()
        self.mask_id = mask_id
        self.pad_id = pad_id
        self.sample_ids = None if sample_ids is None else [int(i) for i in sample_ids]
        self.schedule = build_schedule(noise_schedule, noise_eps, sigma_min, sigma_max)
        self.num_steps = num_steps
        self.carry_over = carry_over
        self.zero_masking = zero_masking
        self.sampling_eps = sampling_eps
        self.low_discrepancy = low_discrepancy
        self.time_conditioning = time_conditioning
        self.eval_t_samples = eval_t_samples

    @property
    def _removed(self) -> str | None:
        """The column the training loss removes: [MASK] with zero masking, none without."""
        return "mask" if self.zero_masking else None

    def sample_t(
        self, n: int, device: torch.device, generator: torch.Generator | None = None
    ) -> Tensor:
        """(n,) times. Low-discrepancy: u_i = (U + i / n) mod 1 (one U per batch), else iid.

        Continuous time: t = (1 - sampling_eps) u + sampling_eps in [sampling_eps, 1].
        Discrete time: t = (floor(u T) + 1) / T on {1/T, ..., 1}.
        """
        if self.low_discrepancy:
            u0 = torch.rand(1, device=device, generator=generator)
            u = (u0 + torch.arange(n, device=device) / n) % 1.0  # (n,)
        else:
            u = torch.rand(n, device=device, generator=generator)
        if self.num_steps:
            steps = torch.floor(u * self.num_steps).clamp_max(self.num_steps - 1)
            return (steps + 1) / self.num_steps
        return (1 - self.sampling_eps) * u + self.sampling_eps

    def undrawable(self, vocab: int, device: torch.device) -> Tensor:
        """(V,) bool: the columns a sampler must never draw ([MASK], and every id outside
        ``sample_ids`` when it is set)."""
        if self.sample_ids is None:
            blocked = torch.zeros(vocab, dtype=torch.bool, device=device)
        else:
            blocked = torch.ones(vocab, dtype=torch.bool, device=device)
            blocked[self.sample_ids] = False
        blocked[self.mask_id] = True
        return blocked

    def _log_x_theta(self, model: nn.Module, x_t: Tensor, t: Tensor, removed: str | None) -> Tensor:
        """The network's log x_theta(x_t, t) in float32: (B, L, V), with the [MASK] column
        (``removed="mask"``) or every undrawable column (``removed="undrawable"``) removed."""
        sigma = None
        if self.time_conditioning:
            sigma = self.schedule.sigma(t).clamp_max(MAX_CONDITIONING_SIGMA)  # (B,)
        logits = model(x_t, sigma).float()  # (B, L, V)
        if removed == "mask":
            mask_column = torch.tensor([self.mask_id], device=logits.device)
            logits = logits.index_fill(-1, mask_column, NEG_INF)
        elif removed == "undrawable":
            logits = logits.masked_fill(self.undrawable(logits.shape[-1], logits.device), NEG_INF)
        return logits.log_softmax(dim=-1)

    def x0_log_probs(self, model: nn.Module, x_t: Tensor, t: Tensor) -> Tensor:
        """log p_theta(x0 | x_t) in float32 renormalised over the drawable ids: (B, L, V).

        A data token is never [MASK], so samplers always get the prediction without it (also
        with ``zero_masking=False``, which only changes the loss), and without the ids outside
        ``sample_ids`` (DNA: only A/C/G/T are drawn). Samplers read masked positions only
        (unmasked ones are carried over by the sampler itself), so no carry-over one-hot is
        built here: it would cost a (B, L, V) pass per network call on the sampling hot path.
        """
        return self._log_x_theta(model, x_t, t, removed="undrawable")

    def _masked_token_loss(self, log_x0: Tensor, x_mask: Tensor, t: Tensor) -> Tensor:
        """NELBO contribution (B, L) of each position if masked at times ``t`` (B,).

        ``log_x0`` = log x_theta(x0), ``x_mask`` = x_theta([MASK]) (0 with zero masking),
        both (B, L). The formulas are in the module docstring.
        """
        t = t.double()
        p_t = self.schedule.mask_probability(t)  # (B,)
        if self.num_steps == 0:
            weight = self.schedule.dsigma(t) / torch.expm1(self.schedule.sigma(t))  # (B,)
            p_t, alpha_t = p_t.float()[:, None], (1 - p_t).float()[:, None]
            z = p_t + alpha_t * x_mask  # (B, L)
            rate = -log_x0 + torch.log1p(alpha_t * x_mask / p_t) - x_mask / z
            return weight.float()[:, None] * rate
        p_s = self.schedule.mask_probability((t - 1 / self.num_steps).clamp_min(0.0))  # (B,)
        q0 = ((p_t - p_s) / p_t).float()[:, None]  # (alpha_s - alpha_t) / (1 - alpha_t)
        qm = (p_s / p_t).float()[:, None]
        p_t, p_s = p_t.float()[:, None], p_s.float()[:, None]
        z = p_t + (1 - p_t) * x_mask  # (B, L)
        pm = (p_s + (1 - p_s) * x_mask) / z  # (B, L); equals qm when x_mask = 0
        kl = q0 * (torch.log1p((1 - p_t) * x_mask / p_t) - log_x0)
        kl = kl + torch.xlogy(qm, qm) - torch.xlogy(qm, pm)
        return self.num_steps * kl

    def _reconstruction(self, model: nn.Module, input_ids: Tensor) -> Tensor:
        """-log x_theta(x0 | x0) at t = 0 summed over the scored tokens: (B,)."""
        t0 = torch.zeros(input_ids.shape[0], device=input_ids.device)
        log_x = self._log_x_theta(model, input_ids, t0, self._removed)  # (B, L, V)
        nll = -log_x.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        return torch.where(input_ids != self.pad_id, nll, 0.0).sum(dim=-1)

    def nelbo_terms(
        self, model: nn.Module, input_ids: Tensor, t: Tensor, masked: Tensor
    ) -> tuple[Tensor, Tensor]:
        """For given times ``t`` (B,) and masked positions ``masked`` (B, L): the NELBO
        estimate (B,) and the cross-entropy -log x_theta(x0) summed over masked tokens (B,).

        ``loss`` draws t and ``masked``; this lets tests and evaluations enumerate them.
        """
        x_t = input_ids.masked_fill(masked, self.mask_id)
        log_x = self._log_x_theta(model, x_t, t, self._removed)  # (B, L, V)
        log_x0 = log_x.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        x_mask = log_x[..., self.mask_id].exp()  # (B, L)
        per_token = self._masked_token_loss(log_x0, x_mask, t)  # (B, L)
        nelbo = torch.where(masked, per_token, 0.0).sum(dim=-1)  # (B,)
        if not self.carry_over:
            nelbo = nelbo + self._reconstruction(model, input_ids)
        cross_entropy = torch.where(masked, -log_x0, 0.0).sum(dim=-1)  # (B,)
        return nelbo, cross_entropy

    def draw_noise(
        self,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Times t (B,) and masked positions (B, L); [PAD] positions are never masked. With a
        ``shard``, both are drawn for the global batch and our rows kept."""
        batch, length = input_ids.shape
        total, rows = shard_rows(shard, batch)
        device = input_ids.device
        t = self.sample_t(total, device, generator)[rows]  # (B,)
        draw = torch.rand(total, length, device=device, generator=generator)[rows]  # (B, L)
        p_t = self.schedule.mask_probability(t.double()).to(draw.dtype)  # (B,)
        masked = (draw < p_t[:, None]) & (input_ids != self.pad_id)  # (B, L)
        return t, masked

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its tokens in nats (B,), scored tokens (B,)).

        Positions holding [PAD] (N bases, padding) are never masked and never scored.
        """
        t, masked = self.draw_noise(input_ids, generator, shard)
        nelbo, _ = self.nelbo_terms(model, input_ids, t, masked)
        return nelbo, (input_ids != self.pad_id).sum(dim=-1)

    @torch.no_grad()
    def sample(
        self, model: nn.Module, request: SampleRequest, generator: torch.Generator | None = None
    ) -> Tensor:
        return sample_masked(self, model, request, generator)

    def sampler_name(self, request: SampleRequest) -> str:
        """As ``Objective.sampler_name``, and ValueError for the cached sampler with time
        conditioning, before any sampling (``genodiff train`` checks it before training)."""
        name = super().sampler_name(request)
        if name == "cached" and self.time_conditioning:
            raise ValueError(
                "sampler 'cached' needs a model without time conditioning: it reuses x_theta "
                "while a sequence is unchanged, and with objective.time_conditioning=true the "
                "prediction changes with t at every step. Choose the ancestral or first-hitting "
                "sampler (samples.sampler= / --sampler)"
            )
        return name

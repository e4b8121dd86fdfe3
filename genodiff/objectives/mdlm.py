"""MDLM (Sahoo et al., 2024): masked diffusion with the SUBS parameterisation.

Forward process: each scored token is replaced by [MASK] with probability 1 - alpha(t).
SUBS: the network never predicts [MASK] (its logit is removed) and unmasked tokens are
carried over, so only masked positions contribute to the loss. The continuous-time NELBO
per token is  -log p_theta(x0 | x_t) * sigma'(t) / expm1(sigma(t))  on masked positions
(1/t for the log-linear schedule).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from genodiff.objectives.base import Objective
from genodiff.objectives.schedules import build_schedule
from genodiff.registry import register_objective
from genodiff.samplers import MASKED_SAMPLERS, sample_masked
from genodiff.sampling import SampleRequest
from genodiff.tokenizers import DNATokenizer

_TOKENIZER = DNATokenizer()
# Finite stand-in for -inf: keeps log_softmax and its gradient free of NaN in fp32/bf16.
NEG_INF = -1e6


@register_objective("mdlm")
class MDLM(Objective):
    samplers = tuple(MASKED_SAMPLERS)

    def __init__(
        self,
        mask_id: int = _TOKENIZER.mask_id,
        pad_id: int = _TOKENIZER.pad_id,
        noise_schedule: str = "loglinear",
        noise_eps: float = 1e-3,
        sampling_eps: float = 1e-3,
        low_discrepancy: bool = True,
        time_conditioning: bool = False,
        eval_t_samples: int = 1,
    ) -> None:
        if eval_t_samples < 1:
            raise ValueError(f"eval_t_samples must be >= 1, got {eval_t_samples}")
        super().__init__()
        self.mask_id = mask_id
        self.pad_id = pad_id
        self.schedule = build_schedule(noise_schedule, noise_eps)
        self.sampling_eps = sampling_eps
        self.low_discrepancy = low_discrepancy
        self.time_conditioning = time_conditioning
        self.eval_t_samples = eval_t_samples

    def sample_t(
        self, n: int, device: torch.device, generator: torch.Generator | None = None
    ) -> Tensor:
        """t in [sampling_eps, 1]; low-discrepancy: u_i = (U + i / n) mod 1 (one U per batch)."""
        if self.low_discrepancy:
            u0 = torch.rand(1, device=device, generator=generator)
            u = (u0 + torch.arange(n, device=device) / n) % 1.0  # (n,)
        else:
            u = torch.rand(n, device=device, generator=generator)
        return (1 - self.sampling_eps) * u + self.sampling_eps

    def x0_log_probs(self, model: nn.Module, x_t: Tensor, t: Tensor) -> Tensor:
        """log p_theta(x0 | x_t) in float32 with the [MASK] logit removed: (B, L, V)."""
        sigma = self.schedule.sigma(t) if self.time_conditioning else None
        logits = model(x_t, sigma).float()  # (B, L, V)
        mask_column = torch.tensor([self.mask_id], device=logits.device)
        return logits.index_fill(-1, mask_column, NEG_INF).log_softmax(dim=-1)

    def loss(
        self, model: nn.Module, input_ids: Tensor, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NELBO summed over its tokens in nats (B,), scored tokens (B,)).

        Positions holding [PAD] (N bases, padding) are never masked and never scored.
        """
        batch, length = input_ids.shape
        t = self.sample_t(batch, input_ids.device, generator)  # (B,)
        weight = self.schedule.dsigma(t) / torch.expm1(self.schedule.sigma(t))  # (B,)
        scored = input_ids != self.pad_id  # (B, L)
        draw = torch.rand(batch, length, device=input_ids.device, generator=generator)
        masked = (draw < self.schedule.mask_probability(t)[:, None]) & scored  # (B, L)
        x_t = input_ids.masked_fill(masked, self.mask_id)
        log_p = self.x0_log_probs(model, x_t, t)  # (B, L, V)
        nll = -log_p.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        nelbo = torch.where(masked, nll * weight[:, None], 0.0).sum(dim=-1)  # (B,)
        return nelbo, scored.sum(dim=-1)

    @torch.no_grad()
    def sample(
        self, model: nn.Module, request: SampleRequest, generator: torch.Generator | None = None
    ) -> Tensor:
        return sample_masked(self, model, request, generator)

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

from genodiff.objectives.schedules import build_schedule
from genodiff.registry import register_objective
from genodiff.sampling import sample_categorical
from genodiff.tokenizers import DNATokenizer

_TOKENIZER = DNATokenizer()
# Finite stand-in for -inf: keeps log_softmax and its gradient free of NaN in fp32/bf16.
NEG_INF = -1e6


@register_objective("mdlm")
class MDLM:
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
        """(sum of per-token NELBO over the batch in nats, number of scored tokens).

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
        nelbo = torch.where(masked, nll * weight[:, None], 0.0).sum()
        return nelbo, scored.sum()

    @torch.no_grad()
    def sample(
        self,
        model: nn.Module,
        num_samples: int,
        length: int,
        steps: int,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Ancestral sampling from all-[MASK] over ``steps`` uniform steps in t, then a final
        noise-removal step (argmax at t = sampling_eps) for any token still masked."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        device = next(model.parameters()).device
        x = torch.full((num_samples, length), self.mask_id, dtype=torch.long, device=device)
        times = torch.linspace(1.0, self.sampling_eps, steps + 1, dtype=torch.float64)
        for t, s in zip(times[:-1], times[1:], strict=True):
            masked = x == self.mask_id  # (n, L)
            if not masked.any():
                break
            p_x0 = self.x0_log_probs(model, x, t.expand(num_samples).to(device)).double().exp()
            p_t, p_s = self.schedule.mask_probability(t), self.schedule.mask_probability(s)
            # q(x_s | x_t = MASK, x0 ~ p_x0): unmask to x0 w.p. (p_t - p_s)/p_t, else stay masked
            q = p_x0 * (p_t - p_s)  # (n, L, V)
            q[..., self.mask_id] = p_s
            x = torch.where(masked, sample_categorical(q, generator), x)
        masked = x == self.mask_id
        if masked.any():
            t_final = torch.full((num_samples,), self.sampling_eps, device=device)
            x = torch.where(masked, self.x0_log_probs(model, x, t_final).argmax(-1), x)
        return x

"""The x0-parameterised reverse process on the masked forward process (MDLM and D3PM).

The network gives x_theta(x_t, t), a distribution over the vocabulary at every position. The
reverse step from t to s < t is Austin et al.'s x0-parameterised posterior

    p_theta(x_s | x_t) = sum_x0 q(x_s | x_t, x0) p(x0 | x_t),
    p(x0 | x_t) ∝ q(x_t | x0) x_theta(x0),

so an unmasked x_t is always copied (q(x_t | x0) is zero unless x0 = x_t) and only masked
positions carry KL terms. For a masked token, with x_m = x_theta([MASK]) and
Z = p_t + alpha_t x_m, the KL between q(x_s | x_t = [MASK], x0) and p_theta(x_s | x_t) is

    KL_t = q0 (log(Z / p_t) - log x_theta(x0)) + qm log(qm / pm),
    q0 = (alpha_s - alpha_t) / p_t,  qm = p_s / p_t,  pm = (p_s + alpha_s x_m) / Z.

- Discrete time (``num_steps`` T > 0): t uniform on {1/T, ..., 1}, s = t - 1/T, and the
  NELBO is T * E_t[sum over masked tokens of KL_t] (the t = 1/T term is the reconstruction
  -log p_theta(x0 | x_{1/T})).
- Continuous time (T = 0, the limit T -> inf): per masked token
  w(t) * (-log x_theta(x0) + log(Z / p_t) - x_m / Z),  w = sigma'(t) / expm1(sigma(t))
  (= 1/t for the log-linear schedule).
With x_m = 0 (the [MASK] logit removed) both reduce to the weight times -log x_theta(x0).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from genodiff.conditioning import network_kwargs
from genodiff.processes.masked import MaskedForwardProcess
from genodiff.samplers.categorical import NEG_INF


def log_x_theta(
    process: MaskedForwardProcess,
    model: nn.Module,
    x_t: Tensor,
    t: Tensor,
    removed: str | None,
    labels: Tensor | None = None,
) -> Tensor:
    """The network's log x_theta(x_t, t[, labels]) in float32: (B, L, V), with the [MASK]
    column (``removed="mask"``) or every undrawable column (``removed="undrawable"``) removed."""
    sigma = process.network_sigma(t)
    logits = model(x_t, sigma, **network_kwargs(labels)).float()  # (B, L, V)
    if removed == "mask":
        mask_column = torch.tensor([process.mask_id], device=logits.device)
        logits = logits.index_fill(-1, mask_column, NEG_INF)
    elif removed == "undrawable":
        logits = logits.masked_fill(process.undrawable(logits.shape[-1], logits.device), NEG_INF)
    return logits.log_softmax(dim=-1)


def x0_log_probs(
    process: MaskedForwardProcess,
    model: nn.Module,
    x_t: Tensor,
    t: Tensor,
    labels: Tensor | None = None,
) -> Tensor:
    """log p_theta(x0 | x_t) in float32 renormalised over the drawable ids: (B, L, V).

    A data token is never [MASK], so samplers always get the prediction without it (whatever
    the loss does with that column), and without the ids outside ``sample_ids`` (DNA: only
    A/C/G/T are drawn). Samplers read masked positions only (unmasked ones are carried over by
    the sampler itself), so no carry-over one-hot is built here: it would cost a (B, L, V)
    pass per network call on the sampling hot path.
    """
    return log_x_theta(process, model, x_t, t, "undrawable", labels)


def masked_token_nelbo(
    process: MaskedForwardProcess, log_x0: Tensor, x_mask: Tensor, t: Tensor
) -> Tensor:
    """NELBO contribution (B, L) of each position if masked at times ``t`` (B,).

    ``log_x0`` = log x_theta(x0), ``x_mask`` = x_theta([MASK]) (0 when that column is
    removed), both (B, L). The formulas are in the module docstring.
    """
    schedule, num_steps = process.schedule, process.num_steps
    t = t.double()
    p_t = schedule.mask_probability(t)  # (B,)
    if num_steps == 0:
        weight = schedule.dsigma(t) / torch.expm1(schedule.sigma(t))  # (B,)
        p_t, alpha_t = p_t.float()[:, None], (1 - p_t).float()[:, None]
        z = p_t + alpha_t * x_mask  # (B, L)
        rate = -log_x0 + torch.log1p(alpha_t * x_mask / p_t) - x_mask / z
        return weight.float()[:, None] * rate
    p_s = schedule.mask_probability((t - 1 / num_steps).clamp_min(0.0))  # (B,)
    q0 = ((p_t - p_s) / p_t).float()[:, None]  # (alpha_s - alpha_t) / (1 - alpha_t)
    qm = (p_s / p_t).float()[:, None]
    p_t, p_s = p_t.float()[:, None], p_s.float()[:, None]
    z = p_t + (1 - p_t) * x_mask  # (B, L)
    pm = (p_s + (1 - p_s) * x_mask) / z  # (B, L); equals qm when x_mask = 0
    kl = q0 * (torch.log1p((1 - p_t) * x_mask / p_t) - log_x0)
    kl = kl + torch.xlogy(qm, qm) - torch.xlogy(qm, pm)
    return num_steps * kl


def nelbo_terms(
    process: MaskedForwardProcess,
    model: nn.Module,
    input_ids: Tensor,
    t: Tensor,
    masked: Tensor,
    removed: str | None,
    labels: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """For times ``t`` (B,) and masked positions ``masked`` (B, L): the KL terms of the NELBO
    (B,) and the cross-entropy -log x_theta(x0) summed over masked non-[PAD] tokens (B,), with the
    [MASK] column ``removed`` (``"mask"``) or kept (None)."""
    x_t = process.corrupt(input_ids, masked)
    log_x = log_x_theta(process, model, x_t, t, removed, labels)
    log_x0 = log_x.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
    x_mask = log_x[..., process.mask_id].exp()  # (B, L)
    per_token = masked_token_nelbo(process, log_x0, x_mask, t)  # (B, L)
    scored = process.scored_masked(input_ids, masked)  # (B, L): a masked [PAD] is not scored
    nelbo = torch.where(scored, per_token, 0.0).sum(dim=-1)  # (B,)
    cross_entropy = torch.where(scored, -log_x0, 0.0).sum(dim=-1)  # (B,)
    return nelbo, cross_entropy

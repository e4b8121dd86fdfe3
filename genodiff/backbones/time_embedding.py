"""Time conditioning of the DNA backbones: the noise level sigma (B,) as a vector per sequence.

Choice (docs/architecture.md §3.4): **additive** conditioning, the pattern the class labels
use (``genodiff.conditioning.add_label``): e(sigma) = W2 SiLU(W1 phi(sigma) + b1) + b2, with
phi(sigma) = cat(cos(sigma f), sin(sigma f)) and f_i = exp(-ln(10000) i / (d / 2)), i < d / 2
(the DiT's sinusoidal features, at d features instead of 256), is added to the token
embeddings at every position, before the first block. In a pre-norm residual stack the vector
then reaches every block through the residual stream. adaLN (a scale and shift per block) was
not chosen: it would touch every block of three backbone families (Ph, PS and their fused
kernels) for a conditioning signal of one scalar per sequence.

W2 and b2 start at zero (as the DiT's adaLN layers), so a freshly built time-conditioned model
computes exactly what the unconditioned one does until training moves them. A backbone built
without time conditioning holds no such module: its state dict and its function are unchanged.
sigma = None (a caller that gives no time, e.g. fine-tuning on clean sequences) means
sigma = 0, the clean end, as the text plugin's DiT does.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from genodiff.conditioning import add_at_every_position

# phi's frequency range: f_i = MAX_PERIOD^(-i / half), as the DiT's timestep embedder.
MAX_PERIOD = 10000.0


class SigmaEmbedding(nn.Module):
    """sigma (B,) -> (B, dim): sinusoidal features of sigma, then Linear, SiLU, Linear.

    Stored as ``mlp.0`` (dim -> dim) and ``mlp.2`` (dim -> dim, zero at construction)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim < 2:
            raise ValueError(f"a sigma embedding needs at least 2 features, got {dim}")
        self.dim = dim
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.zeros_(self.mlp[2].bias)

    def features(self, sigma: Tensor) -> Tensor:
        """phi(sigma): (B,) -> (B, dim) in float32 (an odd dim gets a zero last feature)."""
        half = self.dim // 2
        exponents = torch.arange(half, dtype=torch.float32, device=sigma.device) / half
        freqs = torch.exp(-math.log(MAX_PERIOD) * exponents)  # (half,)
        angles = sigma.float()[:, None] * freqs[None, :]  # (B, half)
        phi = torch.cat([angles.cos(), angles.sin()], dim=-1)  # (B, 2 half)
        if self.dim % 2:
            phi = torch.cat([phi, torch.zeros_like(phi[:, :1])], dim=-1)
        return phi

    def forward(self, sigma: Tensor) -> Tensor:
        """(B,) -> (B, dim)."""
        weight = self.mlp[0].weight
        return self.mlp(self.features(sigma).to(weight.dtype))


def sigma_embedding_for(time_conditioning: bool, dim: int) -> SigmaEmbedding | None:
    """The sigma embedding a backbone built with ``time_conditioning`` holds; None without
    (no new parameter, so its checkpoints are unchanged)."""
    return SigmaEmbedding(dim) if time_conditioning else None


def add_sigma(
    hidden: Tensor,
    embedding: SigmaEmbedding | None,
    sigma: Tensor | None,
    rc_symmetric: bool = False,
) -> Tensor:
    """``hidden`` (B, L, C) plus e(sigma) (B, d) at every position; ``hidden`` itself for a
    backbone without time conditioning (which ignores sigma). sigma None means 0; a scalar
    or (B, 1) sigma is broadcast to the rows. ``rc_symmetric`` as in
    ``genodiff.conditioning.add_at_every_position`` (Caduceus-PS)."""
    if embedding is None:
        return hidden
    batch = hidden.shape[0]
    if sigma is None:
        sigma = torch.zeros(batch, device=hidden.device)
    sigma = sigma.reshape(-1).expand(batch)  # (B,)
    return add_at_every_position(hidden, embedding(sigma), rc_symmetric)

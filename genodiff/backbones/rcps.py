"""Reverse-complement parameter sharing (RCPS) pieces of Caduceus-PS.

Follows kuleshov-group/caduceus ``modeling_rcps.py``. An RCPS hidden state has 2*D channels,
cat[fwd, rc_stream], and is equivariant: the state for rc(ids) is ``rc_states`` (flip over
sequence and all 2*D channels) of the state for ids. Every module is applied to the first half
as is and, reverse-complemented, to the second half, so both halves share one set of weights.

The prenorm add + norm exists in two orderings (see ``rcps_add_norm``): the upstream fused
kernel path (``fused_add_norm=True``, which the released PS checkpoints were trained with)
swaps the two halves inside every block, the plain PyTorch path does not. Both are equivariant
but they are different functions of the same weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from genodiff.ops import add_norm, inference_path


def rc_states(x: torch.Tensor) -> torch.Tensor:
    """Reverse complement of hidden states: flip sequence and channels. (B, L, C) -> (B, L, C)."""
    return x.flip(-2, -1)


def rc_ids(input_ids: torch.Tensor, complement_map: torch.Tensor) -> torch.Tensor:
    """Reverse complement of token ids, complement_map[flip(ids)]. (B, L) -> (B, L)."""
    return complement_map[input_ids.flip(-1)]


class RCPSEmbedding(nn.Module):
    """ids (B, L) -> cat[E(ids), rc_states(E(rc(ids)))] (B, L, 2*D); one (V, D) table."""

    def __init__(self, vocab_size: int, d_model: int, complement_map: torch.Tensor):
        super().__init__()
        self.register_buffer("complement_map", complement_map.clone().long())  # (V,)
        self.embedding = nn.Embedding(vocab_size, d_model)

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        fwd = self.embedding(input_ids)  # (B, L, D)
        rc = rc_states(self.embedding(rc_ids(input_ids, self.complement_map)))  # (B, L, D)
        return torch.cat([fwd, rc], dim=-1)


class RCPSWrapper(nn.Module):
    """Makes a (B, L, D) -> (B, L, D) module equivariant on (B, L, 2*D) states:
    cat[M(x[..., :D]), rc_states(M(rc_states(x[..., D:])))]. Where nothing needs a gradient
    M runs once, on both strands as one batch of 2B rows (M must treat rows independently)."""

    def __init__(self, submodule: nn.Module):
        super().__init__()
        self.submodule = submodule

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fwd, rc = x.chunk(2, dim=-1)  # (B, L, D) each
        rc = rc_states(rc)
        if inference_path(x, *self.submodule.parameters()):  # rows are independent: one batch
            out_fwd, out_rc = self.submodule(torch.cat([fwd, rc])).chunk(2)
        else:
            out_fwd, out_rc = self.submodule(fwd), self.submodule(rc)
        return torch.cat([out_fwd, rc_states(out_rc)], dim=-1)


def rcps_add_norm(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    norm: nn.Module,
    residual_in_fp32: bool,
    swap_halves: bool = False,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prenorm add + norm on (B, L, 2*D) states; returns (normed, residual), both (B, L, 2*D).

    With s = x + residual split into halves (a, b): residual <- cat[a, b] and
    normed <- cat[norm(a), rc_states(norm(rc_states(b)))]. ``swap_halves`` takes (a, b) =
    (s[..., D:], s[..., :D]) instead: that is what upstream's fused ``RCPSMambaBlock`` computes
    (its "fwd" call reads the second half and its "rc" call the flipped first half), so the
    released PS checkpoints need it in every block (but not in the final norm_f). Each half is
    one ``genodiff.ops.add_norm`` call, as upstream's two fused kernel calls; ``fused`` selects
    that kernel where the upstream kernels run.
    """
    xa, xb = x.chunk(2, dim=-1)  # (B, L, D) each
    ra, rb = (None, None) if residual is None else residual.chunk(2, dim=-1)
    if swap_halves:
        (xa, ra), (xb, rb) = (xb, rb), (xa, ra)
    normed_a, residual_a = add_norm(xa, ra, norm, residual_in_fp32, fused)
    rb = None if rb is None else rc_states(rb)
    normed_b, residual_b = add_norm(rc_states(xb), rb, norm, residual_in_fp32, fused)
    normed = torch.cat([normed_a, rc_states(normed_b)], dim=-1)
    return normed, torch.cat([residual_a, rc_states(residual_b)], dim=-1)


class RCPSAddNormWrapper(RCPSWrapper):
    """The non-fused RCPS add + norm, holding the norm as ``submodule`` (upstream's name)."""

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None, residual_in_fp32: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return rcps_add_norm(x, residual, self.submodule, residual_in_fp32)


class RCPSBlock(nn.Module):
    """RCPS prenorm residual block around a (B, L, D) mixer; (B, L, 2*D) states.

    As upstream's ``RCPSMambaBlock``: with fused_add_norm the norm is stored bare (key
    ``norm.weight``) and the halves are swapped (``rcps_add_norm``); otherwise it is wrapped
    (key ``norm.submodule.weight``) and the halves keep their order.
    """

    def __init__(
        self, mixer: nn.Module, norm: nn.Module, fused_add_norm: bool, residual_in_fp32: bool
    ):
        super().__init__()
        self.mixer = RCPSWrapper(mixer)
        self.norm = norm if fused_add_norm else RCPSAddNormWrapper(norm)
        self.fused_add_norm = fused_add_norm
        self.residual_in_fp32 = residual_in_fp32

    def forward(
        self, hidden_states: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.fused_add_norm:
            hidden_states, residual = rcps_add_norm(
                hidden_states,
                residual,
                self.norm,
                self.residual_in_fp32,
                swap_halves=True,
                fused=True,
            )
        else:
            hidden_states, residual = self.norm(hidden_states, residual, self.residual_in_fp32)
        return self.mixer(hidden_states), residual


class RCPSLMHead(nn.Module):
    """(B, L, 2*D) -> logits (B, L, V) = x[..., :D] W^T + flip_chan(x[..., D:]) W[cmap]^T.

    Stored as upstream: ``lm_head.weight`` (tied to the embedding by the model) and the
    ``complement_map`` buffer. Logits are RC-equivariant: logits(rc(ids)) is logits(ids)
    flipped over the sequence with the vocabulary permuted by the complement map.
    """

    def __init__(self, d_model: int, vocab_size: int, complement_map: torch.Tensor):
        super().__init__()
        self.register_buffer("complement_map", complement_map.clone().long())  # (V,)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fwd, rc = x.chunk(2, dim=-1)  # (B, L, D) each
        weight = self.lm_head.weight  # (V, D)
        return F.linear(fwd, weight) + F.linear(rc.flip(-1), weight[self.complement_map])

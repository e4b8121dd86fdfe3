"""Backbone inputs from a one-hot (or any soft) encoding of the ids, so that a classifier's
gradient with respect to its input tokens exists (the first-order form of D-CBG).

An embedding lookup E[ids] equals one_hot(ids) @ E, and the backbones take the result through
``inputs_embeds`` (docs/architecture.md §3.4). Caduceus-PS embeds both strands,
cat[E(ids), rc_states(E(rc(ids)))]; with one-hot rows the reverse complement of the ids is the
one-hot flipped over positions with its columns permuted by the complement map:
onehot(rc(ids))[l, v] = onehot(ids)[L - 1 - l, complement[v]].
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.hyena import HyenaDNA
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.backbones.rcps import rc_states
from genodiff.errors import InputValueError


def embed_one_hot(backbone: nn.Module, one_hot: Tensor) -> Tensor:
    """(B, L, V) one-hot rows over the backbone's padded vocabulary -> its ``inputs_embeds``
    (B, L, d), (B, L, 2d) for Caduceus-PS. InputValueError for a backbone whose embedding this
    module does not know (the first-order form needs it; the exact form does not)."""
    if isinstance(backbone, Caduceus):
        word_embeddings = backbone.backbone.embeddings.word_embeddings
        table = word_embeddings.weight  # (V, d)
        forward = one_hot @ table  # (B, L, d)
        if not backbone.rcps:
            return forward
        reverse_one_hot = one_hot.flip(1)[..., word_embeddings.complement_map]  # (B, L, V)
        return torch.cat([forward, rc_states(reverse_one_hot @ table)], dim=-1)  # (B, L, 2d)
    if isinstance(backbone, MambaLM):
        return one_hot @ backbone.backbone.embedding.weight
    if isinstance(backbone, HyenaDNA):
        return one_hot @ backbone.backbone.embeddings.word_embeddings.weight
    raise InputValueError(
        f"the first-order classifier guidance needs the gradient with respect to the input "
        f"tokens, and a {type(backbone).__name__} classifier cannot take one-hot inputs "
        "(caduceus, mamba and hyena can); use the classifier form 'exact'",
        parameter="classifier_form",
    )

"""The AR objective's sampler: left to right, one token per network call.

Each token is drawn from the next-token distribution renormalised over the objective's
``sample_ids`` (DNA: A/C/G/T; then temperature / nucleus apply), so special tokens and N are
never produced. A backbone that declares a recurrent step (Mamba: ``allocate_inference_cache``
/ ``step``, one constant-size state per layer; a transformer: a key/value cache) runs one token
at a time; any other (HyenaDNA) recomputes the full forward pass on the prefix for every new
token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor, nn

from genodiff.backbones.capabilities import capabilities_of
from genodiff.samplers.categorical import sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest


class NextTokenModel(Protocol):
    """What a next-token objective (AR) offers this sampler."""

    bos_id: int
    pad_id: int
    sample_ids: Sequence[int]


def left_to_right(
    objective: NextTokenModel,
    model: nn.Module,
    request: SampleRequest,
    generator: torch.Generator | None,
) -> Tensor:
    """Left to right, one network call per position (``request.steps`` is unused).

    A given position keeps its template token and is fed to the model as context (a
    given prefix acts as a prompt); the others are drawn from the next-token
    distribution over ``sample_ids`` with the request's temperature and top-p.
    """
    device = next(model.parameters()).device
    n, length = request.num_samples, request.length
    x, given = request.canvas(objective.pad_id, device)  # (n, L) each
    bos = torch.full((n, 1), objective.bos_id, dtype=torch.long, device=device)
    # A template that starts with [BOS] (a text prefix: [CLS] ...) is read as it is, as the
    # AR objective reads such windows; otherwise the model reads a [BOS] of its own first.
    led = bool(given[:, 0].all() and (x[:, 0] == objective.bos_id).all())
    recurrent = capabilities_of(model).recurrent_step
    if recurrent:
        cache = model.allocate_inference_cache(n)
        logits = model.step(x[:, :1] if led else bos, cache)  # (n, V): the next token's
    for i in request.reporting(range(int(led), length), length - int(led)):
        if not given[:, i].all():
            if not recurrent:
                context = x[:, :i] if led else torch.cat([bos, x[:, :i]], dim=1)
                logits = model(context)[:, -1]  # (n, V)
            draw = next_token(objective.sample_ids, logits, request, generator)
            x[:, i] = torch.where(given[:, i], x[:, i], draw)
        if recurrent and i < length - 1:
            logits = model.step(x[:, i], cache)  # (n, V): distribution of x_{i+2}
    return x


def next_token(
    sample_ids: Sequence[int],
    logits: Tensor,
    request: SampleRequest,
    generator: torch.Generator | None,
) -> Tensor:
    """One id per row from next-token logits (n, V), renormalised over ``sample_ids``."""
    drawable = torch.tensor(sample_ids, device=logits.device)
    log_p = logits.float().log_softmax(dim=-1)[:, drawable]  # (n, K)
    probs = sharpen(log_p, request.temperature, request.top_p)  # (n, K) float64
    return drawable[sample_categorical(probs, generator)]  # (n,)

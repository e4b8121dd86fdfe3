"""The AR objective's sampler: left to right, one token per network call.

Each token is drawn from the next-token distribution renormalised over the objective's
``sample_ids`` (DNA: A/C/G/T; then temperature / nucleus apply), so special tokens and N are
never produced. A backbone that declares a recurrent step (Mamba: ``allocate_inference_cache``
/ ``step``, one constant-size state per layer; a transformer: a key/value cache) runs one token
at a time; any other (HyenaDNA) recomputes the full forward pass on the prefix for every new
token.

Guided (``request.guidance``, ``genodiff.guidance.Guide``): CFG draws from
log_softmax(gamma log p(. | prefix, y) + (1 - gamma) log p(. | prefix, null)) over
``sample_ids``, FUDGE from log_softmax(log p(. | prefix) + gamma log p_phi(y | prefix +
candidate)) with every drawable id a candidate (``NoisyClassifierGuide.next_token_scores``),
both before temperature / top-p. The "ramp" schedule sets gamma (i + 1) / L at position i. A
recurrent model keeps one state per network call (CFG: the class's and the null label's).
A next-token draw has no staying outcome, so the two guidance forms (``genodiff.guidance``)
are one law here: either is accepted (default: the kind's), and the samples record it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor, nn

from genodiff.backbones.capabilities import capabilities_of
from genodiff.conditioning import network_kwargs
from genodiff.guidance import Guide
from genodiff.randomness.noise import Noise
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
    noise: Noise,
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
    guide = Guide(request.guidance, model, None, "the AR sampler")
    calls = [network_kwargs(labels) for labels in guide.calls(n, device)]  # one per part
    recurrent = capabilities_of(model).recurrent_step
    if recurrent:
        caches = [model.allocate_inference_cache(n) for _ in calls]

        def step(ids: Tensor) -> list[Tensor]:  # (n, V) next-token logits per call
            pairs = zip(caches, calls, strict=True)
            return [model.step(ids, cache, **call) for cache, call in pairs]

        logits = step(x[:, :1] if led else bos)
    for i in request.reporting(range(int(led), length), length - int(led)):
        if not given[:, i].all():
            if not recurrent:
                context = x[:, :i] if led else torch.cat([bos, x[:, :i]], dim=1)
                logits = [model(context, **call)[:, -1] for call in calls]  # (n, V) each
            guided = (guide, x[:, int(led) : i], (i + 1) / length)
            draw = next_token(objective.sample_ids, logits, request, noise, *guided)
            x[:, i] = torch.where(given[:, i], x[:, i], draw)
        if recurrent and i < length - 1:  # the distributions of x_{i+2}
            logits = step(x[:, i])
    return x


def next_token(
    sample_ids: Sequence[int],
    logits: list[Tensor],
    request: SampleRequest,
    noise: Noise,
    guide: Guide,
    prefix: Tensor,
    progress: float,
) -> Tensor:
    """One id per row from next-token logits (n, V) (one tensor per network call of
    ``guide``), renormalised over ``sample_ids``; ``prefix`` (n, i) is what the model read,
    [BOS] excluded (for a FUDGE classifier), ``progress`` (i + 1) / L (for gamma's ramp)."""
    drawable = torch.tensor(sample_ids, device=logits[0].device)
    parts = [each.float().log_softmax(dim=-1)[:, drawable] for each in logits]  # (n, K) each
    if guide.classifier is not None:
        scores = guide.classifier.next_token_scores(prefix, drawable, guide.label)  # (n, K)
        parts.append(scores.to(parts[0]))
    log_p = guide.combine(torch.stack(parts, dim=-2), torch.tensor(progress))  # (n, K)
    probs = sharpen(log_p, request.temperature, request.top_p)  # (n, K) float64
    return drawable[sample_categorical(probs, u=noise.uniform(len(probs), 1))]  # (n,)

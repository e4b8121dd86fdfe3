"""Autoregressive (AR) next-token prediction: the exact-likelihood baseline of the MDLM paper.

A window x = (x_1, ..., x_L) is scored token by token under a causal backbone fed
[BOS] x_1 ... x_{L-1}:

    -log p(x) = - sum_{i=1..L, x_i != [PAD]} log softmax(f([BOS] x_{<L}))_i[x_i],

so all L tokens are scored, the same tokens a diffusion model scores (N bases, stored as
[PAD], are skipped as targets but still read as context). The softmax runs over the model's
whole (padded) vocabulary, the same convention as the diffusion objectives, so the NLL is
exact and its perplexity compares with their bounds.

Sampling draws one token at a time, restricted to the tokenizer's ``sample_ids`` (DNA:
A/C/G/T); see ``genodiff.samplers.autoregressive``.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from genodiff.backbones.capabilities import capabilities_of
from genodiff.batch_shard import BatchShard
from genodiff.conditioning import network_kwargs
from genodiff.errors import InputValueError
from genodiff.objectives.base import Objective
from genodiff.registry import register_objective
from genodiff.samplers.autoregressive import left_to_right
from genodiff.samplers.base import Sampler

# Backbones already probed for causality (weak: a checked model can still be freed).
_CAUSAL_CHECKED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
# A change at the last position may move earlier logits by at most this fraction of the
# change it makes at its own position (float32 FFT round-off in HyenaDNA is ~1e-7).
_CAUSAL_TOLERANCE = 1e-3


def check_causal(model: nn.Module, bos_id: int, token_ids: Sequence[int]) -> None:
    """ValueError if ``model`` does not declare itself causal, or if its earlier logits
    depend on a later token (a bidirectional backbone such as Caduceus, on which next-token
    prediction would read the answer).

    Probe: two 8-token inputs (``bos_id`` then ``token_ids`` in turn) differing only in the
    last token, in eval mode (no dropout) and float32; run once per model instance.
    """
    if model in _CAUSAL_CHECKED:
        return
    if not capabilities_of(model).causal:
        raise InputValueError(
            f"objective 'ar' needs a causal backbone, and {type(model).__name__} does not "
            "declare itself causal (capabilities.causal). Use model=mamba or model=hyena (text: "
            "a causal transformer), or a diffusion objective (objective=mdlm) for "
            "bidirectional models."
        )
    if len(set(token_ids)) < 2:
        raise ValueError(f"the causality probe needs two distinct token ids, got {token_ids}")
    device = next(model.parameters()).device
    body = [token_ids[i % len(token_ids)] for i in range(7)]
    probe = torch.tensor([[bos_id, *body]], device=device)
    altered = probe.clone()
    altered[0, -1] = next(i for i in token_ids if i != body[-1])
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.autocast(device.type, enabled=False):
            before, after = model(probe).float(), model(altered).float()  # (1, 8, V) each
    finally:
        model.train(was_training)
    change = (after - before).abs()  # (1, 8, V)
    leak, own = change[:, :-1].max(), change[:, -1].max()
    if leak > _CAUSAL_TOLERANCE * own:
        raise InputValueError(
            f"objective 'ar' needs a causal backbone, but {type(model).__name__}'s predictions "
            "at earlier positions change with a later token, although it declares itself "
            "causal: next-token prediction would read the token it is asked to predict."
        )
    _CAUSAL_CHECKED.add(model)


@register_objective("ar")
class AR(Objective):
    """Next-token cross-entropy on causal backbones; ``loss`` is the exact NLL.

    ``eval_t_samples`` is accepted so that an experiment written for a diffusion objective
    (``configs/demo.yaml`` sets it) can switch to ``objective=ar``; it has no effect: the loss
    is deterministic, so one pass over a held-out window is exact.
    """

    samplers = {"ancestral": Sampler(left_to_right, takes_steps=False)}  # a call per position
    exact_likelihood = True
    eval_t_samples = 1  # deterministic: no noise to average over
    causal_backbone = True

    def __init__(
        self,
        bos_id: int | None,
        pad_id: int,
        sample_ids: Sequence[int],
        eval_t_samples: int = 1,
    ) -> None:
        if bos_id is None:
            raise InputValueError(
                "objective 'ar' feeds [BOS] before the first token, but the tokenizer has no "
                "BOS id; use a tokenizer with one"
            )
        if not sample_ids:
            raise InputValueError("objective 'ar' needs at least one id to sample (sample_ids)")
        super().__init__()
        self.bos_id = bos_id
        self.pad_id = pad_id
        self.sample_ids = tuple(int(i) for i in sample_ids)

    def shifted(self, input_ids: Tensor) -> Tensor:
        """The model input [BOS] x_1 ... x_{L-1}: (B, L)."""
        bos = input_ids.new_full((input_ids.shape[0], 1), self.bos_id)
        return torch.cat([bos, input_ids[:, :-1]], dim=1)

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NLL summed over its non-[PAD] tokens in nats (B,), their count (B,)).

        ``generator`` and ``shard`` are unused: the loss is deterministic.
        """
        check_causal(model, self.bos_id, self.sample_ids)
        logits = model(self.shifted(input_ids), **network_kwargs(labels)).float()  # (B, L, V)
        log_p = logits.log_softmax(dim=-1)
        nll = -log_p.gather(-1, input_ids[..., None]).squeeze(-1)  # (B, L)
        scored = input_ids != self.pad_id  # (B, L)
        return torch.where(scored, nll, 0.0).sum(dim=-1), scored.sum(dim=-1)

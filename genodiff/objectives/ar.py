"""Autoregressive (AR) next-token prediction: the exact-likelihood baseline of the MDLM paper.

A window x = (x_1, ..., x_L) is scored token by token under a causal backbone, as upstream
MDLM scores its AR baseline:

- a window that starts with [BOS] (text: [CLS] is the tokenizer's BOS) is read as it is and
  x_2 ... x_L are predicted: L - 1 tokens, [BOS] itself is never predicted (upstream's x[1:]);
- any other window (DNA: genome windows start with a base) is read after a [BOS] of the
  objective's own, [BOS] x_1 ... x_{L-1}, and all L tokens are predicted: the same tokens a
  diffusion model scores.

    -log p(x) = - sum over predicted i with x_i != [PAD] of log softmax(f(context))_i[x_i].

N bases, stored as [PAD], are skipped as targets but still read as context. The softmax runs
over the model's whole (padded) vocabulary, the same convention as the diffusion objectives, so
the NLL is exact and its perplexity compares with their bounds (per token: on a [BOS]-led
window the AR scores one token fewer than a diffusion model; ``genodiff eval`` reports the
count and the convention).

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
from genodiff.guidance import GUIDANCE_FORMS
from genodiff.objectives.base import Objective
from genodiff.randomness.noise import Noise
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

    # a network call per position; guided next-token draws have no staying outcome, so the
    # two guidance forms are one
    samplers = {
        "ancestral": Sampler(left_to_right, takes_steps=False, guidance_forms=GUIDANCE_FORMS)
    }
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

    scoring = (
        "exact next-token NLL of every non-[PAD] token; a window that starts with [BOS] is "
        "read as it is and its first token is not predicted (x[1:], upstream MDLM's AR), any "
        "other window is read after a [BOS] and all its tokens are predicted"
    )

    def shifted(self, input_ids: Tensor) -> Tensor:
        """The model input [BOS] x_1 ... x_{L-1}: (B, L)."""
        bos = input_ids.new_full((input_ids.shape[0], 1), self.bos_id)
        return torch.cat([bos, input_ids[:, :-1]], dim=1)

    def read_as_is(self, input_ids: Tensor, as_is: Tensor | None = None) -> Tensor:
        """(B, 1) bool: the rows read as they are (led by [BOS], or ``as_is`` (B,)); their
        position p predicts token p + 1, the other rows' position p token p."""
        led = input_ids[:, :1] == self.bos_id  # (B, 1)
        return led if as_is is None else led | as_is[:, None]

    def inputs_and_targets(
        self, input_ids: Tensor, as_is: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """What the model reads (B, L) and the token each of its positions predicts (B, L;
        [PAD] where nothing is predicted), per window as the module doc says: a window that
        starts with [BOS] is read as it is and predicts x_2 ... x_L then nothing; any other is
        read as [BOS] x_1 ... x_{L-1} and predicts x_1 ... x_L. ``as_is`` (B,) reads the
        rows where it is True as they are whatever their first token (a window that continues
        a longer sequence)."""
        led = self.read_as_is(input_ids, as_is)  # (B, 1)
        padding = input_ids.new_full((input_ids.shape[0], 1), self.pad_id)
        ahead = torch.cat([input_ids[:, 1:], padding], dim=1)  # (B, L)
        inputs = torch.where(led, input_ids, self.shifted(input_ids))
        return inputs, torch.where(led, ahead, input_ids)

    def token_nll(
        self,
        model: nn.Module,
        input_ids: Tensor,
        as_is: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per position of the model's input: the NLL in nats of the token it predicts (B, L)
        and whether that token is scored (B, L; [PAD] and nothing are not); ``as_is`` as in
        ``inputs_and_targets``; ``labels`` (B,) for a class-conditional model."""
        check_causal(model, self.bos_id, self.sample_ids)
        inputs, targets = self.inputs_and_targets(input_ids, as_is)
        log_p = model(inputs, **network_kwargs(labels)).float().log_softmax(dim=-1)  # (B, L, V)
        nll = -log_p.gather(-1, targets[..., None]).squeeze(-1)  # (B, L)
        scored = targets != self.pad_id  # (B, L)
        return torch.where(scored, nll, 0.0), scored

    def loss(
        self,
        model: nn.Module,
        input_ids: Tensor,
        generator: Noise | torch.Generator | None = None,
        shard: BatchShard | None = None,
        labels: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Per sequence: (NLL summed over its predicted non-[PAD] tokens in nats (B,), their
        count (B,)).

        ``generator`` and ``shard`` are unused: the loss is deterministic.
        """
        nll, scored = self.token_nll(model, input_ids, labels=labels)  # (B, L) each
        return nll.sum(dim=-1), scored.sum(dim=-1)

"""The classifier of classifier-based guidance: a backbone, pooling and a linear head over C
classes, of one of two kinds (``KINDS``):

- ``noisy`` (D-CBG, masked diffusion): a bidirectional backbone reads a masked-diffusion state
  z_t ([MASK] at the unrevealed positions) and gives log p(y | z_t) (B, C) from its pooled
  states (pooling as ``genodiff.finetuning.classifier.SequenceClassifier``, whose head and PS
  handling it reuses). It has no time input (as Schiff et al.'s): the masks say how noisy z_t
  is.
- ``causal`` (FUDGE, autoregressive): a causal backbone gives, at every position i, log
  p(y | x_<=i) (B, L, C) from its state there (no pooling), trained on clean sequences with
  the sequence's label at every position.

Either reads ids (B, L) or, for the gradient of the first-order form, one-hot rows (B, L, V)
(``one_hot.embed_one_hot``).
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from genodiff import backbones
from genodiff.backbones.capabilities import capabilities_of
from genodiff.classifiers.one_hot import embed_one_hot
from genodiff.config import ConfigError
from genodiff.finetuning.classifier import SequenceClassifier
from genodiff.tokenizers import Tokenizer

KINDS = ("noisy", "causal")


class GuidanceClassifier(SequenceClassifier):
    """``backbone`` + ``pooling`` (noisy) or per-position scores (causal) + a linear head over
    ``num_classes``, reading ids of ``tokenizer`` (the generator's, or the run's); its [PAD]
    positions are left out of the pooling."""

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        kind: str,
        tokenizer: Tokenizer,
        pooling: str = "mean",
    ) -> None:
        super().__init__(backbone, num_classes, tokenizer, pooling)
        check_kind(kind, backbone)
        self.kind = kind
        self.vocab_size = capabilities_of(backbone).vocab_size

    def forward(self, input_ids: Tensor | None = None, one_hot: Tensor | None = None) -> Tensor:
        """ids (B, L), or one-hot rows (B, L, V) -> float32 log-probabilities: noisy (B, C)
        log p(y | x); causal (B, L, C) log p(y | x_<=i)."""
        if one_hot is None:
            hidden = self.backbone.hidden_states(input_ids)  # (B, L, d) (PS: 2d)
            real = input_ids != self.pad_id  # (B, L)
        else:
            hidden = self.backbone.hidden_states(None, embed_one_hot(self.backbone, one_hot))
            real = one_hot[..., self.pad_id] < 0.5  # (B, L)
        # causal: (B, L, C), a score per position; noisy: (B, C), of the pooled states
        logits = self.score(hidden) if self.kind == "causal" else self.pooled_logits(hidden, real)
        return F.log_softmax(logits.float(), dim=-1)


def check_kind(kind: str, backbone: nn.Module) -> None:
    """ConfigError for an unknown kind, or a backbone whose causality does not fit it."""
    if kind not in KINDS:
        raise ConfigError(f"kind={kind!r}: use one of {', '.join(KINDS)}")
    causal = capabilities_of(backbone).causal
    if kind == "noisy" and causal:
        raise ConfigError(
            f"kind=noisy reads a whole masked-diffusion state, and {type(backbone).__name__} is "
            "causal; use a bidirectional backbone (model=caduceus_tiny, caduceus_ph, caduceus_ps)"
        )
    if kind == "causal" and not causal:
        raise ConfigError(
            f"kind=causal scores every prefix, and {type(backbone).__name__} is bidirectional; "
            "use a causal backbone (model=mamba or model=hyena)"
        )


def build_classifier(
    model_config: dict[str, Any], num_classes: int, kind: str, tokenizer: Tokenizer, pooling: str
) -> GuidanceClassifier:
    """A classifier on a new backbone built from a completed ``model`` section (``tokenizer``'s
    fields filled in), reading ids of ``tokenizer``."""
    return GuidanceClassifier(
        backbones.build(**model_config), num_classes, kind, tokenizer, pooling
    )

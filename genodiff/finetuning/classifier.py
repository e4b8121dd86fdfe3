"""A sequence classifier on a language-model backbone's last hidden states.

logits(x) = W pool(h(x)) + b, with h = ``backbone.hidden_states`` (B, L, d) and pooling over the
real (non-``[PAD]``) positions only:

- mean: sum_i m_i h_i / sum_i m_i, with m_i = 1 for real tokens;
- max: max over real positions, per channel;
- first / last: h at the first / last real position.

Reverse complement (RC). With left padding, rc(x) reverses and complements the bases and keeps
the padding on the left (``rc_left_padded``), so rc(rc(x)) = x. Conjoining averages the logits
of x and rc(x): (f(x) + f(rc(x))) / 2, which is invariant under x -> rc(x).

PS (RC-equivariant Caduceus, ``rcps=True``): h(x) has 2d channels [a(x), b(x)] and equivariance
gives flip_{seq,chan}(b(x)) = a(rc(x)), the forward stream of rc(x) (with rc(x)'s padding on
the right). As in Caduceus' CaduceusForSequenceClassification, both streams are pooled and
scored by the same head and the logits averaged, so a PS classifier is invariant under
reverse-complementing its whole input tensor (pads included, which moves left padding to the
right); for unpadded sequences that is rc(x), and the conjoin flags are not needed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from genodiff import backbones
from genodiff.backbones.capabilities import capabilities_of
from genodiff.checkpoints import load_model, load_pretrained
from genodiff.checkpoints.folders import CONFIG_FILE
from genodiff.checkpoints.load import RUN_FILES
from genodiff.config import with_tokenizer_fields
from genodiff.domains import DNADomain
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.hub import resolve
from genodiff.registry import get
from genodiff.tokenizers import Tokenizer, load_tokenizer
from genodiff.training.optim import copy_settings, follow_the_optimizer_lr

PRETRAINED_KINDS = (
    "give a genodiff training checkpoint (.ckpt), a Hugging-Face-format folder, a Hub id, or "
    "null to train from scratch"
)


def load_backbone(pretrained: str) -> tuple[nn.Module, Tokenizer | None]:
    """The backbone to fine-tune and the tokenizer it was trained with: the EMA backbone of a
    ``genodiff train`` checkpoint (``PATH.ckpt``, a run's folder) and its tokenizer, a
    Hugging-Face-format folder (``DIR``, e.g. from ``genodiff export``) and its tokenizer.json
    (None without one), or a Hub id ``org/name[@revision]`` of a repository holding either.
    Returned trainable, on the CPU, every parameter at the sweep point's learning rate
    (``follow_the_optimizer_lr``: a learning rate in the backbone's config, HyenaDNA's
    ``layer.lr``, was its pre-training's; upstream's fine-tuning configs give the layer the
    fine-tuning's, ``lr: ${optimizer.lr}``). The Genomic Benchmarks are DNA: a checkpoint with
    another tokenizer (text) is refused."""
    try:
        path = resolve(pretrained, RUN_FILES)
    except FileNotFoundError as err:
        raise InputFileNotFoundError(f"pretrained={err}; {PRETRAINED_KINDS}") from None
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        tokenizer = load_tokenizer(path)
        _check_dna(tokenizer, pretrained)
        backbone = load_pretrained(path)
    else:
        try:
            model = load_model(path)
        except InputFileNotFoundError as err:
            if not path.is_dir():
                raise
            raise InputFileNotFoundError(  # a folder of neither kind
                f"pretrained={err}, nor {CONFIG_FILE} (a Hugging-Face-format folder); "
                + PRETRAINED_KINDS
            ) from None
        tokenizer = model.tokenizer
        _check_dna(tokenizer, pretrained)
        backbone = copy_settings(model.backbone, model.eval_backbone)  # the EMA copy's
    follow_the_optimizer_lr(backbone)
    return backbone.requires_grad_(True).train(), tokenizer  # EMA copies are frozen


def build_backbone(model_cfg: dict[str, Any] | None, tokenizer: Tokenizer) -> nn.Module:
    """The backbone ``model_cfg`` describes, new (``pretrained=null``), for ``tokenizer``'s
    ids and sizes; trainable, on the CPU."""
    if not model_cfg:
        raise InputValueError("pretrained=null needs a model config (e.g. model=caduceus_tiny)")
    cls = get("backbone", model_cfg["name"])
    return backbones.build(**with_tokenizer_fields("model", cls, model_cfg, tokenizer))


def _check_dna(tokenizer: Tokenizer | None, source: str) -> None:
    if tokenizer is not None and tokenizer.domain != DNADomain.name:  # the benchmarks are DNA
        raise InputValueError(
            f"pretrained={source} was trained on {tokenizer.domain} ({tokenizer.name} tokenizer); "
            "fine-tuning on DNA benchmarks needs a DNA checkpoint"
        )


def rc_left_padded(input_ids: torch.Tensor, pad_id: int, complement: torch.Tensor) -> torch.Tensor:
    """Reverse complement of left-padded ids, padding kept on the left. (B, L) -> (B, L).

    Row with n pads: out[j] = complement[x[(L - 1 + n - j) mod L]]; for j < n the index falls on
    a pad (mapped to itself), for j >= n it reads the bases backwards.
    """
    batch, length = input_ids.shape
    n_pad = (input_ids == pad_id).sum(dim=1, keepdim=True)  # (B, 1)
    j = torch.arange(length, device=input_ids.device).expand(batch, length)  # (B, L)
    source = (length - 1 + n_pad - j) % length
    return complement.to(input_ids.device)[input_ids.gather(1, source)]


def pool(hidden: torch.Tensor, real: torch.Tensor, how: str) -> torch.Tensor:
    """(B, L, d) hidden states, (B, L) bool mask of real tokens -> (B, d); ``how`` is one of
    mean | max | first | last (the config schema rejects anything else)."""
    mask = real.unsqueeze(-1)  # (B, L, 1)
    if how == "mean":
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1)
    if how == "max":
        return hidden.masked_fill(~mask, float("-inf")).amax(dim=1)
    length = hidden.shape[1]
    first = real.int().argmax(dim=1)  # (B,) first True
    index = first if how == "first" else length - 1 - real.flip(1).int().argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]


class SequenceClassifier(nn.Module):
    """``backbone`` + pooling + a linear head over ``num_classes``; see the module docstring.
    ``tokenizer``: the one its inputs are encoded with, kept as ``tokenizer`` (its [PAD] id;
    its complement map for the reverse complement, which a vocabulary without one lacks)."""

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        tokenizer: Tokenizer,
        pooling: str = "mean",
        conjoin_train: bool = False,
        conjoin_eval: bool = False,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.pooling = pooling
        self.conjoin_train, self.conjoin_eval = conjoin_train, conjoin_eval
        capabilities = capabilities_of(backbone)
        if capabilities.hidden_size is None:
            raise InputValueError(
                f"{type(backbone).__name__} does not declare its hidden width "
                "(capabilities.hidden_size), which the classification head needs"
            )
        self.rcps = capabilities.rc_equivariant
        # PS states are cat[forward, rc stream]: the head reads d_model channels of each
        self.d_model = capabilities.hidden_size // 2 if self.rcps else capabilities.hidden_size
        self.score = nn.Linear(self.d_model, num_classes)
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_id
        complement = tokenizer.complement_map  # None: a vocabulary without reverse complements
        if complement is None and (conjoin_train or conjoin_eval):
            raise InputValueError(
                f"classifier.conjoin_train / conjoin_eval average over reverse complements, "
                f"which the {tokenizer.name} tokenizer has none of; set them to false"
            )
        complement = None if complement is None else torch.tensor(complement)
        self.register_buffer("complement", complement, persistent=False)

    def rc(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Reverse complement of left-padded ids (B, L), padding kept on the left."""
        if self.complement is None:
            raise InputValueError(
                f"the {self.tokenizer.name} tokenizer has no complement map, so its sequences "
                "have no reverse complement (classifier.rc_aug needs one)"
            )
        return rc_left_padded(input_ids, self.pad_id, self.complement)

    def _logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) ids -> (B, C) logits, no conjoining."""
        hidden = self.backbone.hidden_states(input_ids)  # (B, L, d) or (B, L, 2d) for PS
        return self.pooled_logits(hidden, input_ids != self.pad_id)

    def pooled_logits(self, hidden: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """(B, L, d) hidden states ((B, L, 2d) for PS), (B, L) bool mask of real tokens ->
        (B, C) logits of the pooled states (both strands' for PS, averaged)."""
        if not self.rcps:
            return self.score(pool(hidden, real, self.pooling))
        d = self.d_model
        forward = pool(hidden[..., :d], real, self.pooling)  # (B, d)
        # the RC stream in rc(x) coordinates: padding at the right end
        reverse = pool(hidden[..., d:].flip(1, 2), real.flip(1), self.pooling)  # (B, d)
        return (self.score(forward) + self.score(reverse)) / 2

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) left-padded ids -> (B, C) float32 logits."""
        conjoin = self.conjoin_train if self.training else self.conjoin_eval
        logits = self._logits(input_ids)
        if conjoin and not self.rcps:
            logits = (logits + self._logits(self.rc(input_ids))) / 2
        return logits.float()

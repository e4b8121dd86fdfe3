"""Class labels: one network for p(x | y) and p(x) (docs/architecture.md §3.4, §3.5).

A conditional run's classes are ``config["conditioning"]["labels"]`` (names, in label-id order:
class ``i`` is ``labels[i]``); its backbone is built with ``num_classes`` = C and holds a label
embedding of C + 1 rows, the last one the **null label** (``null_label(C)``), which stands for
"no class": p(x). During training each sequence's label is replaced by the null label with
probability ``cond_dropout`` (``drop_labels``), so the same weights learn both; held-out NELBOs
are reported with the true label and with the null label.

The seams the objectives and backbones share:

- ``Objective.loss(..., labels=None)`` passes ``labels`` (B,) to every network call through
  ``network_kwargs`` (nothing at all for an unconditional run, so backbones without the
  capability keep their old call);
- a backbone that declares ``capabilities.class_conditioning`` takes ``labels`` (B,) in
  ``forward``; None there means the null label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from genodiff import syncs
from genodiff.batch_shard import BatchShard, shard_rows
from genodiff.config_values import ConfigError

#: The default probability of replacing a label by the null label during training.
DEFAULT_COND_DROPOUT = 0.1


def null_label(num_classes: int) -> int:
    """The id of the null label ("no class") of a model with ``num_classes`` classes: the last
    row of its label embedding."""
    return num_classes


def network_kwargs(labels: Tensor | None) -> dict[str, Tensor]:
    """The keyword arguments that give a backbone ``labels`` (B,): none when unconditional."""
    return {} if labels is None else {"labels": labels}


@dataclass
class ConditioningConfig:
    """The ``conditioning:`` section of a run. ``labels`` are the class names, in label-id
    order; ``genodiff train`` takes them from a labelled data module (``data.name=labelled``),
    and a run without them is unconditional. ``cond_dropout`` is the probability, in training
    only, that a sequence's label is replaced by the null label (so the same network learns
    p(x))."""

    config_ranges: ClassVar[dict[str, str]] = {
        "cond_dropout": "[0, 1]; 0 never trains the null label (no p(x))"
    }

    labels: list[str] | None = None
    cond_dropout: float = DEFAULT_COND_DROPOUT


def class_names(config: dict[str, Any]) -> list[str] | None:
    """The class names of a run's (saved or composed) config; None for an unconditional run
    (and for runs saved before conditioning existed)."""
    labels = (config.get("conditioning") or {}).get("labels")
    return list(labels) if labels else None


def drop_labels(
    labels: Tensor,
    probability: float,
    num_classes: int,
    generator: torch.Generator | None = None,
    shard: BatchShard | None = None,
) -> Tensor:
    """``labels`` (B,) with each replaced by the null label with ``probability``. The coins are
    drawn for the whole global batch (``shard``) from ``generator``, as the objectives draw
    their noise, so data-parallel and resumed runs drop the same labels as one process."""
    total, rows = shard_rows(shard, labels.shape[0])
    coins = torch.rand(total, device=labels.device, generator=generator)[rows]  # (B,)
    return torch.where(coins < probability, null_label(num_classes), labels)


def null_labels(batch: int, num_classes: int, device: torch.device) -> Tensor:
    """(batch,) null labels: what p(x) is scored with."""
    return torch.full((batch,), null_label(num_classes), dtype=torch.long, device=device)


class LabelEmbedding(nn.Module):
    """labels (B,) in [0, C] (C = the null label) -> vectors (B, dim); None -> the null label's.

    Stored as ``embedding.weight`` (C + 1, dim); the DNA backbones' weight initialisation
    draws it N(0, 0.02) like their token embeddings (the DiT keeps PyTorch's N(0, 1))."""

    def __init__(self, num_classes: int, dim: int) -> None:
        super().__init__()
        if num_classes < 1:
            raise ValueError(f"a label embedding needs at least one class, got {num_classes}")
        self.num_classes = num_classes
        self.embedding = nn.Embedding(num_classes + 1, dim)

    def forward(self, labels: Tensor | None, batch: int) -> Tensor:
        """(B, dim) for ``labels`` (B,), or the null label's vector for each of ``batch`` rows."""
        weight = self.embedding.weight
        if labels is None:
            return weight[null_label(self.num_classes)].expand(batch, -1)
        if labels.shape != (batch,):
            raise ValueError(f"labels must have shape ({batch},), got {tuple(labels.shape)}")
        if labels.numel() and syncs.sync_free_on(labels.device):
            # checked on the device (an error when the kernel runs): no host read, so a
            # sampler's step stays sync-free and a CUDA graph can record this call
            in_range = (labels >= 0).all() & (labels <= self.num_classes).all()
            torch._assert_async(in_range, f"labels must lie in [0, {self.num_classes}]")
        elif labels.numel() and not 0 <= int(labels.min()) <= int(labels.max()) <= self.num_classes:
            raise ValueError(
                f"labels must lie in [0, {self.num_classes}] ({self.num_classes} = the null "
                f"label), got {labels.min().item()}..{labels.max().item()}"
            )
        return self.embedding(labels)


def label_embedding_for(num_classes: int, dim: int) -> LabelEmbedding | None:
    """The label embedding a backbone built with ``num_classes`` holds: None when 0 (an
    unconditional backbone has no new parameter, so its checkpoints are unchanged)."""
    if num_classes < 0:
        raise ValueError(f"num_classes must be >= 0 (0 = unconditional), got {num_classes}")
    return LabelEmbedding(num_classes, dim) if num_classes else None


def add_label(
    hidden: Tensor,
    embedding: LabelEmbedding | None,
    labels: Tensor | None,
    rc_symmetric: bool = False,
) -> Tensor:
    """``hidden`` (B, L, C) plus each row's label vector at every position: how the DNA
    backbones take a label (the AR ones too: the vector joins every token embedding, the
    first position's included, so the first token is drawn given the label).

    ``rc_symmetric`` is for reverse-complement-equivariant states cat[fwd, rc stream]
    (Caduceus-PS, C = 2 d): the vector v (d) enters as cat[v, flip(v)], i.e. v is added to the
    forward strand's channels and to the reverse strand's (which ``rcps.rc_states`` flips), so
    the states of rc(x) with label y stay the reverse complement of those of x with label y.
    ValueError when ``labels`` are given to a backbone built without classes."""
    if embedding is None:
        if labels is not None:
            raise ValueError(
                "labels given to a backbone built without classes (num_classes=0); it does not "
                "declare capabilities.class_conditioning"
            )
        return hidden
    return add_at_every_position(hidden, embedding(labels, hidden.shape[0]), rc_symmetric)


def add_at_every_position(hidden: Tensor, vector: Tensor, rc_symmetric: bool = False) -> Tensor:
    """``hidden`` (B, L, C) plus one vector (B, d) per row at every position: how a DNA
    backbone takes what conditions a whole sequence (a class label here, the noise level in
    ``genodiff.backbones.time_embedding``). With ``rc_symmetric`` (C = 2 d, Caduceus-PS) the
    vector enters as cat[v, flip(v)] so the states stay reverse-complement equivariant."""
    if rc_symmetric:
        vector = torch.cat([vector, vector.flip(-1)], dim=-1)  # (B, 2d)
    return hidden + vector[:, None, :].to(hidden.dtype)


def record_class_names(config: Any, names: list[str]) -> None:
    """Store a labelled data module's class ``names`` in a run's (composed) ``config`` as
    ``conditioning.labels``; ConfigError when the config names other classes."""
    given = config.conditioning.labels
    if given and list(given) != list(names):
        raise ConfigError(
            f"conditioning.labels ({', '.join(map(str, given))}) differs from the data's "
            f"classes ({', '.join(names)}); remove conditioning.labels: it comes from the "
            "labelled data"
        )
    if len(set(names)) != len(names) or len(names) < 1:
        raise ConfigError(
            "the data's class names must be distinct and at least one: "
            + (", ".join(names) or "(none)")
        )
    config.conditioning.labels = list(names)

"""The backbone contract shared by every language-model backbone (docs/architecture.md §3.4)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

from genodiff.backbones.capabilities import Capabilities
from genodiff.backbones.layout import CheckpointLayout
from genodiff.conditioning import network_kwargs
from genodiff.ops.inference import cpu_chunk_rows


class LMBackboneBase(nn.Module, ABC):
    """ids (B, L) -> logits (B, L, V) as ``head(backbone(ids))``.

    Subclasses set ``self.backbone`` (ids or embeddings -> final hidden states) and
    ``self.capabilities`` (what they declare, see ``capabilities.Capabilities``), and implement
    ``head`` (hidden states -> logits over the padded vocabulary).
    """

    backbone: nn.Module
    capabilities: Capabilities
    #: Hugging-Face-style folder layouts this class reads and writes (``layout.py``).
    checkpoint_layouts: tuple[CheckpointLayout, ...] = ()
    #: Allowed ranges of constructor arguments, checked when a config is loaded
    #: (``genodiff.config_values``); merged with a subclass's own table.
    config_ranges: dict[str, str] = {
        "d_model": ">=1",
        "n_layer": ">=1",
        "vocab_size": ">=1",
        "pad_vocab_size_multiple": ">=1",
        "num_classes": ">=0; 0 = unconditional (genodiff train sets it from the labelled data)",
    }

    @abstractmethod
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, L, d) final hidden states -> (B, L, V) logits."""

    def hidden_states(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sigma: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, L) ids, or (B, L, d) embeddings -> final normed hidden states (B, L, d).
        ``labels`` (B,): class labels of a backbone built with ``num_classes`` (None: the null
        label; see ``capabilities.class_conditioning``). ``sigma`` (B,): the noise level, read
        only by a backbone that declares ``capabilities.time_conditioning`` (None: sigma = 0);
        the others ignore it.

        On the CPU inference path a large batch runs in chunks of rows that keep the
        activations in cache (``genodiff.ops.inference.cpu_chunk_rows``)."""
        x = input_ids if inputs_embeds is None else inputs_embeds
        rows = cpu_chunk_rows(x, self.capabilities.hidden_size, self)
        if rows >= x.shape[0]:
            return self.backbone(input_ids, inputs_embeds, **self._conditions(labels, sigma))

        def rows_from(t: torch.Tensor | None, start: int) -> torch.Tensor | None:
            return t if t is None or t.dim() == 0 else t[start : start + rows]

        starts = range(0, x.shape[0], rows)
        return torch.cat(
            [
                self.backbone(
                    rows_from(input_ids, i),
                    rows_from(inputs_embeds, i),
                    **self._conditions(rows_from(labels, i), rows_from(sigma, i)),
                )
                for i in starts
            ]
        )

    def _conditions(
        self, labels: torch.Tensor | None, sigma: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """The keyword arguments of ``self.backbone``: labels when given, sigma when this
        backbone is time-conditioned (the others keep their old call)."""
        kwargs = network_kwargs(labels)
        if self.capabilities.time_conditioning:
            kwargs["sigma"] = sigma
        return kwargs

    def forward(
        self,
        input_ids: torch.Tensor | None,
        sigma: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, L, V) in float32 over the padded vocabulary. ``sigma`` (B,) is the noise
        level the objective gives; a backbone built without time conditioning (the default,
        as in the MDLM paper's DNA runs) ignores it, one built with it (Caduceus
        ``time_conditioning=True``: ``genodiff.backbones.time_embedding``) declares
        ``capabilities.time_conditioning``. ``labels`` (B,) as in ``hidden_states``."""
        return self.head(self.hidden_states(input_ids, inputs_embeds, labels, sigma)).float()

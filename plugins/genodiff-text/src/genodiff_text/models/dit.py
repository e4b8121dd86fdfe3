"""MDLM's diffusion transformer (DiT) for text, as kuleshov-group/mdlm ``models/dit.py``.

ids (B, L) and the noise level sigma (B,) -> logits (B, L, V). sigma conditions every block and
the final layer through adaLN: c = SiLU(sigma_map(sigma)). Built with ``num_classes`` = C > 0
it is class-conditional (genodiff.conditioning) as in Schiff et al.'s guidance DiT: a label
embedding of C + 1 rows (the last the null label) joins the time embedding,
c = SiLU(sigma_map(sigma)) + SiLU(label_embedding(y)). Without time conditioning MDLM feeds
sigma = 0 (it still goes through the timestep embedder), and so does ``forward(ids)`` here.
Parameter names are upstream's; the Lightning checkpoints and the Hugging Face folder
(``kuleshov-group/mdlm-owt``) prefix them with ``backbone.`` (``genodiff_text.layouts``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from genodiff.backbones.capabilities import Capabilities
from genodiff.conditioning import label_embedding_for
from genodiff_text.layouts import MDLM_LAYOUT
from genodiff_text.models.layers import Transformer, at_least_fp32, input_device


class DIT(Transformer):
    """Bidirectional transformer with adaLN time conditioning. Arguments are the fields of the
    upstream Hugging Face config (``model_type: "mdlm"``); ``model_length`` is only recorded.
    ``time_conditioning=False`` makes the model ignore sigma (it conditions on sigma = 0, as
    upstream's folders with ``time_conditioning: false`` are used) and declare so.

    Small (OWT / LM1B): hidden_dim 768, 12 blocks, 12 heads, cond_dim 128; medium: 1024, 24, 16.
    """

    checkpoint_layouts = (MDLM_LAYOUT,)

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int = 768,
        cond_dim: int = 128,
        n_blocks: int = 12,
        n_heads: int = 12,
        dropout: float = 0.1,
        model_length: int = 1024,
        time_conditioning: bool = True,
        num_classes: int = 0,
    ) -> None:
        super().__init__(vocab_size, hidden_dim, n_blocks, n_heads, dropout, cond_dim, causal=False)
        self.model_length = model_length
        self.time_conditioning = time_conditioning
        self.capabilities = Capabilities(
            vocab_size=vocab_size,
            hidden_size=hidden_dim,
            time_conditioning=time_conditioning,
            class_conditioning=num_classes > 0,
        )
        self.label_embedding = label_embedding_for(num_classes, cond_dim)

    def conditioning(
        self,
        sigma: Tensor | None,
        batch_size: int,
        device: torch.device,
        labels: Tensor | None = None,
    ) -> Tensor:
        """c = SiLU(sigma_map(sigma)) [+ SiLU(label_embedding(labels))]: (B, cond_dim); sigma =
        0 when None or not time-conditioned; labels None = the null label (class-conditional
        model). sigma may be (B,), (B, 1) or a scalar. Computed in the weights' dtype even
        under autocast, as upstream computes c outside its bf16 region."""
        if sigma is None or not self.time_conditioning:
            sigma = torch.zeros(batch_size, device=device)
        sigma = sigma.reshape(-1).expand(batch_size)  # (B,)
        with torch.autocast(device.type, enabled=False):
            c = F.silu(self.sigma_map(sigma))  # (B, cond)
            if self.label_embedding is None:
                if labels is not None:
                    raise ValueError("labels given to a DIT built without classes (num_classes=0)")
                return c
            return c + F.silu(self.label_embedding(labels, batch_size)).to(c.dtype)

    def forward(
        self,
        input_ids: Tensor | None,
        sigma: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> Tensor:
        """Logits (B, L, V), float32 (float64 for a float64 model); ``labels`` (B,) for a
        class-conditional model (None: the null label)."""
        device = input_device(input_ids, inputs_embeds)
        with self.autocast(device):
            hidden = self._hidden(input_ids, sigma, inputs_embeds, labels)  # (B, L, D)
            logits = self.output_layer.linear(hidden)  # (B, L, V)
        return at_least_fp32(logits)

    def hidden_states(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> Tensor:
        """(B, L, D): what the output linear reads (norm_final, modulated at sigma = 0)."""
        with self.autocast(input_device(input_ids, inputs_embeds)):
            return self._hidden(input_ids, None, inputs_embeds, labels)

    def _hidden(
        self,
        input_ids: Tensor | None,
        sigma: Tensor | None,
        inputs_embeds: Tensor | None,
        labels: Tensor | None,
    ) -> Tensor:
        source = input_ids if inputs_embeds is None else inputs_embeds
        c = self.conditioning(sigma, source.shape[0], source.device, labels)  # (B, cond)
        return self.final_hidden(input_ids, inputs_embeds, c)

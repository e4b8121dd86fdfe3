"""MDLM's autoregressive baseline for text, as kuleshov-group/mdlm ``models/autoregressive.py``:
the DiT's blocks with causal attention and no time conditioning (no ``sigma_map``, no
``adaLN_modulation``).

Like upstream it returns log-probabilities: the mask token's column (``mask_index``) is set to
-1000 before the log-softmax, so the model never predicts [MASK]. ``step`` decodes one token at a
time with a key/value cache: sampling L tokens costs L block evaluations, not L^2 / 2.
"""

from __future__ import annotations

import torch
from torch import Tensor

from genodiff.backbones.capabilities import Capabilities
from genodiff.errors import InputValueError
from genodiff_text.layouts import MDLM_AR_LAYOUT
from genodiff_text.models.layers import (
    KV_CACHE_START,
    KVCache,
    Transformer,
    at_least_fp32,
    input_device,
)

MASK_LOGIT = -1000.0  # upstream's value for the mask column, before the log-softmax

InferenceCache = list[KVCache]  # one per block


class ARTransformer(Transformer):
    """Causal transformer LM. Arguments are the fields of the ``mdlm_ar`` folder layout (the
    upstream model config; ``model_length`` is only recorded). ``mask_index``: the column forced
    to -1000 (None: no column is forced).

    Small: hidden_dim 768, 12 blocks, 12 heads.
    """

    checkpoint_layouts = (MDLM_AR_LAYOUT,)

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int = 768,
        n_blocks: int = 12,
        n_heads: int = 12,
        dropout: float = 0.1,
        model_length: int = 1024,
        mask_index: int | None = None,
    ) -> None:
        super().__init__(vocab_size, hidden_dim, n_blocks, n_heads, dropout, None, causal=True)
        if mask_index is not None and not 0 <= mask_index < vocab_size:
            raise InputValueError(
                f"mask_index={mask_index} is outside the vocabulary ({vocab_size})"
            )
        self.model_length = model_length
        self.mask_index = mask_index
        self.capabilities = Capabilities(
            vocab_size=vocab_size, hidden_size=hidden_dim, causal=True, recurrent_step=True
        )

    def log_probs(self, logits: Tensor) -> Tensor:
        """(..., V) logits -> log-probabilities, float32 at least, the mask column at -1000
        before the log-softmax."""
        logits = at_least_fp32(logits)
        if self.mask_index is not None:
            logits = logits.index_fill(
                -1, torch.tensor(self.mask_index, device=logits.device), MASK_LOGIT
            )
        return logits.log_softmax(dim=-1)

    def forward(
        self,
        input_ids: Tensor | None,
        sigma: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
    ) -> Tensor:
        """Next-token log-probabilities (B, L, V): position i depends on tokens <= i only.
        ``sigma`` is accepted for the backbone contract and ignored."""
        with self.autocast(input_device(input_ids, inputs_embeds)):
            hidden = self.final_hidden(input_ids, inputs_embeds)  # (B, L, D), normed
            logits = self.output_layer.linear(hidden)  # (B, L, V)
        return self.log_probs(logits)

    def hidden_states(
        self, input_ids: Tensor | None, inputs_embeds: Tensor | None = None
    ) -> Tensor:
        """(B, L, D): the final normed hidden states (what the output linear reads)."""
        with self.autocast(input_device(input_ids, inputs_embeds)):
            return self.final_hidden(input_ids, inputs_embeds)

    def allocate_inference_cache(
        self, batch_size: int, max_length: int = KV_CACHE_START
    ) -> InferenceCache:
        """An empty key/value cache per block for ``batch_size`` sequences; ``max_length`` is
        the room reserved at first (it doubles whenever it runs out)."""
        return [KVCache(batch_size, max_length) for _ in self.blocks]

    def step(self, input_ids: Tensor, cache: InferenceCache) -> Tensor:
        """Feed one token per sequence, ids (n,) or (n, 1): float32 log-probabilities (n, V)
        of the next token. ``cache`` advances in place by one position."""
        ids = input_ids.reshape(-1, 1)  # (n, 1)
        with self.autocast(ids.device):
            hidden = self.final_hidden(ids, kv_caches=cache)  # (n, 1, D), normed
            logits = self.output_layer.linear(hidden)  # (n, 1, V)
        return self.log_probs(logits[:, 0])

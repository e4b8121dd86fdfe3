"""What ``genodiff gen-ppl`` scores samples with: a causal model that gives each token of a
window of ids its NLL given the tokens before it.

``SampleScorer`` is the contract. ``genodiff.generative_perplexity.score_samples`` encodes the
samples with a scorer, cuts them into sliding windows, batches the windows and sums each
sample's NLL in float64; a scorer only encodes a text and scores a batch of windows. The core's
own scorer is an AR checkpoint (``CheckpointScorer``). Plugins add scorers by name in the
entry-point group ``genodiff.scorers`` (``registered_scorer(NAME)``), each a ``SampleScorer``
subclass that declares its ``default_model`` and a one-line ``description`` and is built as
``cls(model, device)``: ``genodiff gen-ppl SAMPLES --scorer NAME [--scorer-model MODEL]`` builds
one with MODEL, or its default model. The text plugin's ``hf``, for example, scores text with a
Hugging Face causal LM (by default GPT-2 large, the MDLM paper's Gen PPL scorer).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from genodiff import registry
from genodiff.errors import InputKeyError, InputValueError


class SampleScorer(ABC):
    """A causal model that scores windows of token ids, and the encoding it reads samples in.

    Subclasses set the instance attributes below in their constructor; a scorer registered by
    name also declares the class attributes ``default_model`` and ``description``."""

    #: What the result names as its checkpoint (a path, a Hub id) and as its objective.
    name: str
    objective: str
    #: Which tokens are scored and how (the convention), reported as the result's ``scoring``.
    scoring: str
    #: The domain of the samples it scores, None for any: a sample file in the format of
    #: another domain is refused.
    domain: str | None
    #: The id that windows of a batch are right-padded with (never scored).
    pad_id: int
    #: The window when none is given (tokens).
    default_max_length: int
    device: torch.device
    #: The model (a name, a path) it scores with when none is given; None: one must be given.
    default_model: ClassVar[str | None] = None
    #: What it scores with, in one line (for help and messages).
    description: ClassVar[str]
    #: Whether a window that does not overlap the one before it (``stride`` = the window) can
    #: be scored from its first token: the AR objective reads it after its [BOS]. A scorer
    #: that cannot needs a stride below the window, so that every window after the first
    #: starts with context.
    scores_windows_afresh: ClassVar[bool] = True

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """The ids of one sample, as they are scored (InputValueError for a text it cannot
        encode)."""

    def mark_context_only(self, ids: np.ndarray) -> tuple[np.ndarray, int]:
        """``ids`` (n,) with the tokens that are read as context but never scored marked as
        ``window_nll`` expects, and their number; by default every token is scored."""
        return ids, 0

    @abstractmethod
    def window_nll(
        self, ids: Tensor, lengths: Tensor, continues: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Score a batch of windows: ``ids`` (B, W) right-padded with ``pad_id`` to ``lengths``
        (B,); ``continues`` (B,) is True for a window that carries on a sample (its first
        tokens are the previous window's context). Per model position: the NLL in nats of the
        token it predicts (B, W), whether that token is scored (B, W), and that token's index
        in the window (B, W)."""


def registered_scorer(name: str) -> type[SampleScorer]:
    """The scorer class a plugin registers as ``name`` (entry-point group ``genodiff.scorers``);
    InputKeyError listing the registered ones, with their descriptions, otherwise."""
    try:
        return registry.get("scorer", name)
    except InputKeyError:
        scorers = registry.available("scorer")
        known = "; ".join(f"{n} ({cls.description})" for n, cls in sorted(scorers.items()))
        raise InputKeyError(
            f"scorer {name!r}: no such scorer (registered: {known or 'none'}). Scorers come "
            "from plugins, e.g. the text plugin's hf: pip install 'genodiff-text[hub]' (from a "
            "checkout: pip install -e 'plugins/genodiff-text[hub]')",
            parameter="scorer",
        ) from None


class CheckpointScorer(SampleScorer):
    """An AR (exact-likelihood) ``GenerativeModel`` with its EMA weights: samples are encoded
    as training sequences begin (``tokenizer.encode_sample``) and scored by the AR objective
    as it scores a window (``genodiff.objectives.ar``): a window led by [BOS], or one that
    continues a sample, is read as it is; any other after the objective's [BOS]. Tokens the
    checkpoint cannot generate (outside ``tokenizer.sample_ids``, e.g. N in DNA) are read as
    [PAD], context that is never scored."""

    def __init__(self, model: Any, name: str = "(in memory)") -> None:
        objective = model.eval_objective
        config_name = model.config.get("objective", {}).get("name")
        if not objective.exact_likelihood:
            raise InputValueError(
                f"generative perplexity needs an autoregressive (exact-likelihood) checkpoint, "
                f"but {name} was trained with objective "
                f"{config_name or type(objective).__name__!r}, whose likelihood is only a "
                "bound; pass an AR checkpoint (objective=ar), e.g. from "
                "`genodiff train configs/hg38_ar_mamba.yaml`"
            )
        self.model = model
        self.tokenizer = model.tokenizer
        self.name = name
        self.objective = str(config_name or "?")
        self.scoring = objective.scoring
        self.domain = self.tokenizer.domain
        self.pad_id = self.tokenizer.pad_id
        self.default_max_length = int(model.config.get("data", {}).get("max_length", 1024))
        self.device = next(model.eval_backbone.parameters()).device
        model.eval_backbone.eval()
        objective.eval()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode_sample(text)

    def mark_context_only(self, ids: np.ndarray) -> tuple[np.ndarray, int]:
        """Ids outside ``sample_ids`` become [PAD] (read, not scored); a leading [BOS] stays:
        the AR reads it as the start and never predicts it."""
        tokenizer = self.tokenizer
        unscored = ~np.isin(ids, np.asarray(tokenizer.sample_ids, dtype=np.int64))
        keep = np.zeros_like(unscored)
        keep[0] = tokenizer.bos_id is not None and ids[0] == tokenizer.bos_id
        return np.where(unscored & ~keep, self.pad_id, ids), int(unscored.sum())

    def window_nll(
        self, ids: Tensor, lengths: Tensor, continues: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        objective = self.model.eval_objective
        nll, scored = objective.token_nll(self.model.eval_backbone, ids, continues)  # (B, W)
        positions = torch.arange(ids.shape[1], device=ids.device)[None, :]  # (1, W)
        targets_at = positions + objective.read_as_is(ids, continues).long()  # (B, W)
        return nll, scored, targets_at

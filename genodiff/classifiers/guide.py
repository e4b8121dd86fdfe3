"""``ClassifierGuide``: what a sampler asks of a trained guidance classifier (the
``NoisyClassifierGuide`` protocol of ``genodiff.guidance``).

- ``tilt`` (D-CBG, a noisy classifier): for each tilted position l and value v,
  log p(y | z_t with l set to v) - log p(y | z_t). Exact form: one classifier call per (l, v),
  batched (short sequences only: ``EXACT_MAX_LENGTH``). First-order form (Schiff et al.): one
  forward and one backward pass on the one-hot input, g = d log p(y | z_t) / d onehot(z_t), and
  the tilt g[l, v] - g[l, z_t^l], exact for a classifier linear in the one-hot input.
  The state z_t is the generator's: [MASK] tokens (masked diffusion) or letters (UDLM).
- ``next_token_scores`` (FUDGE, a causal classifier): log p(y | prefix + candidate) for every
  candidate next token.

Values a sampler may not draw (the tokenizer's ``sample_ids`` say which it may) get tilt 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from genodiff.classifiers.model import GuidanceClassifier
from genodiff.errors import InputValueError
from genodiff.tokenizers import Tokenizer

#: The longest sequence the exact tilt is computed for: L x (drawable values) classifier calls
#: of length L per sequence and step (1,024 calls of 256 tokens for DNA).
EXACT_MAX_LENGTH = 256
#: Sequences per classifier call of the exact form.
EXACT_BATCH_ROWS = 256


class ClassifierGuide:
    """A trained ``GuidanceClassifier`` (frozen, eval mode) with its ``class_names``, its
    tokenizer's name (``tokenizer_name``), ``kind`` (noisy | causal) and the objective section
    of the generator it was trained for (``generator_objective``; None for a causal one
    trained without a generator) and the window length it trained on (``trained_length``;
    None when unknown)."""

    def __init__(
        self,
        classifier: GuidanceClassifier,
        tokenizer: Tokenizer,
        class_names: list[str],
        generator_objective: dict | None = None,
        source: str = "the classifier",
        trained_length: int | None = None,
    ) -> None:
        self.classifier = classifier.eval().requires_grad_(False)
        self.kind = classifier.kind
        self.class_names = list(class_names)
        self.tokenizer_name = tokenizer.name
        self.generator_objective = generator_objective
        self.source = source
        self.trained_length = trained_length
        drawable = torch.zeros(classifier.vocab_size, dtype=torch.bool)
        drawable[list(tokenizer.sample_ids)] = True
        self.drawable = drawable  # (V,)

    @property
    def device(self) -> torch.device:
        return next(self.classifier.parameters()).device

    # ------------------------------------------------------------------ D-CBG

    def tilt(
        self, x: Tensor, label: int, where: Tensor, exact: bool, t: Tensor | None = None
    ) -> Tensor:
        """x (n, L) ids of z_t, ``where`` (n, L) bool: the positions to tilt -> (n, L, V)
        float32: log p(y=label | x with l set to v) - log p(y=label | x) at the ``where``
        positions and drawable v, 0 elsewhere (exactly, or to first order; module doc).
        The time ``t`` of z_t is not read: the classifier has no time input (it learnt
        p(y | z_t) over the training times; ``genodiff.guidance``, "Time and the
        classifier")."""
        self._require("noisy", "diffusion sampling (D-CBG)")
        self._check_label(label)
        self._follow(x)
        if exact:
            return self._exact_tilt(x, label, where)
        return self._first_order_tilt(x, label, where)

    def _log_p(self, ids: Tensor, label: int) -> Tensor:
        """(B, L) ids -> (B,) log p(y=label | ids)."""
        return self.classifier(ids)[:, label]

    def _exact_tilt(self, x: Tensor, label: int, where: Tensor) -> Tensor:
        n, length = x.shape
        if length > EXACT_MAX_LENGTH:
            raise InputValueError(
                f"the exact classifier guidance makes one classifier call per position and "
                f"value at every step; it is offered up to {EXACT_MAX_LENGTH} tokens, and "
                f"these sequences have {length}: use the classifier form 'first-order'",
                parameter="classifier_form",
            )
        tilt = torch.zeros(n, length, self.classifier.vocab_size, device=x.device)
        values = self.drawable.nonzero().squeeze(1).to(x.device)  # (K,)
        rows, positions = where.nonzero(as_tuple=True)  # (M,) each
        if not len(rows):  # nothing to tilt (a sync-free step after every row is revealed)
            return tilt
        k = len(values)
        # one edited copy of x per (tilted position, value): (M K,) rows, positions, values
        edited_rows = rows.repeat_interleave(k)
        edited_positions = positions.repeat_interleave(k)
        edited_values = values.repeat(len(rows))
        edited = x[edited_rows]  # (M K, L)
        edited[torch.arange(len(edited), device=x.device), edited_positions] = edited_values
        with torch.no_grad():
            base = self._log_p(x, label)  # (n,)
            scores = [self._log_p(chunk, label) for chunk in edited.split(EXACT_BATCH_ROWS)]
        tilt[edited_rows, edited_positions, edited_values] = torch.cat(scores) - base[edited_rows]
        return tilt

    def _first_order_tilt(self, x: Tensor, label: int, where: Tensor) -> Tensor:
        # The sampler may run under no_grad or inference_mode: the gradient needs neither.
        with torch.inference_mode(False), torch.enable_grad():
            one_hot = F.one_hot(x.clone(), self.classifier.vocab_size).float()  # (n, L, V)
            one_hot.requires_grad_(True)
            log_p = self.classifier(one_hot=one_hot)[:, label]  # (n,)
            (gradient,) = torch.autograd.grad(log_p.sum(), one_hot)  # (n, L, V)
        current = gradient.gather(-1, x.clone()[..., None])  # (n, L, 1): g[l, x_l]
        keep = where[..., None] & self.drawable.to(x.device)  # (n, L, V)
        return torch.where(keep, gradient - current, 0.0).detach()

    # ------------------------------------------------------------------ FUDGE

    def next_token_scores(self, prefix: Tensor, candidates: Tensor, label: int) -> Tensor:
        """prefix (n, i) ids, candidates (K,) ids -> (n, K) float32
        log p(y=label | prefix + candidate) from the causal classifier."""
        self._require("causal", "autoregressive sampling (FUDGE)")
        self._check_label(label)
        self._follow(prefix)
        n, k = prefix.shape[0], candidates.shape[0]
        extended = torch.cat(
            [prefix.repeat_interleave(k, dim=0), candidates.repeat(n)[:, None]], dim=1
        )  # (n K, i + 1)
        with torch.no_grad():
            scores = self.classifier(extended)[:, -1, label]  # (n K,)
        return scores.view(n, k)

    # ------------------------------------------------------------------ checks

    def _follow(self, x: Tensor) -> None:
        """Put the classifier on the device of the ids it is to read: the sampler's, which may
        not be the one the guide was loaded on (``load_classifier``'s default CPU beside a
        CUDA model, or a model moved to its worker's device by ``Model.generate_to_file``)."""
        if self.device != x.device:
            self.classifier.to(x.device)

    def _require(self, kind: str, use: str) -> None:
        if self.kind != kind:
            raise InputValueError(
                f"{self.source} is a {self.kind} classifier, and {use} needs a {kind} one "
                f"(train one with genodiff classifier CONFIG kind={kind})",
                parameter="classifier",
            )

    def _check_label(self, label: int) -> None:
        if not 0 <= label < len(self.class_names):
            raise InputValueError(
                f"label {label} is not a class of {self.source}; its classes are "
                + ", ".join(f"{i} {name}" for i, name in enumerate(self.class_names))
            )

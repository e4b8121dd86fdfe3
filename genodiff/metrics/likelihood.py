"""Likelihood of the samples under an autoregressive DNA checkpoint (generative perplexity).

The DNA analogue of the MDLM paper's Gen PPL: an AR model trained on real DNA scores the
samples and, side by side, the reference windows, through
``genodiff.generative_perplexity.generative_perplexity`` (exact NLL, EMA weights, chunks of
the checkpoint's training window). Samples far more likely than real DNA are suspect
(repetitive, low-complexity); far less likely ones do not look like what the AR model learnt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from genodiff.domains import domain_of
from genodiff.errors import InputValueError
from genodiff.generative_perplexity import GenPPLResult, generative_perplexity
from genodiff.progress import Progress

REPORTED = ("gen_ppl", "gen_ppl_se", "nll", "nll_se", "per_sample_ppl_mean", "tokens", "samples")


def _summary(result: GenPPLResult) -> dict[str, Any]:
    return {key: getattr(result, key) for key in REPORTED}


def ar_perplexity(
    samples: Sequence[str],
    reference: Sequence[str],
    checkpoint: str | os.PathLike,
    alphabet: str,
    device: str | None = None,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Gen PPL of ``samples`` and of ``reference`` (sequences of ``alphabet``) under the AR
    checkpoint ``checkpoint``, whose domain must have the same alphabet:
    ``{"checkpoint", "samples": {...}, "reference": {...}}`` (gen_ppl with its SE, NLL in nats
    per base, mean per-sequence perplexity, bases scored, sequences)."""
    from genodiff.checkpoints import load_model
    from genodiff.devices import resolve_device

    model = load_model(checkpoint, resolve_device(device))
    domain = domain_of(model.tokenizer)
    if domain.alphabet != alphabet:  # it scores samples of its own letters
        raise InputValueError(
            f"{checkpoint} is a {domain.name} checkpoint (alphabet {domain.alphabet}); samples "
            f"of the alphabet {alphabet} need an AR checkpoint of their domain (DNA: e.g. from "
            "`genodiff train configs/hg38_ar_mamba.yaml`)"
        )
    scored = {
        name: _summary(
            generative_perplexity(
                seqs, model, batch_size, checkpoint=str(checkpoint), progress=progress
            )
        )
        for name, seqs in (("samples", samples), ("reference", reference))
    }
    return {"checkpoint": str(checkpoint), **scored}

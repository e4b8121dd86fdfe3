"""Unigram and add-one bigram perplexities on the tokens ``genodiff eval`` scores for a text run.

The references a text diffusion model must beat (the genodiff-text acceptance test): both are
fitted on the training split's windows and scored on the test split's windows of the same data
config, with the same tokenizer and windowing (``genodiff.evaluate.heldout_windows``, the
function ``genodiff eval`` uses, so ``--num-windows`` / ``--length`` pick the same windows and
the printed ``windows_sha256`` equals ``genodiff eval``'s). Scored tokens are every non-[PAD]
token of a window, [BOS] / [EOS] included, exactly those the diffusion objectives score. Both
baselines charge a sentence's length (they predict its [SEP]), as a masked objective with
``mask_padding`` does; a bound trained without it is on -log p(x | length) and is flattered
by comparison (the report's ``convention``).

- unigram: p(x) = (c(x) + 1) / (N + V);
- bigram: p(x_i | x_{i-1}) = (c(x_{i-1}, x_i) + 1) / (c(x_{i-1}) + V), where the first token of
  a window has the context "window start" (counted like a token);

with counts c over the training windows' non-[PAD] tokens and V = the number of ids a model may
produce (the tokenizer's ``sample_ids``: every id but [MASK] and [PAD]). Usage:

    python bench/text_baselines.py --checkpoint outputs/text_demo/checkpoints/last.ckpt
    python bench/text_baselines.py --config configs/text_demo.yaml [OVERRIDES ...]
        [--num-windows N] [--length L] [--json]

With ``--config`` the tokenizer is built as ``genodiff train`` builds it (a trained tokenizer is
retrained on the same training split, deterministically).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from genodiff.checkpoints.io import read_checkpoint
from genodiff.data.build import build_datamodule
from genodiff.evaluate import heldout_windows, window_digest
from genodiff.tokenizers import build_tokenizer, tokenizer_from_checkpoint

CHUNK = 8192  # windows per counting step
CONVENTION = (
    "every non-[PAD] token scored, [BOS] and [EOS] included: the length is charged "
    "(compare with a bound trained with objective.mask_padding=true)"
)


def window_rows(dataset: Any, indices: Iterable[int]) -> Iterable[np.ndarray]:
    """(B, L) int64 arrays of the windows ``indices``, CHUNK at a time."""
    indices = list(indices)
    for start in range(0, len(indices), CHUNK):
        chunk = indices[start : start + CHUNK]
        yield torch.stack([dataset[i]["input_ids"] for i in chunk]).numpy().astype(np.int64)


def pairs_of(rows: np.ndarray, pad_id: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(context, token) of every scored (non-[PAD]) position; context ``start`` for the first
    position of a window or after a [PAD]."""
    previous = np.concatenate([np.full((len(rows), 1), start), rows[:, :-1]], axis=1)
    previous[previous == pad_id] = start
    scored = rows != pad_id
    return previous[scored], rows[scored]


class Counts:
    """Unigram and bigram counts over ids < ``size`` (+ the start context ``size``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.unigram = np.zeros(size, dtype=np.int64)
        self.context = np.zeros(size + 1, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.int64)  # sorted pair codes context * size + token
        self.values = np.zeros(0, dtype=np.int64)

    def add(self, contexts: np.ndarray, tokens: np.ndarray) -> None:
        self.unigram += np.bincount(tokens, minlength=self.size)
        self.context += np.bincount(contexts, minlength=self.size + 1)
        codes, counts = np.unique(contexts * self.size + tokens, return_counts=True)
        keys = np.concatenate([self.keys, codes])
        values = np.concatenate([self.values, counts])
        self.keys, inverse = np.unique(keys, return_inverse=True)
        self.values = np.bincount(inverse, weights=values).astype(np.int64)

    def pair_counts(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        codes = contexts * self.size + tokens
        at = np.minimum(np.searchsorted(self.keys, codes), max(len(self.keys) - 1, 0))
        found = self.keys[at] == codes if len(self.keys) else np.zeros(len(codes), bool)
        return np.where(found, self.values[at] if len(self.keys) else 0, 0)


def baselines(config: dict[str, Any], tokenizer: Any, length: int | None, num_windows: int | None):
    """The report (a dict) for data config ``config`` and ``tokenizer``."""
    length = length or config.get("max_length", 128)
    test = heldout_windows(config, tokenizer, None, length, num_windows)
    datamodule = build_datamodule({**config, "max_length": length})
    datamodule.attach_tokenizer(tokenizer)
    datamodule.setup("fit")
    train = datamodule.datasets["train"]

    pad_id, size = tokenizer.pad_id, tokenizer.vocab_size
    V = len(tokenizer.sample_ids)
    counts = Counts(size)
    for rows in window_rows(train, range(len(train))):
        counts.add(*pairs_of(rows, pad_id, size))
    total = int(counts.unigram.sum())

    uni_nll = bi_nll = 0.0
    scored = 0
    for rows in window_rows(test.dataset, test.indices):
        contexts, tokens = pairs_of(rows, pad_id, size)
        uni_nll -= np.log((counts.unigram[tokens] + 1) / (total + V)).sum()
        pair = counts.pair_counts(contexts, tokens)
        bi_nll -= np.log((pair + 1) / (counts.context[contexts] + V)).sum()
        scored += len(tokens)
    if scored == 0:
        raise ValueError("the test windows hold no scored token")

    def model(nll: float) -> dict[str, float]:
        per_token = nll / scored
        return {
            "nll": per_token,
            "bits_per_token": per_token / math.log(2),
            "perplexity": math.exp(per_token),
        }

    return {
        "source": test.source,
        "length": test.dataset.max_length,
        "windows": len(test.indices),
        "tokens": scored,
        "windows_sha256": window_digest(test.dataset, test.indices, test.coordinates()),
        "train_windows": len(train),
        "train_tokens": total,
        "V": V,
        "convention": CONVENTION,
        "unigram_add_one": model(uni_nll),
        "bigram_add_one": model(bi_nll),
    }


def from_checkpoint(path: str) -> tuple[dict[str, Any], Any]:
    checkpoint = read_checkpoint(path)  # CRC-checked, weights_only
    config = checkpoint["hyper_parameters"]["config"]
    return config["data"], tokenizer_from_checkpoint(checkpoint)


def from_config(path: str, overrides: list[str]) -> tuple[dict[str, Any], Any]:
    from omegaconf import OmegaConf

    from genodiff.config import load_config

    cfg = load_config(path, overrides)
    data = OmegaConf.to_container(cfg.data, resolve=True)
    datamodule = build_datamodule(data)
    datamodule.check_files()
    section = OmegaConf.to_container(cfg.tokenizer, resolve=True)
    return data, build_tokenizer(section, corpus=datamodule.training_texts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a genodiff train checkpoint (.ckpt) of a text run")
    source.add_argument("--config", help="a training config (the tokenizer is built from it)")
    parser.add_argument("overrides", nargs="*", help="config overrides (with --config)")
    parser.add_argument("--num-windows", type=int, default=None, help="as genodiff eval")
    parser.add_argument("--length", type=int, default=None, help="as genodiff eval")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.checkpoint and args.overrides:
        parser.error("overrides apply to --config only")
    data, tokenizer = (
        from_checkpoint(args.checkpoint)
        if args.checkpoint
        else from_config(args.config, args.overrides)
    )
    report = baselines(data, tokenizer, args.length, args.num_windows)
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{report['windows']} test windows x {report['length']} tokens of {report['source']}: "
        f"{report['tokens']} scored tokens (sha256 {report['windows_sha256'][:16]}); fitted on "
        f"{report['train_tokens']} tokens of {report['train_windows']} train windows; V = "
        f"{report['V']}"
    )
    for name in ("unigram_add_one", "bigram_add_one"):
        r = report[name]
        print(
            f"{name:<16} {r['nll']:.4f} nats/token  {r['bits_per_token']:.4f} bits/token  "
            f"perplexity {r['perplexity']:.2f}"
        )


if __name__ == "__main__":
    main()

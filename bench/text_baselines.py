"""Unigram and add-one bigram NLLs on the tokens ``genodiff eval`` scores for a text run.

The references a text diffusion model must beat (the genodiff-text acceptance test): both are
fitted on the training split's windows and scored on the test split's windows of the same data
config, with the same tokenizer and windowing (``genodiff.evaluate.heldout_windows``, the
function ``genodiff eval`` uses, so ``--num-windows`` / ``--length`` pick the same windows and
the printed ``windows_sha256`` equals ``genodiff eval``'s), on exactly the tokens the run's
objective scores (``objective.padding``, ``genodiff.processes.masked``):

- ``bound`` (the text demo): every token of a window, [PAD] included. Both baselines and the
  diffusion bound are then NLLs of the padded sentence, its length included, over the same
  tokens: the one like-with-like comparison.
- ``upstream`` / ``given``: every non-[PAD] token, [BOS] / [EOS] included. The baselines still
  charge a sentence's length (they predict its [SEP]), but the model's number leaves the [PAD]
  terms out (``upstream``: not a bound) or is given the length (``given``: a bound on
  -log p(x | length)), so it is flattered by the comparison (the report's ``convention``).

The models:

- unigram: p(x) = (c(x) + 1) / (N + V);
- bigram: p(x_i | x_{i-1}) = (c(x_{i-1}, x_i) + 1) / (c(x_{i-1}) + V), where the first token of
  a window has the context "window start" (counted like a token), and so does the token after
  a [PAD] when [PAD] is not scored;

with counts c over the training windows' scored tokens and V = the number of ids a model may
produce (the tokenizer's ``sample_ids``: every id but [MASK] and [PAD]; plus [PAD] when it is
scored). ``--eval FILE`` reads the run's ``genodiff eval --json`` output, checks that it scored
the same windows (digest) and the same number of tokens, and prints its NELBO beside the
baselines. Usage:

    CKPT=outputs/text_demo/checkpoints/last.ckpt
    genodiff eval --checkpoint $CKPT --t-samples 4 --json > eval.json
    python bench/text_baselines.py --checkpoint $CKPT --eval eval.json
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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genodiff import registry
from genodiff.checkpoints.load import GENERATOR, open_checkpoint
from genodiff.config import with_tokenizer_fields
from genodiff.data.build import build_datamodule
from genodiff.evaluate import heldout_windows, window_digest
from genodiff.tokenizers import build_tokenizer

CHUNK = 8192  # windows per counting step
# What the baselines score under each objective.padding, and how the run's number compares.
CONVENTIONS = {
    "bound": "every token scored, [PAD] included: the padded sentence's NLL, its length "
    "included, on the same tokens as the run's bound (objective.padding=bound)",
    "upstream": "every non-[PAD] token scored, [BOS] and [EOS] included (the length charged); "
    "the run's number (objective.padding=upstream) leaves the [PAD] terms out: not a bound, "
    "flattered by this comparison",
    "given": "every non-[PAD] token scored, [BOS] and [EOS] included (the length charged); "
    "the run's bound (objective.padding=given) is on -log p(x | length): flattered by this "
    "comparison",
}


def window_rows(dataset: Any, indices: Iterable[int]) -> Iterable[np.ndarray]:
    """(B, L) int64 arrays of the windows ``indices``, CHUNK at a time."""
    indices = list(indices)
    for start in range(0, len(indices), CHUNK):
        chunk = indices[start : start + CHUNK]
        yield torch.stack([dataset[i]["input_ids"] for i in chunk]).numpy().astype(np.int64)


def pairs_of(
    rows: np.ndarray, pad_id: int, start: int, pad_scored: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(context, token) of every scored position: every one when ``pad_scored``, else every
    non-[PAD] one; context ``start`` for the first position of a window, and after a [PAD]
    when [PAD] is not scored."""
    previous = np.concatenate([np.full((len(rows), 1), start), rows[:, :-1]], axis=1)
    if pad_scored:
        return previous.ravel(), rows.ravel()
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


def baselines(
    config: dict[str, Any],
    tokenizer: Any,
    padding: str,
    length: int | None,
    num_windows: int | None,
):
    """The report (a dict) for data config ``config``, ``tokenizer`` and the run's
    ``padding`` convention (which tokens are scored)."""
    length = length or config.get("max_length", 128)
    test = heldout_windows(config, tokenizer, None, length, num_windows)
    datamodule = build_datamodule({**config, "max_length": length})
    datamodule.attach_tokenizer(tokenizer)
    datamodule.setup("fit")
    train = datamodule.datasets["train"]

    pad_id, size, pad_scored = tokenizer.pad_id, tokenizer.vocab_size, padding == "bound"
    V = len(tokenizer.sample_ids) + int(pad_scored)
    counts = Counts(size)
    for rows in window_rows(train, range(len(train))):
        counts.add(*pairs_of(rows, pad_id, size, pad_scored))
    total = int(counts.unigram.sum())

    uni_nll = bi_nll = 0.0
    scored = 0
    for rows in window_rows(test.dataset, test.indices):
        contexts, tokens = pairs_of(rows, pad_id, size, pad_scored)
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
        "padding": padding,
        "convention": CONVENTIONS[padding],
        "unigram_add_one": model(uni_nll),
        "bigram_add_one": model(bi_nll),
    }


def padding_of(objective: dict[str, Any], tokenizer: Any) -> str:
    """The run's ``objective.padding`` (a run saved with ``mask_padding`` translated as it
    loads: ``Objective.from_saved``); "given" for objectives without one (AR)."""
    section = dict(objective)
    cls = registry.get("objective", section.pop("name"))
    section = with_tokenizer_fields("objective", cls, section, tokenizer)
    return cls.from_saved(section).padding


def compare(report: dict[str, Any], path: str) -> dict[str, Any]:
    """The run's ``genodiff eval --json`` result in ``path``, checked to be on the same windows
    and tokens as ``report``; ValueError otherwise."""
    result = json.loads(Path(path).read_text())
    for key in ("windows_sha256", "tokens"):
        if result[key] != report[key]:
            raise ValueError(
                f"{path} scored other {key.replace('_', ' ')} ({result[key]}) than the "
                f"baselines ({report[key]}): evaluate the same run with the same --num-windows "
                "and --length"
            )
    return result


def from_checkpoint(path: str) -> tuple[dict[str, Any], Any, str]:
    stored = open_checkpoint(path, GENERATOR)  # CRC-checked, weights_only, records checked
    config, tokenizer = stored.record, stored.tokenizer
    return config["data"], tokenizer, padding_of(config["objective"], tokenizer)


def from_config(path: str, overrides: list[str]) -> tuple[dict[str, Any], Any, str]:
    from omegaconf import OmegaConf

    from genodiff.config import load_config

    cfg = load_config(path, overrides)
    data = OmegaConf.to_container(cfg.data, resolve=True)
    datamodule = build_datamodule(data)
    datamodule.check_files()
    section = OmegaConf.to_container(cfg.tokenizer, resolve=True)
    tokenizer = build_tokenizer(section, corpus=datamodule.training_texts)
    objective = OmegaConf.to_container(cfg.objective, resolve=True)
    return data, tokenizer, padding_of(objective, tokenizer)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a genodiff train checkpoint (.ckpt) of a text run")
    source.add_argument("--config", help="a training config (the tokenizer is built from it)")
    parser.add_argument("overrides", nargs="*", help="config overrides (with --config)")
    parser.add_argument("--num-windows", type=int, default=None, help="as genodiff eval")
    parser.add_argument("--length", type=int, default=None, help="as genodiff eval")
    parser.add_argument("--eval", help="the run's genodiff eval --json output, put beside")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.checkpoint and args.overrides:
        parser.error("overrides apply to --config only")
    data, tokenizer, padding = (
        from_checkpoint(args.checkpoint)
        if args.checkpoint
        else from_config(args.config, args.overrides)
    )
    report = baselines(data, tokenizer, padding, args.length, args.num_windows)
    if args.eval:
        report["run"] = compare(report, args.eval)
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{report['windows']} test windows x {report['length']} tokens of {report['source']}: "
        f"{report['tokens']} scored tokens (sha256 {report['windows_sha256'][:16]}); fitted on "
        f"{report['train_tokens']} tokens of {report['train_windows']} train windows; V = "
        f"{report['V']}\nscored: {report['convention']}"
    )
    rows = [(name, report[name]["nll"], None) for name in ("unigram_add_one", "bigram_add_one")]
    if "run" in report:
        run = report["run"]
        rows.append((f"{run['objective']} ({run['likelihood']})", run["nelbo"], run["nelbo_se"]))
    for name, nll, se in rows:
        error = f" +- {se:.4f}" if se is not None else ""
        print(
            f"{name:<24} {nll:.4f}{error} nats/token  {nll / math.log(2):.4f} bits/token  "
            f"perplexity {math.exp(nll):.2f}"
        )


if __name__ == "__main__":
    main()

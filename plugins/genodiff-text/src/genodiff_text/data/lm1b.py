"""LM1B (One Billion Word Benchmark, Chelba et al. 2013) as MDLM uses it: the detokenizer and
readers of its two distributions.

- ``source: lm1b``: the Hugging Face ``datasets`` copy (``load_dataset("lm1b")``), splits
  ``train`` and ``test``; needs ``datasets`` (``pip install 'genodiff-text[hub]'``) and the
  hub or a local cache.
- ``source: lm1b_release``: the original release unpacked under ``root``
  (``1-billion-word-language-modeling-benchmark-r13output``)::

      root/training-monolingual.tokenized.shuffled/news.en-000NN-of-00100      (NN = 01..99)
      root/heldout-monolingual.tokenized.shuffled/news.en.heldout-000NN-of-00050 (NN = 00..49)

Splits. Train = every training shard (30,301,028 sentences). Test = every held-out shard
(306,688 sentences): this is the Hugging Face ``lm1b`` test split (its loader globs
``news.en.heldout-*``), on which MDLM reports its LM1B perplexities. Validation = the test
split too, as MDLM (``dataloader.get_dataloaders`` uses ``validation_split = 'test'`` for
lm1b): there is no separate LM1B validation set. Use ``trainer.limit_val_batches`` to validate
on a prefix only.

The text is tokenized PTB-style (``do n't``, ``Mr. Smith 's``, `` , ``); ``lm1b_detokenizer``
undoes most of it exactly as MDLM does before its tokenizer sees the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from genodiff.errors import InputFileNotFoundError

RELEASE_NAME = "1-billion-word-language-modeling-benchmark-r13output"
RELEASE_URL = f"http://www.statmt.org/lm-benchmark/{RELEASE_NAME}.tar.gz"
TRAIN_DIR = "training-monolingual.tokenized.shuffled"
HELDOUT_DIR = "heldout-monolingual.tokenized.shuffled"
TRAIN_GLOB = "news.en-*-of-00100"
HELDOUT_GLOB = "news.en.heldout-*-of-00050"
HF_DATASET = "lm1b"
HF_PARQUET_REVISION = "refs/convert/parquet"
# The Hugging Face dataset's split that serves each genodiff split (valid = test, as MDLM).
HF_SPLITS = {"train": "train", "valid": "test", "test": "test"}


def lm1b_detokenizer(x: str) -> str:
    """MDLM's ``lm1b_detokenizer`` (kuleshov-group/mdlm ``dataloader.py``), rule for rule.

    Undoes the spaces before ``, : ; ? !`` and a sentence-final or word-final ``.``, joins
    ``'s``-like clitics (`` 's`` -> ``'s``; note `` n't`` is left as is, as upstream), the
    insides of ``" ... "``, ``' ... '``, ``( ... )``, ``[ ... ]``, ``/``, ``$``, ``£`` and
    ``http : / /``.
    """
    x = x.replace("http : / / ", "http://")
    x = x.replace("https : / / ", "https://")
    x = re.sub(r" \'(\w+)", r"'\1", x)
    x = re.sub(r" (\w+) \. ", r" \1. ", x)
    x = re.sub(r" (\w+) \.$", r" \1.", x)
    x = x.replace(" ? ", "? ")
    x = re.sub(r" \?$", "?", x)
    x = x.replace(" ! ", "! ")
    x = re.sub(r" \!$", "!", x)
    x = x.replace(" , ", ", ")
    x = x.replace(" : ", ": ")
    x = x.replace(" ; ", "; ")
    x = x.replace(" / ", "/")
    x = re.sub(r"\" ([^\"]+) \"", r'"\1"', x)
    x = re.sub(r"\' ([^\']+) \'", r"'\1'", x)
    x = re.sub(r"\( ([^\(\)]+) \)", r"(\1)", x)
    x = re.sub(r"\[ ([^\[\]]+) \]", r"[\1]", x)
    x = x.replace("$ ", "$")
    x = x.replace("£ ", "£")
    return x


def release_shards(root: str | Path, split: str) -> list[Path]:
    """The release's shard files for ``split`` (train: training shards; valid / test: every
    held-out shard), sorted; FileNotFoundError with the expected layout when missing."""
    root = Path(root).expanduser()
    folder, pattern = (TRAIN_DIR, TRAIN_GLOB) if split == "train" else (HELDOUT_DIR, HELDOUT_GLOB)
    shards = sorted((root / folder).glob(pattern)) if (root / folder).is_dir() else []
    if not shards:
        raise InputFileNotFoundError(
            f"no LM1B {split} shards {root / folder / pattern} (data.root={str(root)!r}). "
            f"data.source=lm1b_release reads the original release: download {RELEASE_URL}, "
            f"unpack it (tar xzf {RELEASE_NAME}.tar.gz) and set data.root to the "
            f"{RELEASE_NAME} folder, which holds {TRAIN_DIR}/ and {HELDOUT_DIR}/"
        )
    return shards


def hf_lm1b_texts(split: str, max_lines: int | None = None) -> Iterator[tuple[str, int, str]]:
    """``(origin, row number from 1, text)`` of the Hugging Face ``lm1b`` dataset's split that
    serves ``split`` (see ``HF_SPLITS``), at most ``max_lines`` rows."""
    hf_split = HF_SPLITS[split]
    dataset = load_hf_lm1b(hf_split)
    if max_lines is not None:
        dataset = dataset.select(range(min(max_lines, len(dataset))))
    origin = f"{HF_DATASET}/{hf_split}"
    row = 0
    for batch in dataset.iter(batch_size=10_000):
        for text in batch["text"]:
            row += 1
            yield origin, row, text


def load_hf_lm1b(hf_split: str):  # -> datasets.Dataset
    """``datasets.load_dataset("lm1b", split=hf_split)``, with an error that says what to do."""
    hint = (
        "Or use the original release (data.source=lm1b_release, data.root=FOLDER; see "
        "genodiff_text/data/lm1b.py), or any text file with one sentence per line "
        "(data.source=file, data.path=FILE)."
    )
    try:
        import datasets
    except ImportError:
        raise InputFileNotFoundError(
            "data.source=lm1b reads the Hugging Face dataset and needs the datasets package: "
            f"pip install 'genodiff-text[hub]'. {hint}"
        ) from None
    try:
        return datasets.load_dataset(HF_DATASET, split=hf_split)
    except Exception as err:
        error = err
    try:  # datasets >= 4 runs no loading script: the hub's Parquet export of the same data
        return datasets.load_dataset(HF_DATASET, split=hf_split, revision=HF_PARQUET_REVISION)
    except Exception:
        first = str(error).splitlines()[0] if str(error) else ""
        raise InputFileNotFoundError(
            f"cannot load the Hugging Face dataset {HF_DATASET!r} (split {hf_split}): "
            f"{type(error).__name__}: {first}. It needs the hub or a local cache "
            f"(HF_DATASETS_CACHE). {hint}"
        ) from None


def check_hf_datasets() -> None:
    """FileNotFoundError when ``datasets`` is missing (the data themselves load in setup)."""
    try:
        import datasets  # noqa: F401
    except ImportError:
        load_hf_lm1b("train")  # raises the explanatory error

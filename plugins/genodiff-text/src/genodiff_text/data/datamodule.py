"""``TextDataModule`` (``data: {name: text}``): sentences of a text file or of LM1B, tokenized
and windowed as MDLM does for LM1B.

Sources (``source``):

- ``file``: ``path``, any UTF-8 text file (plain or gzip) with one sentence per line; default
  the bundled corpus ``genodiff_text/corpus/austen.txt.gz`` (its README.md). Its non-blank
  lines are split by line order: the first ``split_fractions[0]`` train, the next ``[1]``
  valid, the rest test (boundaries rounded down), as the FASTA demo splits its genome by region.
- ``lm1b``: the Hugging Face ``lm1b`` dataset; ``lm1b_release``: the original release under
  ``root``. Their splits are in ``genodiff_text.data.lm1b`` (valid = test = the held-out
  shards, as MDLM).

``max_lines`` caps the sentences read: the first ``max_lines`` of the file before it is split,
or of each LM1B split. ``detokenize`` (default: true for LM1B, false for files) applies MDLM's
``lm1b_detokenizer`` to every sentence, including those of ``file_dataset``.

Windows (``max_length`` L tokens, items ``{"input_ids": LongTensor[L]}``):

- ``wrap: false`` (the paper's LM1B Table 1 setting): one item per sentence,
  ``[BOS] tokens [EOS] [PAD]...``, truncated to ``[BOS] tokens[:L-2] [EOS]`` when longer, as a
  Hugging Face tokenizer with ``truncation=True`` does. Named ``line N`` (N counts from 1).
  ``file_dataset`` (``genodiff eval --file``) warns with the number of lines and tokens cut.
- ``wrap: true``: MDLM's ``_group_texts``: every sentence followed by [EOS] is concatenated
  into one stream, cut into chunks of L-2 tokens, each item ``[BOS] chunk [EOS]``; the
  remainder shorter than a chunk is dropped. Named ``block K (lines A-B)``.

[BOS] / [EOS] / [PAD] are the tokenizer's (bert: [CLS] / [SEP] / [PAD]; upstream MDLM's
``get_dataset`` takes ``tokenizer.encode(eos_token)[0]``, [CLS] for bert, as its EOS: its
wrapped bert blocks separate sentences with [CLS], genodiff's with [SEP]). How the objective
treats [PAD] is ``objective.padding``: the plugin's ``mdlm_text`` scores it (a bound, length
included), ``mdlm_text_upstream`` corrupts it without scoring it (upstream MDLM). A generated
window of ``wrap: false`` ends at its first [EOS] (``end_samples``), as a sentence does.

Nothing is read in ``__init__``; ``check_files()`` validates the input (missing, binary,
invalid UTF-8, empty, too few sentences for the splits), ``training_texts()`` yields the
train split's text for a tokenizer trained on the data, ``attach_tokenizer()`` sets the
tokenizer and ``setup()`` tokenizes the splits it needs. Training order comes from a sampler
seeded by ``(seed, epoch)``, so a run is reproducible for any ``num_workers``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from genodiff.data.base import DataModule
from genodiff.errors import InputValueError
from genodiff_text.data import lm1b
from genodiff_text.data.text_files import count_lines, read_lines
from genodiff_text.resources import CORPUS

SOURCES = ("file", "lm1b", "lm1b_release")
SPLITS = ("train", "valid", "test")
ENCODE_CHUNK = 4096


def split_cuts(count: int, split_fractions: Sequence[float]) -> list[int]:
    """Line-index boundaries ``[0, a, b, count]`` of train | valid | test."""
    fractions = tuple(float(f) for f in split_fractions)
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-6:
        raise InputValueError(
            "data.split_fractions must be 3 non-negative numbers (train, valid, test) summing "
            f"to 1, got {tuple(split_fractions)}"
        )
    return [0, int(count * fractions[0]), int(count * (fractions[0] + fractions[1])), count]


# ---------------------------------------------------------------------- tokenized sentences


@dataclass
class TokenizedLines:
    """Sentences as one flat id array: sentence i is ``tokens[offsets[i]:offsets[i+1]]``, read
    from ``origins[origin[i]]`` at line ``line[i]``."""

    tokens: np.ndarray  # (total,) uint16 or int32
    offsets: np.ndarray  # (n + 1,) int64
    origin: np.ndarray  # (n,) int32
    line: np.ndarray  # (n,) int64
    origins: list[str]
    show_origin: bool = False  # name items "origin line N" (LM1B shards) rather than "line N"

    def __len__(self) -> int:
        return len(self.line)

    def where(self, i: int, label: str = "line") -> str:
        """``line 17``, or ``news.en-00001-of-00100 line 17`` with ``show_origin``."""
        prefix = f"{self.origins[self.origin[i]]} " if self.show_origin else ""
        return f"{prefix}{label} {int(self.line[i])}"


def tokenize_lines(
    rows: Iterable[tuple[str, int, str]],
    tokenizer,
    show_origin: bool = False,
    chunk: int = ENCODE_CHUNK,
) -> TokenizedLines:
    """Tokenize ``(origin, line, text)`` rows (``encode_batch`` when the tokenizer has it: a
    special token's name written in a text is read as text)."""
    dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    encode_batch = getattr(tokenizer, "encode_batch", None)
    origins: dict[str, int] = {}
    pieces, lengths, origin, line = [], [], [], []
    texts: list[str] = []

    def flush() -> None:
        ids = encode_batch(texts) if encode_batch else [tokenizer.encode(t) for t in texts]
        sizes = [len(seq) for seq in ids]
        flat = itertools.chain.from_iterable(ids)
        pieces.append(np.fromiter(flat, dtype=dtype, count=sum(sizes)))  # one array per chunk
        lengths.extend(sizes)
        texts.clear()

    for name, number, text in rows:
        origin.append(origins.setdefault(name, len(origins)))
        line.append(number)
        texts.append(text)
        if len(texts) >= chunk:
            flush()
    if texts:
        flush()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)
    return TokenizedLines(
        tokens,
        offsets,
        np.asarray(origin, dtype=np.int32),
        np.asarray(line, dtype=np.int64),
        list(origins),
        show_origin,
    )


class _TextDataset(Dataset):
    """Common parts: special ids and the no-op ``set_epoch`` the sampler calls."""

    def __init__(self, lines: TokenizedLines, max_length: int, tokenizer) -> None:
        self.lines = lines
        self.max_length = max_length
        self.bos = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        self.eos = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
        self.pad_id = tokenizer.pad_id
        self.room = max_length - len(self.bos) - len(self.eos)  # content tokens per item
        if self.room < 1:
            raise InputValueError(f"data.max_length={max_length} leaves no room for text; use >= 3")

    def set_epoch(self, epoch: int) -> None:
        """Items do not depend on the epoch (kept for the shuffling sampler)."""

    def _item(self, content: np.ndarray) -> dict[str, torch.Tensor]:
        ids = np.full(self.max_length, self.pad_id, dtype=np.int64)
        row = np.concatenate([self.bos, content.astype(np.int64), self.eos]).astype(np.int64)
        ids[: len(row)] = row
        return {"input_ids": torch.from_numpy(ids)}  # [max_length]

    def _check(self, index: int) -> None:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} items")


class SentenceDataset(_TextDataset):
    """``wrap: false``: one padded / truncated sentence per item (see the module doc)."""

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        self._check(index)
        lo, hi = self.lines.offsets[index], self.lines.offsets[index + 1]
        return self._item(self.lines.tokens[lo : min(hi, lo + self.room)])

    def item_name(self, index: int) -> str:
        self._check(index)
        return self.lines.where(index)

    def overflow(self) -> tuple[int, int, int]:
        """(sentences longer than an item holds, their tokens cut off, the longest sentence's
        tokens): what the truncation drops."""
        sizes = np.diff(self.lines.offsets)  # (n,)
        cut = sizes > self.room
        longest = int(sizes.max()) if len(sizes) else 0
        return int(cut.sum()), int((sizes[cut] - self.room).sum()), longest


class WholeSentenceDataset(_TextDataset):
    """``wrap: true``'s reading of sentences scored one by one (``sequences_dataset``): one
    item per sentence, whole, framed as a block frames its chunk, ``[BOS] tokens [EOS]``,
    without padding (a wrapped stream has none): each item has its own length."""

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        self._check(index)
        lo, hi = self.lines.offsets[index], self.lines.offsets[index + 1]
        row = np.concatenate([self.bos, self.lines.tokens[lo:hi].astype(np.int64), self.eos])
        return {"input_ids": torch.from_numpy(row.astype(np.int64))}  # [n + 2]

    def item_name(self, index: int) -> str:
        self._check(index)
        return self.lines.where(index)


class BlockDataset(_TextDataset):
    """``wrap: true``: ``[BOS] chunk [EOS]`` blocks of the sentence stream (see the module doc)."""

    def __init__(self, lines: TokenizedLines, max_length: int, tokenizer) -> None:
        super().__init__(lines, max_length, tokenizer)
        eos = self.eos
        if eos:  # every sentence followed by [EOS]
            self.stream = np.insert(lines.tokens, lines.offsets[1:], eos[0])
            self.starts = lines.offsets + np.arange(len(lines.offsets))  # sentence starts
        else:
            self.stream, self.starts = lines.tokens, lines.offsets
        self.count = len(self.stream) // self.room

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        self._check(index)
        return self._item(self.stream[index * self.room : (index + 1) * self.room])

    def sentence_of(self, position: int) -> int:
        """Index of the sentence that stream position ``position`` belongs to."""
        return int(np.searchsorted(self.starts, position, side="right")) - 1

    def item_name(self, index: int) -> str:
        """``block K (lines A-B)``: the lines its first and last tokens come from."""
        self._check(index)
        first = self.sentence_of(index * self.room)
        last = self.sentence_of((index + 1) * self.room - 1)
        lines = self.lines
        if first == last:
            return f"block {index} ({lines.where(first)})"
        if not lines.show_origin or lines.origin[first] == lines.origin[last]:
            where = lines.where(first, "lines")
            return f"block {index} ({where}-{lines.line[last]})"
        return f"block {index} ({lines.where(first)} - {lines.where(last)})"


# ---------------------------------------------------------------------- the data module


class TextDataModule(DataModule):
    """Sentences of a text file or LM1B (see the module docstring for every key)."""

    domain = "text"
    data_file_keys = ("path", "root")
    path_keys = ("path", "root")

    def __init__(
        self,
        path: str | None = None,
        source: str = "file",
        root: str | None = None,
        max_length: int = 128,
        wrap: bool = False,
        detokenize: bool | None = None,
        split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        max_lines: int | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size, num_workers, seed)
        if source not in SOURCES:
            raise InputValueError(
                f"data.source must be one of {', '.join(SOURCES)}, got {source!r}"
            )
        if max_length < 3:
            raise InputValueError(
                f"data.max_length must be >= 3 ([BOS] text [EOS]), got {max_length}"
            )
        if max_lines is not None and max_lines < 1:
            raise InputValueError(f"data.max_lines must be >= 1 (or null for all), got {max_lines}")
        if source == "lm1b_release" and not root:
            raise InputValueError(
                "data.source=lm1b_release needs data.root: the folder of the unpacked release "
                f"({lm1b.RELEASE_NAME})"
            )
        self.source = source
        self.path = Path(path).expanduser() if path else CORPUS
        self.root = Path(root).expanduser() if root else None
        self.max_length = int(max_length)
        self.wrap = bool(wrap)
        self.detokenize = source != "file" if detokenize is None else bool(detokenize)
        self.split_fractions = tuple(float(f) for f in split_fractions)
        split_cuts(0, self.split_fractions)  # validates
        self.max_lines = max_lines
        self._line_count: int | None = None
        self.datasets: dict[str, _TextDataset] = {}

    # ------------------------------------------------------------------ reading

    def check_files(self) -> None:
        """Fail fast: the input must exist, be UTF-8 text and give every split a sentence."""
        if self.source == "lm1b_release":
            for split in ("train", "test"):
                lm1b.release_shards(self.root, split)
        elif self.source == "lm1b":
            lm1b.check_hf_datasets()
        else:
            self._file_cuts()

    def data_files(self) -> list[Path]:
        """The text file, or the LM1B release's shards (the Hugging Face dataset: none)."""
        if self.source == "lm1b_release":
            return [
                *lm1b.release_shards(self.root, "train"),
                *lm1b.release_shards(self.root, "test"),
            ]
        return [self.path] if self.source == "file" else []

    def _file_cuts(self) -> list[int]:
        if self._line_count is None:
            total = count_lines(self.path, "data.path text file")
            self._line_count = min(total, self.max_lines or total)
        cuts = split_cuts(self._line_count, self.split_fractions)
        empty = [s for i, s in enumerate(SPLITS) if cuts[i + 1] <= cuts[i]]
        if empty:
            raise InputValueError(
                f"{self.path} gives {self._line_count} sentences (non-blank lines"
                f"{', after max_lines' if self.max_lines else ''}), too few for the "
                f"{'/'.join(SPLITS)} split_fractions {list(self.split_fractions)}: the "
                f"{' and '.join(empty)} split(s) would be empty. Give a longer file, or change "
                "data.split_fractions / data.max_lines"
            )
        return cuts

    def _rows(self, split: str) -> Iterator[tuple[str, int, str]]:
        """``(origin, line number, raw text)`` of ``split``'s sentences."""
        if self.source == "file":
            lo, hi = self._file_cuts()[SPLITS.index(split) : SPLITS.index(split) + 2]
            origin = self.path.name
            for index, (number, text) in enumerate(read_lines(self.path, "data.path text file")):
                if index >= hi:
                    break
                if index >= lo:
                    yield origin, number, text
        elif self.source == "lm1b_release":
            emitted = 0
            for shard in lm1b.release_shards(self.root, split):
                for number, text in read_lines(shard, "LM1B shard"):
                    if self.max_lines is not None and emitted >= self.max_lines:
                        return
                    emitted += 1
                    yield shard.name, number, text
        else:
            yield from lm1b.hf_lm1b_texts(split, self.max_lines)

    def _texts(self, rows: Iterable[tuple[str, int, str]]) -> Iterator[tuple[str, int, str]]:
        for origin, number, text in rows:
            yield origin, number, lm1b.lm1b_detokenizer(text) if self.detokenize else text

    def training_texts(self) -> Iterator[str]:
        """The train split's sentences (detokenized when configured), for a tokenizer trained
        on the data."""
        for _, _, text in self._texts(self._rows("train")):
            yield text

    # ------------------------------------------------------------------ datasets

    def _require_tokenizer(self):
        tokenizer = getattr(self, "tokenizer", None)
        if tokenizer is None:
            raise ValueError("attach a tokenizer (attach_tokenizer) before building datasets")
        return tokenizer

    def _windows(self, lines: TokenizedLines) -> _TextDataset:
        kind = BlockDataset if self.wrap else SentenceDataset
        return kind(lines, self.max_length, self._require_tokenizer())

    def _dataset(self, split: str) -> _TextDataset:
        rows = self._texts(self._rows(split))
        lines = tokenize_lines(rows, self._require_tokenizer(), self.source != "file")
        return self._windows(lines)

    def setup(self, stage: str | None = None) -> None:
        self.check_files()
        splits = {"fit": ("train", "valid"), "validate": ("valid",), "test": ("test",)}
        for split in splits.get(stage, SPLITS):
            if split in self.datasets:
                continue
            if split == "valid" and self.source != "file":  # LM1B: valid = test, as MDLM
                if "test" not in self.datasets:
                    self.datasets["test"] = self._dataset("test")
                self.datasets[split] = self.datasets["test"]
            else:
                self.datasets[split] = self._dataset(split)

    def heldout_dataset(self, split: str = "test") -> _TextDataset:
        if split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {split!r}")
        self.setup("test" if split == "test" else "validate")
        return self.datasets[split]

    def file_dataset(self, path: str | Path) -> _TextDataset:
        """Every window of the text file ``path`` (all its non-blank lines), windowed and
        detokenized as the configured data."""
        count_lines(path, "data file")  # missing, binary, empty: a clear error first
        rows = ((Path(path).name, n, text) for n, text in read_lines(path, "data file"))
        dataset = self._windows(tokenize_lines(self._texts(rows), self._require_tokenizer()))
        hint = "length={0} (genodiff eval --length {0}) scores every line whole"
        self._warn_truncated(dataset, str(path), "lines", hint)
        return dataset

    def _warn_truncated(self, dataset: _TextDataset, source: str, what: str, hint: str) -> None:
        """Warn, counting them, when sentences of ``dataset`` (padded windows) are longer than
        the window and truncated; ``hint`` formats the window length that holds them all."""
        if not isinstance(dataset, SentenceDataset):
            return
        lines, tokens, longest = dataset.overflow()
        if lines:
            whole = longest + self.max_length - dataset.room
            warnings.warn(
                f"{source}: {lines} of {len(dataset)} {what} are longer than the "
                f"{self.max_length}-token window and are truncated to it ({tokens} of their "
                f"tokens are not scored); {hint.format(whole)}",
                stacklevel=3,
            )

    def sequences_dataset(self, sequences: Sequence[str]) -> _TextDataset:
        """One item per text (``genodiff.Model.score``), read as ``file_dataset`` reads a line:
        surrounding whitespace dropped, detokenized as configured. ``wrap: false``: the line's
        padded or truncated window (a warning counts the texts cut, as ``file_dataset``'s);
        ``wrap: true`` (whose blocks would join the texts into a stream): each whole,
        ``[BOS] tokens [EOS]`` (``WholeSentenceDataset``). A text that reads as no token (empty
        or blank: a line ``file_dataset`` skips) is an InputValueError naming its index: its
        window would be a sentence of no words, [BOS] [EOS], scored as if it were given."""
        rows = (("(in memory)", n, text.strip()) for n, text in enumerate(sequences, 1))
        lines = tokenize_lines(self._texts(rows), self._require_tokenizer())
        empty = np.flatnonzero(np.diff(lines.offsets) == 0)
        if len(empty):
            index = int(empty[0])
            what = "is empty" if not sequences[index].strip() else "reads as no token"
            raise InputValueError(
                f"sequence {index} {what} ({sequences[index]!r:.40}): there is no sentence to "
                "score (a file's blank line is skipped, not scored); drop it or give it words",
                parameter="sequences",
            )
        if self.wrap:
            return WholeSentenceDataset(lines, self.max_length, self._require_tokenizer())
        dataset = self._windows(lines)
        hint = "each text is read in one window of the length the model was trained on"
        self._warn_truncated(dataset, "the scored texts", "texts", hint)
        return dataset

    def end_samples(self, samples: torch.Tensor, given: torch.Tensor | None = None) -> torch.Tensor:
        """``wrap: false``: a generated window ends as a sentence does, at its first [EOS]
        after the start (or its first [PAD]); every position after it becomes [PAD], so the
        decoded sample stops there too. With an infilling template (``given`` (L,): its known
        tokens), the sample runs at least to its last given token: a [PAD] drawn before it
        becomes the sentence end it stands for ([EOS], written between sentences), and an
        [EOS] drawn there stays a sentence boundary. Wrapped blocks run on through their
        sentences, unchanged (as without an [EOS] token)."""
        tokenizer = self._require_tokenizer()
        if self.wrap or tokenizer.eos_id is None:
            return samples
        pad, eos = tokenizer.pad_id, tokenizer.eos_id
        ends = (samples == eos) | (samples == pad)  # (n, L)
        ends[:, 0] = samples[:, 0] == pad  # a BOS that is also the EOS (gpt2)
        if given is not None and bool(given.any()):
            positions = torch.arange(samples.shape[1], device=samples.device)  # (L,)
            kept = positions <= positions[given.to(samples.device)].max()  # (L,)
            samples = torch.where(kept & (samples == pad), eos, samples)
            ends &= ~kept
        after = (ends.long().cumsum(dim=1) - ends.long()) > 0  # (n, L): past the first end
        return samples.masked_fill(after, pad)

    def dataset_of(self, split: str) -> _TextDataset:
        if split not in self.datasets:
            self.setup()
        dataset = self.datasets[split]
        if len(dataset) == 0:
            raise InputValueError(
                f"the {split} split has no {self.max_length}-token window (wrap=true needs at "
                f"least {dataset.room} tokens per block); use a smaller data.max_length or more "
                "text"
            )
        return dataset

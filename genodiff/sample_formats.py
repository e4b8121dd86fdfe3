"""Sample file formats: how generated sequences are written and read, and what produced them.

A format (``SampleFormat``) is known by its file suffixes. Two are domain-neutral and every
domain writes them: ``.txt`` (one sample per line) and ``.jsonl`` (one JSON object per sample:
``id``, ``text``, the class drawn for (``label``) and the provenance fields of
``SamplingRun``). A domain defines its own (the DNA domain's FASTA:
``genodiff.domains.fasta``) and lists the formats it writes in ``Domain.sample_formats``;
``genodiff.sample_files`` picks one by a path's suffix. A line template for infilling
(``line_template``, the first non-empty line) is read here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO
from urllib.parse import unquote

from genodiff.errors import InputValueError
from genodiff.guidance import Guidance
from genodiff.randomness.noise import SEQUENCE_SEEDS

# The weights' identity, recorded only when known (a model loaded from a file): older files
# and in-memory models' samples lack them; and the dtype they were cast to, only when not
# float32 (``genodiff.load(dtype=...)``, ``Model.to``, ``--dtype``: other roundings, which can
# draw other sequences).
WEIGHTS_FIELDS = ("checkpoint_step", "weights_crc32", "dtype")


@dataclass
class SamplingRun:
    """What produced a batch of samples: the provenance a sample file records.

    ``checkpoint_step`` (the training step the weights were saved at) and ``weights_crc32``
    (8 hex digits of the CRC-32 of the weights as loaded or trained,
    ``genodiff.checkpoints.load.weights_digest``) tell apart two states of one file that a run
    keeps overwriting (``last.ckpt``); None when unknown, and then not written. ``dtype``: the
    weights' dtype when they sample in another than float32 ("bfloat16", "float16":
    ``genodiff.load(dtype=...)``, ``trainer.precision=bf16-true``); None, not written, for
    float32."""

    checkpoint: str
    sampler: str
    steps: int | None  # None for a sampler that takes no steps (``Objective.steps_used``)
    seed: int
    temperature: float = 1.0
    top_p: float = 1.0
    block: int | None = None
    stride: int | None = None
    constraint: str | None = None  # Constraint.description
    guidance: Guidance | None = None  # the request's, as it is (guided runs only)
    # How each sequence's random draws are seeded (``genodiff.randomness.noise``): the draws of
    # sequence i of a run are a function of (seed, i) and the request alone.
    draws: str = SEQUENCE_SEEDS
    checkpoint_step: int | None = None
    weights_crc32: str | None = None
    dtype: str | None = None

    def _weights(self) -> dict[str, object]:
        return {key: getattr(self, key) for key in WEIGHTS_FIELDS if getattr(self, key) is not None}

    def provenance(self) -> dict[str, object]:
        """The fields a ``.jsonl`` sample carries: the run's, with the weights' identity when
        known and the guidance's own (``Guidance.provenance``) only for a guided run."""
        skipped = ("guidance", *WEIGHTS_FIELDS)
        fields = {key: value for key, value in asdict(self).items() if key not in skipped}
        fields = {"checkpoint": fields.pop("checkpoint"), **self._weights(), **fields}
        if self.guidance is not None:
            fields.update(self.guidance.provenance())
        return fields

    def describe(self) -> str:
        """The run as a FASTA header's description: ``key=value`` words (``header_word``)."""
        fields: list[tuple[str, object]] = [("checkpoint", self.checkpoint)]
        fields += list(self._weights().items())
        fields.append(("sampler", self.sampler))
        if self.steps is not None:
            fields.append(("steps", self.steps))
        fields += [("seed", self.seed), ("draws", self.draws)]
        fields += [("temperature", f"{self.temperature:g}"), ("top_p", f"{self.top_p:g}")]
        if self.block is not None:
            fields += [("block", self.block), ("stride", self.stride)]
        words = [header_word(key, value) for key, value in fields]
        if self.constraint:
            words.append(self.constraint)
        if self.guidance is not None:
            words += [
                header_word(key, f"{value:g}" if isinstance(value, float) else value)
                for key, value in self.guidance.provenance().items()
            ]
        return " ".join(words)


def header_word(key: str, value: object) -> str:
    """``key=value`` as one word of a header: a ``%`` or whitespace in the value
    percent-encoded (class ``human enhancer``: ``label=human%20enhancer``), which
    ``header_value`` reverses, so that every word reads back whole."""
    text = re.sub(r"[%\s]", lambda match: f"%{ord(match[0]):02X}", str(value))
    return f"{key}={text}"


def header_value(text: str) -> str:
    """The value ``header_word`` wrote as ``text``."""
    return unquote(text)


# (handle, sample names, sample texts, provenance) -> writes the file's content
Writer = Callable[[IO[str], Sequence[str], Sequence[str], SamplingRun], None]
# (handle, path for messages) -> the samples' texts
Reader = Callable[[IO[str], Path], list[str]]
# (handle, path for messages) -> the class each sample was drawn for (None: none named)
LabelReader = Callable[[IO[str], Path], list[str | None]]


@dataclass(frozen=True)
class SampleFormat:
    """A sample file format: its name, the suffixes that select it (lower case, with the
    dot; the first is the usual one), how it is written and read, and how the class each
    sample was drawn for is read (None: the format names no class)."""

    name: str
    suffixes: tuple[str, ...]
    write: Writer
    read: Reader
    read_labels: LabelReader | None = None

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.suffixes)})"


# --------------------------------------------------------------------------- the formats


def _write_lines(handle: IO[str], names: Sequence[str], texts: Sequence[str], run) -> None:
    handle.writelines(" ".join(text.split()) + "\n" for text in texts)


def _read_lines(handle: IO[str], path: Path) -> list[str]:
    # Every line is a sample: a blank one is an empty sample (``_write_lines`` writes a sample
    # with no text so), never skipped, or the samples after it would lose their place.
    return [line.strip() for line in handle]


def _write_jsonl(handle: IO[str], names: Sequence[str], texts: Sequence[str], run) -> None:
    provenance = run.provenance()
    handle.writelines(
        json.dumps({"id": name, "text": text, **provenance}) + "\n"
        for name, text in zip(names, texts, strict=True)
    )


def _jsonl_items(handle: IO[str], path: Path) -> Iterator[dict]:
    """Each non-blank line's JSON object, checked to hold a string ``"text"``; an input error
    naming the line otherwise."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputValueError(f"{path}, line {number}: invalid JSON ({err.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InputValueError(
                f'{path}, line {number}: expected a JSON object with a string "text" field'
            )
        yield item


def _read_jsonl(handle: IO[str], path: Path) -> list[str]:
    return [item["text"] for item in _jsonl_items(handle, path)]


def _read_jsonl_labels(handle: IO[str], path: Path) -> list[str | None]:
    labels = [item.get(LABEL_FIELD) for item in _jsonl_items(handle, path)]
    return [None if label is None else str(label) for label in labels]


LABEL_FIELD = "label"  # a .jsonl line's field naming the class a sample was drawn for
TEXT = SampleFormat("text, one sample per line", (".txt",), _write_lines, _read_lines)
JSONL = SampleFormat(
    'JSON Lines, a "text" field per line',
    (".jsonl",),
    _write_jsonl,
    _read_jsonl,
    _read_jsonl_labels,
)
# Every domain writes these.
NEUTRAL_FORMATS = (TEXT, JSONL)


# --------------------------------------------------------------------------- templates


#: The most characters of an infilling template file read (a template is one sample, its
#: length the sample length): a whole genome, a line of gigabytes or a gzip bomb is not read
#: whole.
MAX_TEMPLATE_CHARS = 1 << 24


def template_lines(handle: IO[str], path: Path) -> Iterator[str]:
    """The lines of the infilling template file ``path`` open as ``handle``, read one at a
    time as the caller takes them; an input error once more than ``MAX_TEMPLATE_CHARS``
    characters are read."""
    left = MAX_TEMPLATE_CHARS
    while line := handle.readline(left + 1):
        left -= len(line)
        if left < 0:
            raise InputValueError(
                f"infill file {path}: the template is longer than {MAX_TEMPLATE_CHARS:,} "
                "characters, longer than a sample genodiff draws; cut it to the region to fill",
                parameter="infill",
            )
        yield line


def line_template(path: Path) -> str:
    """The first non-empty line of a UTF-8 text file."""
    try:
        with path.open(encoding="utf-8") as handle:
            lines = (line.strip() for line in template_lines(handle, path))
            template = next((line for line in lines if line), None)
    except UnicodeDecodeError as err:
        raise InputValueError(f"infill file {path} is not UTF-8 text ({err.reason})") from None
    if template is None:
        raise InputValueError(
            f"infill file {path} has no text: write the template on its first line"
        )
    return template

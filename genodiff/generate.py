"""Draw sequences from a trained checkpoint and write them: FASTA for DNA (Biopython), one
sample per line or JSON Lines for any domain."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from Bio.Seq import Seq
from Bio.SeqIO import parse as parse_records
from Bio.SeqIO import write as write_records
from Bio.SeqRecord import SeqRecord
from torch import Tensor

from genodiff.data.genome import fasta_errors, open_fasta
from genodiff.objectives import Objective
from genodiff.sampling import SampleRequest
from genodiff.tokenizers import Tokenizer


@dataclass
class SamplingRun:
    """What produced a batch of samples; written into every FASTA record's description."""

    checkpoint: str
    sampler: str
    steps: int | None  # None for a sampler that takes no steps (``Objective.steps_used``)
    seed: int
    temperature: float = 1.0
    top_p: float = 1.0
    block: int | None = None
    stride: int | None = None
    constraint: str | None = None  # Constraint.description

    def describe(self) -> str:
        parts = [f"checkpoint={self.checkpoint}", f"sampler={self.sampler}"]
        if self.steps is not None:
            parts.append(f"steps={self.steps}")
        parts += [f"seed={self.seed}", f"temperature={self.temperature:g}", f"top_p={self.top_p:g}"]
        if self.block is not None:
            parts += [f"block={self.block}", f"stride={self.stride}"]
        if self.constraint:
            parts.append(self.constraint)
        return " ".join(parts)


@dataclass
class Constraint:
    """Positions fixed by the user: ``template`` ids (L,) hold where ``given`` (L,) is True."""

    template: Tensor
    given: Tensor
    description: str

    @property
    def length(self) -> int:
        return len(self.template)

    @classmethod
    def from_prefix(cls, prefix: str, length: int, tokenizer: Tokenizer) -> Constraint:
        """The first positions fixed to ``tokenizer.encode_prefix(prefix)`` (DNA: the bases
        themselves; text: [BOS] and the prefix's tokens)."""
        ids = tokenizer.encode_prefix(prefix)
        if len(ids) > length:
            raise ValueError(
                f"the prefix ({len(ids)} {tokenizer.unit}) is longer than --length {length}; "
                "raise --length or shorten the prefix"
            )
        template = torch.full((length,), tokenizer.mask_id, dtype=torch.long)
        template[: len(ids)] = torch.tensor(ids)
        given = torch.arange(length) < len(ids)
        return cls(template, given, f"prefix={len(ids)}{tokenizer.unit}")

    @classmethod
    def from_file(cls, path: str | Path, tokenizer: Tokenizer) -> Constraint:
        """An infilling template read from ``path`` (DNA: the first FASTA record, upper-case
        A/C/G/T kept, N and lower case generated; text: the first non-empty line, mask tokens
        generated); its length is the sample length."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"infill file {path} not found")
        text = _fasta_template(path) if tokenizer.domain == "dna" else _text_template(path)
        ids = torch.tensor(tokenizer.encode_template(text), dtype=torch.long)
        given = ids != tokenizer.mask_id
        generated = int((~given).sum())
        return cls(ids, given, f"infill={path.name}:{generated}{tokenizer.unit}_generated")


def _fasta_template(path: Path) -> str:
    """The sequence of the first record of a FASTA file (plain, gzip or BGZF)."""
    with fasta_errors(path), open_fasta(path) as handle:
        text = handle.read()
    if not text.strip():
        raise ValueError(f"infill FASTA {path} is empty")
    if not text.lstrip().startswith(">"):
        raise ValueError(f"{path} is not FASTA: it must start with a '>name' header line")
    record = next(parse_records(io.StringIO(text), "fasta"))
    if not record.seq:
        raise ValueError(f"the first record of {path} ({record.id}) has no sequence")
    return str(record.seq)


def _text_template(path: Path) -> str:
    """The first non-empty line of a UTF-8 text file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"infill file {path} is not UTF-8 text ({err.reason})") from None
    template = next((line.strip() for line in lines if line.strip()), None)
    if template is None:
        raise ValueError(f"infill file {path} has no text: write the template on its first line")
    return template


def draw_samples(
    objective: Objective,
    backbone: torch.nn.Module,
    request: SampleRequest,
    seed: int,
    batch_size: int,
) -> Tensor:
    """(request.num_samples, request.length) ids in batches of ``batch_size``; one seeded
    generator makes the whole run repeatable. ValueError up front for a ``batch_size`` < 1 or
    a request that cannot fit in memory (``check_feasible``)."""
    check_feasible(request, batch_size, backbone)
    device = next(backbone.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    backbone.eval()
    batches = []
    for start in range(0, request.num_samples, batch_size):
        n = min(batch_size, request.num_samples - start)
        part = replace(request, num_samples=n)
        batches.append(objective.sample(backbone, part, generator=generator).cpu())
    return torch.cat(batches)


def memory_needed(request: SampleRequest, batch_size: int, vocab_size: int) -> tuple[int, int]:
    """A lower bound on the bytes sampling ``request`` takes: (on the device, one batch's
    float32 network output, batch x length x vocab x 4 bytes, with its int64 ids, x 8 bytes;
    in host memory, the int64 ids of every sample, num_samples x length x 8 bytes). The
    network's own activations come on top, so a request above it cannot fit."""
    batch = min(batch_size, request.num_samples)
    return batch * request.length * (4 * vocab_size + 8), request.num_samples * request.length * 8


def memory_available(device: torch.device) -> tuple[int, int]:
    """(the device's total memory, the host's physical memory) in bytes."""
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory, host
    return host, host


def check_feasible(request: SampleRequest, batch_size: int, backbone: torch.nn.Module) -> None:
    """ValueError for a ``batch_size`` < 1, or, saying how much memory it would take, for a
    request that cannot fit (``memory_needed`` with the backbone's ``vocab_size``, above the
    machine's memory) rather than an allocator error or the out-of-memory killer later."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 (--batch-size), got {batch_size}")
    device = next(backbone.parameters()).device
    needed = memory_needed(request, batch_size, getattr(backbone, "vocab_size", 1))
    for need, have, where in zip(needed, memory_available(device), (device, "host"), strict=True):
        if need > have:
            raise ValueError(
                f"sampling {request.num_samples} x {request.length} tokens (batches of "
                f"{min(batch_size, request.num_samples)}) needs at least {_size(need)} of "
                f"{where} memory, and this machine has {_size(have)}; lower --length, "
                "--batch-size or --num-samples"
            )


def _size(n: float) -> str:
    """``512 bytes``, ``1.5 KiB`` ... ``3.0 PiB`` (larger sizes stay in PiB)."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = 0
    while n >= 1024 and power < len(units) - 1:
        n, power = n / 1024, power + 1
    return f"{n:.0f} bytes" if power == 0 else f"{n:.1f} {units[power]}"


FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fas")
SAMPLE_FORMATS = (
    "FASTA (.fa, .fasta; DNA only), text (.txt: one sample per line), JSON Lines (.jsonl)"
)


def check_output(
    path: str | Path, tokenizer: Tokenizer, inputs: Sequence[tuple[str, str | Path]] = ()
) -> Path:
    """``path`` as a place ``write_samples`` may write ``tokenizer``'s samples to; ValueError
    for an unknown format (by suffix), FASTA for non-DNA samples, a folder, or a file that is
    one of ``inputs`` ((what, path) pairs: the checkpoint, the infilling template, ...), which
    the samples would overwrite."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in FASTA_SUFFIXES and tokenizer.domain != "dna":
        raise ValueError(
            f"{path}: FASTA holds DNA, these are {tokenizer.domain} samples; use .txt or .jsonl"
        )
    if suffix not in (*FASTA_SUFFIXES, ".txt", ".jsonl"):
        raise ValueError(
            f"{path}: unknown output format {suffix or '(no suffix)'!r}; use {SAMPLE_FORMATS}"
        )
    if path.is_dir():
        raise ValueError(
            f"--out {path} is a folder; name a file in it, e.g. --out {path / ('samples' + suffix)}"
        )
    for what, source in inputs:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise ValueError(
                f"--out {path} is the {what} this command reads ({source}); writing the samples "
                "there would destroy it: choose another --out"
            )
    return path


def write_samples(
    samples: Tensor,
    path: str | Path,
    run: SamplingRun,
    tokenizer: Tokenizer,
    inputs: Sequence[tuple[str, str | Path]] = (),
) -> Path:
    """Write one sample per row of ``samples`` (n, L) to ``path``, atomically, in the format
    its suffix names: FASTA records ``sample_<i>_seed<S>`` whose description is the
    provenance (DNA), a ``.txt`` with one sample per line, or ``.jsonl`` with one object per
    sample holding ``id``, ``text`` and the provenance fields. ``path`` is checked first
    (``check_output``, never one of ``inputs``); a failed write leaves no ``.part`` file."""
    path = check_output(path, tokenizer, inputs)
    suffix = path.suffix.lower()
    names = [f"sample_{i}_seed{run.seed}" for i in range(len(samples))]
    texts = [tokenizer.decode_sample(row.tolist()) for row in samples]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            if suffix in FASTA_SUFFIXES:
                records = [
                    SeqRecord(Seq(text), id=name, description=run.describe())
                    for name, text in zip(names, texts, strict=True)
                ]
                write_records(records, handle, "fasta")
            elif suffix == ".txt":
                handle.writelines(" ".join(text.split()) + "\n" for text in texts)
            else:
                provenance = asdict(run)
                handle.writelines(
                    json.dumps({"id": name, "text": text, **provenance}) + "\n"
                    for name, text in zip(names, texts, strict=True)
                )
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path

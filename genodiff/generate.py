"""Draw sequences from a trained checkpoint and write them as FASTA (Biopython)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch
from Bio.Seq import Seq
from Bio.SeqIO import parse as parse_records
from Bio.SeqIO import write as write_records
from Bio.SeqRecord import SeqRecord
from torch import Tensor

from genodiff.objectives import Objective
from genodiff.sampling import SampleRequest
from genodiff.tokenizers import DNATokenizer


@dataclass
class SamplingRun:
    """What produced a batch of samples; written into every FASTA record's description."""

    checkpoint: str
    sampler: str
    steps: int
    seed: int
    temperature: float = 1.0
    top_p: float = 1.0
    block: int | None = None
    stride: int | None = None
    constraint: str | None = None  # Constraint.description

    def describe(self) -> str:
        parts = [
            f"checkpoint={self.checkpoint}",
            f"sampler={self.sampler}",
            f"steps={self.steps}",
            f"seed={self.seed}",
            f"temperature={self.temperature:g}",
            f"top_p={self.top_p:g}",
        ]
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
    def from_prefix(cls, prefix: str, length: int, tokenizer: DNATokenizer) -> Constraint:
        """The first len(prefix) positions fixed to ``prefix`` (A/C/G/T, either case)."""
        if not prefix:
            raise ValueError("--prefix is empty; give bases such as --prefix ACGTTG")
        if len(prefix) > length:
            raise ValueError(
                f"the prefix ({len(prefix)} bp) is longer than --length {length}; "
                "raise --length or shorten the prefix"
            )
        _check_letters(prefix, "ACGTacgt", "the prefix", "A, C, G or T")
        template = torch.full((length,), tokenizer.mask_id, dtype=torch.long)
        template[: len(prefix)] = torch.tensor(tokenizer.encode(prefix.upper()))
        given = torch.arange(length) < len(prefix)
        return cls(template, given, f"prefix={len(prefix)}bp")

    @classmethod
    def from_fasta(cls, path: str | Path, tokenizer: DNATokenizer) -> Constraint:
        """The first record of a FASTA file: upper-case A/C/G/T are kept, N and lower-case
        letters (a, c, g, t, n) are generated; the record's length is the sample length."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"infill FASTA {path} not found")
        text = path.read_text()
        if not text.strip():
            raise ValueError(f"infill FASTA {path} is empty")
        if not text.lstrip().startswith(">"):
            raise ValueError(f"{path} is not FASTA: it must start with a '>name' header line")
        record = next(parse_records(path, "fasta"))
        sequence = str(record.seq)
        if not sequence:
            raise ValueError(f"the first record of {path} ({record.id}) has no sequence")
        _check_letters(sequence, "ACGTNacgtn", f"{path} record {record.id}", "A/C/G/T/N")
        given = torch.tensor([letter in "ACGT" for letter in sequence])
        template = torch.full((len(sequence),), tokenizer.mask_id, dtype=torch.long)
        template[given] = torch.tensor(tokenizer.encode(sequence.upper()))[given]
        return cls(template, given, f"infill={path.name}:{int((~given).sum())}bp_generated")


def _check_letters(text: str, allowed: str, what: str, expected: str) -> None:
    for position, letter in enumerate(text, start=1):
        if letter not in allowed:
            raise ValueError(f"{what}: {letter!r} at position {position} is not {expected}")


def draw_samples(
    objective: Objective,
    backbone: torch.nn.Module,
    request: SampleRequest,
    seed: int,
    batch_size: int,
) -> Tensor:
    """(request.num_samples, request.length) ids in batches of ``batch_size``; one seeded
    generator makes the whole run repeatable."""
    device = next(backbone.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    backbone.eval()
    batches = []
    for start in range(0, request.num_samples, batch_size):
        n = min(batch_size, request.num_samples - start)
        part = replace(request, num_samples=n)
        batches.append(objective.sample(backbone, part, generator=generator).cpu())
    return torch.cat(batches)


def ids_to_dna(ids: Tensor, tokenizer: DNATokenizer) -> str:
    """Bases as letters; anything that is not A/C/G/T/N (a special token) as N."""
    allowed = set(tokenizer.base_ids) | {tokenizer.n_id}
    return tokenizer.decode([i if i in allowed else tokenizer.n_id for i in ids.tolist()])


def write_fasta(
    samples: Tensor, path: str | Path, run: SamplingRun, tokenizer: DNATokenizer
) -> Path:
    """Write one record per row, named ``sample_<i>_seed<S>``, to ``path`` (atomically)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [
        SeqRecord(
            Seq(ids_to_dna(row, tokenizer)),
            id=f"sample_{i}_seed{run.seed}",
            description=run.describe(),
        )
        for i, row in enumerate(samples)
    ]
    partial = path.with_name(path.name + ".part")
    with open(partial, "w") as handle:
        write_records(records, handle, "fasta")
    partial.replace(path)
    return path

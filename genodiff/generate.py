"""Draw sequences from a trained checkpoint and write them as FASTA (Biopython)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch
from Bio.Seq import Seq
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

    def describe(self) -> str:
        return (
            f"checkpoint={self.checkpoint} sampler={self.sampler} steps={self.steps} "
            f"seed={self.seed}"
        )


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

"""Draw sequences from a trained checkpoint: the constraints a user fixes (a prefix, an
infilling template), batched seeded drawing, and the memory check before it. The samples are
written by ``genodiff.sample_files``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from genodiff.backbones.capabilities import capabilities_of
from genodiff.domains import domain_of
from genodiff.errors import InputFileNotFoundError, InputValueError
from genodiff.memory import memory_available, size_text
from genodiff.objectives import Objective
from genodiff.progress import Progress
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import Tokenizer


@dataclass
class SamplingRun:
    """What produced a batch of samples: the provenance a sample file records."""

    checkpoint: str
    sampler: str
    steps: int | None  # None for a sampler that takes no steps (``Objective.steps_used``)
    seed: int
    temperature: float = 1.0
    top_p: float = 1.0
    block: int | None = None
    stride: int | None = None
    constraint: str | None = None  # Constraint.description
    # Guided runs only (``genodiff.guidance``): the class name, gamma, its schedule, and the
    # classifier checkpoint and form when one guided.
    label: str | None = None
    guidance: float | None = None
    guidance_schedule: str | None = None
    classifier: str | None = None
    classifier_form: str | None = None

    def provenance(self) -> dict[str, object]:
        """The fields a ``.jsonl`` sample carries: all of them, the guidance ones only when set
        (an unguided run's records are as before guidance existed)."""
        fields = asdict(self)
        for key in ("label", "guidance", "guidance_schedule", "classifier", "classifier_form"):
            if fields[key] is None:
                del fields[key]
        return fields

    def describe(self) -> str:
        parts = [f"checkpoint={self.checkpoint}", f"sampler={self.sampler}"]
        if self.steps is not None:
            parts.append(f"steps={self.steps}")
        parts += [f"seed={self.seed}", f"temperature={self.temperature:g}", f"top_p={self.top_p:g}"]
        if self.block is not None:
            parts += [f"block={self.block}", f"stride={self.stride}"]
        if self.constraint:
            parts.append(self.constraint)
        if self.label is not None:
            parts += [
                f"label={self.label}",
                f"guidance={self.guidance:g}",
                f"guidance_schedule={self.guidance_schedule}",
            ]
        if self.classifier is not None:
            parts += [f"classifier={self.classifier}", f"classifier_form={self.classifier_form}"]
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
            raise InputValueError(
                f"the prefix ({len(ids)} {tokenizer.unit}) is longer than --length {length}; "
                "raise --length or shorten the prefix"
            )
        template = torch.full((length,), tokenizer.mask_id, dtype=torch.long)
        template[: len(ids)] = torch.tensor(ids)
        given = torch.arange(length) < len(ids)
        return cls(template, given, f"prefix={len(ids)}{tokenizer.unit}")

    @classmethod
    def from_file(cls, path: str | Path, tokenizer: Tokenizer) -> Constraint:
        """An infilling template read from ``path`` as the tokenizer's domain reads one
        (``Domain.read_template``; DNA: the first FASTA record, upper-case A/C/G/T kept, N and
        lower case generated; by default the first non-empty line, mask tokens generated);
        its length is the sample length."""
        path = Path(path)
        if not path.is_file():
            raise InputFileNotFoundError(f"infill file {path} not found")
        text = domain_of(tokenizer).read_template(path)
        ids = torch.tensor(tokenizer.encode_template(text), dtype=torch.long)
        given = ids != tokenizer.mask_id
        generated = int((~given).sum())
        return cls(ids, given, f"infill={path.name}:{generated}{tokenizer.unit}_generated")


def draw_samples(
    objective: Objective,
    backbone: torch.nn.Module,
    request: SampleRequest,
    seed: int,
    batch_size: int,
    progress: Progress | None = None,
) -> Tensor:
    """(request.num_samples, request.length) ids in batches of ``batch_size``; one seeded
    generator makes the whole run repeatable. ValueError up front for a ``batch_size`` < 1 or
    a request that cannot fit in memory (``check_feasible``). ``progress`` shows the sampler's
    steps over all batches."""
    check_feasible(request, batch_size, backbone)
    device = next(backbone.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    backbone.eval()
    if progress is not None:
        request = replace(request, on_step=partial(progress.update, what="sampling steps"))
    starts = range(0, request.num_samples, batch_size)
    batches = []
    for index, start in enumerate(starts):
        n = min(batch_size, request.num_samples - start)
        part = replace(request, num_samples=n).part(index, len(starts))
        batches.append(objective.sample(backbone, part, generator=generator).cpu())
    return torch.cat(batches)


def memory_needed(request: SampleRequest, batch_size: int, vocab_size: int) -> tuple[int, int]:
    """A lower bound on the bytes sampling ``request`` takes: (on the device, one batch's
    float32 network output, batch x length x vocab x 4 bytes, with its int64 ids, x 8 bytes;
    in host memory, the int64 ids of every sample, num_samples x length x 8 bytes). The
    network's own activations come on top, so a request above it cannot fit."""
    batch = min(batch_size, request.num_samples)
    return batch * request.length * (4 * vocab_size + 8), request.num_samples * request.length * 8


def check_feasible(request: SampleRequest, batch_size: int, backbone: torch.nn.Module) -> None:
    """ValueError for a ``batch_size`` < 1, or, saying how much memory it would take, for a
    request that cannot fit (``memory_needed`` with the backbone's declared ``vocab_size``, above
    the machine's memory) rather than an allocator error or the out-of-memory killer later."""
    if batch_size < 1:
        raise InputValueError(f"batch_size must be >= 1 (--batch-size), got {batch_size}")
    device = next(backbone.parameters()).device
    needed = memory_needed(request, batch_size, capabilities_of(backbone).vocab_size)
    for need, have, where in zip(needed, memory_available(device), (device, "host"), strict=True):
        if need > have:
            raise InputValueError(
                f"sampling {request.num_samples} x {request.length} tokens (batches of "
                f"{min(batch_size, request.num_samples)}) needs at least {size_text(need)} of "
                f"{where} memory, and this machine has {size_text(have)}; lower --length, "
                "--batch-size or --num-samples"
            )

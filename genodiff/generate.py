"""Draw sequences from a trained model: what a user asks for turned into a sampling request
and its provenance (``plan``), the constraints a user fixes (a prefix, an infilling template),
batched seeded drawing, and the memory check before it. The samples are written by
``genodiff.sample_files``; ``genodiff.pipeline.Model.generate`` and ``genodiff sample`` are
the front ends."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from genodiff.backbones.capabilities import capabilities_of
from genodiff.domains import domain_of
from genodiff.errors import InputValueError, require_regular_file
from genodiff.generation_config import GenerationConfig
from genodiff.guidance import (
    CLASSIFIER_FORMS,
    GUIDANCE_SCHEDULES,
    Guidance,
    NoisyClassifierGuide,
    check_classifier,
    check_noisy_states,
    label_id,
)
from genodiff.memory import memory_available, size_text
from genodiff.model import GenerativeModel
from genodiff.objectives import Objective
from genodiff.ops.inference import reused_buffers
from genodiff.progress import Progress, ProgressLine
from genodiff.randomness.noise import Noise
from genodiff.sample_formats import SamplingRun
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import Tokenizer
from genodiff.trained_window import (
    check_backbone_length,
    warn_beyond_classifier_window,
    warn_beyond_trained_window,
)


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
        if tokenizer.mask_id in ids:  # the template's mark of a position to generate
            raise InputValueError(
                f"the prefix holds the mask token {tokenizer.decode([tokenizer.mask_id])}, which "
                "would make that position a generated one; a prefix is fixed text: fix the "
                "positions around generated ones with an infill template instead",
                parameter="prefix",
            )
        if len(ids) > length:
            raise InputValueError(
                f"the prefix ({len(ids)} {tokenizer.unit}) is longer than the length {length}; "
                "raise the length or shorten the prefix",
                parameter="prefix",
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
        path = require_regular_file(path, "infill file", parameter="infill")
        text = domain_of(tokenizer).read_template(path)
        ids = torch.tensor(tokenizer.encode_template(text), dtype=torch.long)
        given = ids != tokenizer.mask_id
        generated = int((~given).sum())
        return cls(ids, given, f"infill={path.name}:{generated}{tokenizer.unit}_generated")


@dataclass
class SamplingPlan:
    """A sampling job ready to draw: the ``request`` the samplers read, the provenance
    ``run`` its sample file records, the ``batch_size`` and ``seed`` it is drawn with."""

    request: SampleRequest
    run: SamplingRun
    batch_size: int
    seed: int


def job_stamp(request: SampleRequest, run: SamplingRun, dtype: torch.dtype) -> dict[str, Any]:
    """What a job's record (``SampleStream``'s stamp) holds beside its provenance, which a
    resumed run must match too: the weights' ``dtype`` (float32 and bfloat16 draw other
    sequences), the real-valued settings written exactly (the provenance rounds them to six
    digits: a temperature of 0.9 and 0.9000001 are two jobs), and for a request that fixes
    positions (a prefix, an infill template) a SHA-256 of their places and ids, since the
    provenance tells two prefixes of one length, or two templates of one name and shape, not
    apart."""
    exact = {"temperature": run.temperature, "top_p": run.top_p}
    if run.guidance is not None:
        exact["guidance"] = run.guidance.gamma
    stamp: dict[str, Any] = {
        "dtype": dtype_name(dtype),
        "exact": {key: repr(float(value)) for key, value in exact.items()},
    }
    if request.given is not None:
        fixed = json.dumps([request.template.tolist(), request.given.tolist()])
        stamp["prefix_or_infill_sha256"] = hashlib.sha256(fixed.encode()).hexdigest()[:16]
    return stamp


def check_classifier_noise(classifier: NoisyClassifierGuide, objective: str) -> None:
    """InputValueError (parameter ``classifier``) when a noisy classifier learnt p(y | z_t) on
    the other kind of noisy states (masked, uniform) than the ``objective`` generator makes;
    read from the generator objective its checkpoint records, so a classifier loaded in
    Python is checked as one named by its path is."""
    trained_for = getattr(classifier, "generator_objective", None)
    if getattr(classifier, "kind", None) == "noisy" and trained_for:
        source = getattr(classifier, "source", "the classifier")
        check_noisy_states(trained_for["name"], objective, source)


def plan(
    model: GenerativeModel,
    source: str,
    num_samples: int,
    config: GenerationConfig,
    given: Collection[str] = (),
) -> SamplingPlan:
    """What drawing ``num_samples`` sequences from ``model`` (loaded from ``source``, which the
    provenance names) with the options of ``config`` takes (``GenerationConfig``, whose values
    are checked already; its ``classifier`` loaded or None), every setting checked against
    the model and the others before anything is drawn (InputValueError naming the option at
    fault). ``given``: the options the caller set in this call; ``steps`` among them is
    refused by a sampler that takes none (from a model's generation config, it is unused).
    ``length``: tokens (default: the infill template's, else the training window); ``label``:
    a class name of the model (or of the classifier's classes for an unconditional model),
    guided by ``guidance`` (gamma, default 1), ``guidance_schedule`` (default constant) and
    an optional ``classifier`` in ``classifier_form`` (default first-order), in
    ``guidance_form`` ("x0" or "transition"; default: the kind's, x0 for classifier-free and
    transition for classifier guidance, as far as the sampler draws it: ``Sampler.resolved``);
    ``prefix`` (the start, as text) or ``infill`` (a template file); ``block``/``stride`` for
    the semi-autoregressive sampler."""
    tokenizer, classifier, length = model.tokenizer, config.classifier, config.length
    if classifier is not None and not isinstance(classifier, NoisyClassifierGuide):
        raise InputValueError(
            f"classifier must be a checkpoint path or a classifier loaded with "
            f"genodiff.load_classifier, got {type(classifier).__name__}",
            parameter="classifier",
        )
    if config.prefix is not None and config.infill is not None:
        raise InputValueError("a prefix and an infill template exclude each other; give one",
                              parameter="infill")  # fmt: skip
    if config.classifier_form is not None and classifier is None:
        raise InputValueError(
            "classifier_form is the form of classifier guidance: give a classifier with it, or "
            "leave it out",
            parameter="classifier_form",
        )
    steering = ("guidance", "guidance_schedule", "classifier", "classifier_form", "guidance_form")
    if config.label is None and any(getattr(config, name) is not None for name in steering):
        raise InputValueError(
            "guidance needs a class to guide towards: give a label with the guidance strength, "
            "its schedule, its form or a classifier",
            parameter="label",
        )
    steer = None
    if config.label is not None:
        classes = model.class_names
        if classifier is not None:
            check_classifier(classifier, classes, tokenizer.name)
            check_classifier_noise(classifier, model.config["objective"]["name"])
            classes = classes or list(classifier.class_names)
        steer = Guidance(
            label_id(config.label, classes, source),
            1.0 if config.guidance is None else float(config.guidance),
            config.guidance_schedule or GUIDANCE_SCHEDULES[0],
            classifier,
            config.classifier_form or CLASSIFIER_FORMS[0],
            label_name=config.label,
            form=config.guidance_form,
        )
    infill = config.infill
    constraint = Constraint.from_file(infill, tokenizer) if infill is not None else None
    if constraint is not None and length not in (None, constraint.length):
        raise InputValueError(
            f"length {length} differs from the infill template's {constraint.length} "
            f"{tokenizer.unit}; leave the length out",
            parameter="length",
        )
    if length is None:
        length = constraint.length if constraint else model.config["data"].get("max_length", 1024)
    request = SampleRequest(
        num_samples=num_samples,
        length=length,
        steps=config.steps,
        sampler=config.sampler,
        temperature=config.temperature,
        top_p=config.top_p,
        template=constraint.template if constraint else None,
        given=constraint.given if constraint else None,
        block=config.block,
        stride=config.stride,
        guidance=steer,
    )
    # before a prefix's (length,); holding every sample is checked where they are held
    check_feasible(request, config.batch_size, model.eval_backbone, held=False)
    if config.prefix is not None:
        constraint = Constraint.from_prefix(config.prefix, length, tokenizer)
        request = replace(request, template=constraint.template, given=constraint.given)
    request = model.eval_objective.resolve_guidance(request)  # the form its sampler draws
    name = model.eval_objective.sampler_name(request)  # its samplers differ per objective
    if "steps" in given and model.eval_objective.steps_used(request) is None:
        raise InputValueError(
            f"the {name} sampler of this {model.config['objective']['name']} model takes no "
            "number of steps (it reveals one token per network call); leave steps out",
            parameter="steps",
        )
    if name != "semi-ar" and (config.block is not None or config.stride is not None):
        raise InputValueError(
            "block and stride apply only to the semi-ar sampler", parameter="block"
        )
    read = config.block if name == "semi-ar" else length  # tokens the network reads at once
    check_backbone_length(model.eval_backbone, read, "block" if name == "semi-ar" else "length")
    samplers = model.eval_objective.samplers
    warn_beyond_trained_window(model.config, length, config.block, name, samplers, tokenizer.unit)
    if classifier is not None:  # it reads what the network reads: semi-ar, a block at a time
        trained = getattr(classifier, "trained_length", None)
        judge = getattr(classifier, "source", "the classifier")
        warn_beyond_classifier_window(trained, read, tokenizer.unit, judge)
    run = SamplingRun(
        checkpoint=source,
        sampler=name,
        steps=model.eval_objective.steps_used(request),
        seed=config.seed,
        temperature=config.temperature,
        top_p=config.top_p,
        block=config.block,
        stride=config.stride,
        constraint=constraint.description if constraint else None,
        guidance=request.guidance,
        checkpoint_step=model.provenance.get("global_step"),
        weights_crc32=model.provenance.get("weights_crc32"),
        dtype=cast_dtype(model.eval_backbone),
    )
    return SamplingPlan(request, run, config.batch_size, config.seed)


def cast_dtype(backbone: torch.nn.Module) -> str | None:
    """The dtype of ``backbone``'s floating-point weights by name ("bfloat16") where it is not
    float32, the dtype genodiff loads weights in (``genodiff.load(dtype=...)`` casts them); None
    for float32."""
    dtype = next(p.dtype for p in backbone.parameters() if p.is_floating_point())
    return None if dtype == torch.float32 else dtype_name(dtype)


def dtype_name(dtype: torch.dtype) -> str:
    """``dtype`` as a provenance names it: ``torch.bfloat16`` -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def draw_batches(
    objective: Objective,
    backbone: torch.nn.Module,
    request: SampleRequest,
    seed: int,
    batch_size: int,
    indices: range | None = None,
    progress: ProgressLine | None = None,
) -> Iterator[tuple[int, Tensor]]:
    """The sequences ``indices`` (default: all of ``request.num_samples``) of a run, batch
    by batch of ``batch_size``: (the first one's index, its batch's ids (n, L) on the CPU).
    Sequence i draws from its own stream seeded with (``seed``, i)
    (``genodiff.randomness.noise``): its draws are the same whatever the batch size, the process
    or the first index (a resumed run); the network's float arithmetic on a call of only a few
    rows (tokens, or sequences for a per-sequence vector) may differ in its last bits
    (docs/generating.md, "What the same seed does not fix").
    ValueError up front for a ``batch_size`` < 1 or a request that cannot fit in memory
    (``check_feasible``). ``progress`` shows the sampler's steps over all batches."""
    check_feasible(request, batch_size, backbone, held=False)
    indices = range(request.num_samples) if indices is None else indices
    device = next(backbone.parameters()).device
    backbone.eval()
    if progress is not None:
        request = replace(request, on_step=partial(progress.update, what="sampling steps"))
    starts = range(indices.start, indices.stop, batch_size)
    for index, start in enumerate(starts):
        rows = range(start, min(start + batch_size, indices.stop))
        part = replace(request, num_samples=len(rows)).part(index, len(starts))
        noise = Noise.per_sequence(seed, rows, device)
        with reused_buffers():  # the network's temporaries are reused over the steps
            ids = objective.sample(backbone, part, noise).cpu()
        yield start, ids


def draw_samples(
    objective: Objective,
    backbone: torch.nn.Module,
    request: SampleRequest,
    seed: int,
    batch_size: int,
    progress: Progress | None = None,
) -> Tensor:
    """(request.num_samples, request.length) ids, all held in memory (``draw_batches``)."""
    check_feasible(request, batch_size, backbone)
    batches = draw_batches(objective, backbone, request, seed, batch_size, progress=progress)
    return torch.cat([ids for _, ids in batches])


def memory_needed(
    request: SampleRequest, batch_size: int, vocab_size: int, held: bool = True
) -> tuple[int, int]:
    """A lower bound on the bytes sampling ``request`` takes: (on the device, one batch's
    float32 network output, batch x length x vocab x 4 bytes, with its int64 ids, x 8 bytes;
    in host memory, the int64 ids of the samples held at once: every sample, num_samples x
    length x 8 bytes, when they are ``held`` (``Model.generate``), else one batch's (streamed
    to a file, ``Model.generate_to_file``)). The network's own activations come on top, so a
    request above it cannot fit."""
    batch = min(batch_size, request.num_samples)
    kept = request.num_samples if held else batch
    return batch * request.length * (4 * vocab_size + 8), kept * request.length * 8


def check_feasible(
    request: SampleRequest, batch_size: int, backbone: torch.nn.Module, held: bool = True
) -> None:
    """ValueError for a ``batch_size`` < 1, or, saying how much memory it would take, for a
    request that cannot fit (``memory_needed`` with the backbone's declared ``vocab_size``, above
    the machine's memory) rather than an allocator error or the out-of-memory killer later;
    ``held``: whether every sample is kept in memory (else they are streamed to a file)."""
    if batch_size < 1:
        raise InputValueError(f"batch_size must be >= 1, got {batch_size}", parameter="batch_size")
    device = next(backbone.parameters()).device
    needed = memory_needed(request, batch_size, capabilities_of(backbone).vocab_size, held)
    for need, have, where in zip(needed, memory_available(device), (device, "host"), strict=True):
        if need > have:
            stream = " (or write them to a file as they are drawn)" if held else ""
            raise InputValueError(
                f"sampling {request.num_samples} x {request.length} tokens (batches of "
                f"{min(batch_size, request.num_samples)}) needs at least {size_text(need)} of "
                f"{where} memory, and this machine has {size_text(have)}; lower the length, "
                f"the batch size or the number of samples{stream}",
                parameter=("length", "batch_size", "num_samples"),
            )

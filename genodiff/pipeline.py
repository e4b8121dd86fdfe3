"""genodiff's Python front door: load a trained model, generate, score, save.

::

    import genodiff

    model = genodiff.load("outputs/demo")          # a run folder, .ckpt, export folder or Hub id
    samples = model.generate(8, length=1024, steps=128, seed=0)   # Samples: a sequence of str
    samples.save("samples.fa")                     # what `genodiff sample` writes
    nelbo = model.score(samples)                   # nats per token, as `genodiff eval --file`
    model.save_pretrained("exported/demo")         # what `genodiff export` writes

Every command of the CLI that uses a trained model is a thin shell over these calls
(``genodiff.cli``), so a Python session and a shell with the same settings and seed give the
same sequences, scores and files. ``genodiff.train``, ``genodiff.finetune``,
``genodiff.train_classifier`` and ``evaluate_samples`` (below) are the other commands'.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import torch
from torch import Tensor

from genodiff.atomic_files import items_written
from genodiff.backbones.graphed import GraphedNetwork
from genodiff.checkpoints import export_model, load_model
from genodiff.classifiers import load_classifier
from genodiff.data.base import DataModule
from genodiff.data.build import build_datamodule
from genodiff.data.training_files import DATA_FILES_KEY, locate_data, portable_record
from genodiff.data.windows import check_split
from genodiff.devices import resolve_device
from genodiff.domains import domain_of
from genodiff.errors import (
    InputValueError,
    NonFiniteOutputError,
    UserInputError,
    require_flag,
    sequence_list,
)
from genodiff.evaluate import score_sequences
from genodiff.generate import (
    SamplingPlan,
    check_feasible,
    draw_batches,
    job_stamp,
    plan,
)
from genodiff.generation_config import RUN_SECTION, GenerationConfig, check_option
from genodiff.guidance import NoisyClassifierGuide, check_label_is_a_name
from genodiff.model import GenerativeModel
from genodiff.parallel import Workers, launch_workers, process_settings, spread_asked
from genodiff.progress import TERMINAL_INTERVAL, Progress, ProgressLine, is_main_process
from genodiff.randomness.noise import seed_from
from genodiff.sample_files import SampleStream, check_output, output_path, write_samples
from genodiff.sample_formats import SamplingRun
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import Tokenizer

PathLike = str | os.PathLike


class Samples(Sequence[str]):
    """Generated sequences, immutable: a sequence of the decoded samples (``str``), with the
    token ``ids`` they were decoded from ((n, L) LongTensor, a copy at each access, so the two
    cannot disagree), their provenance ``run`` and the model's ``tokenizer``. Indexing gives
    a sample; slicing gives a ``Samples`` of those samples, each still named by its index in
    ``run`` (``indices``: ``samples[2:4].save`` writes sample_2 and sample_3, which that seed
    redraws). ``save`` writes them as ``genodiff sample`` does. Equal to another sequence of
    the same strings, in order."""

    def __init__(
        self,
        ids: Tensor,
        run: SamplingRun,
        tokenizer: Tokenizer,
        indices: Sequence[int] | None = None,
    ) -> None:
        self._ids = ids.clone()  # (n, L)
        self._texts = tuple(tokenizer.decode_sample(row.tolist()) for row in self._ids)
        self.run, self.tokenizer = run, tokenizer
        self.indices = tuple(range(len(self._ids)) if indices is None else indices)

    @property
    def ids(self) -> Tensor:
        return self._ids.clone()

    def __len__(self) -> int:
        return len(self._texts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Samples: ...

    def __getitem__(self, index: int | slice) -> str | Samples:
        if isinstance(index, slice):
            rows = list(range(len(self)))[index]  # any step, negative ones too
            picked = [self.indices[row] for row in rows]
            return Samples(self._ids[rows], self.run, self.tokenizer, picked)
        return self._texts[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return self._texts == tuple(other)

    def __hash__(self) -> int:
        return hash(self._texts)

    def __repr__(self) -> str:
        return f"Samples({list(self._texts)!r})"

    def save(
        self,
        path: PathLike,
        inputs: Sequence[tuple[str, PathLike]] = (),
        *,
        overwrite: bool = False,
    ) -> Path:
        """Write the samples to ``path`` in the format its suffix names (DNA: .fa FASTA with
        the provenance in each header; any domain: .txt, .jsonl), atomically; never over one
        of ``inputs`` ((what, path) pairs); an existing ``path`` is refused unless
        ``overwrite``, as ``genodiff sample --out`` refuses one. Returns the path."""
        overwrite = require_flag(overwrite, "overwrite")
        return write_samples(
            self._ids, path, self.run, self.tokenizer, inputs, overwrite, self.indices
        )


@dataclass(frozen=True)
class SampleFile:
    """What ``Model.generate_to_file`` wrote: ``count`` samples of ``length`` tokens at
    ``path``, drawn as ``run`` records (``main``: False in the other processes of a
    multi-process run, which wrote their share only; ``finished_before``: ``path`` was this
    call's finished file already, found by ``resume=True``, and nothing was drawn)."""

    path: Path
    count: int
    length: int
    run: SamplingRun
    main: bool = True
    finished_before: bool = False


class Model:
    """A trained generative model (``genodiff train``), ready to generate and score with its
    averaged (EMA) weights. ``load`` makes one; ``network`` is the underlying
    ``genodiff.model.GenerativeModel`` (backbone, objective, EMA copies) for lower-level use."""

    def __init__(self, network: GenerativeModel, source: str) -> None:
        self.network = network.eval()
        self.source = source
        self._graphed: GraphedNetwork | None = None  # enable_cuda_graphs
        try:
            self.generation_config = GenerationConfig.from_run_config(network.config)
        except InputValueError as err:  # an edited record: say whose, and which part
            raise InputValueError(
                f"{source}: the generation config its run saved (config.{RUN_SECTION}) is not "
                f"valid: {err}; set it right there, or export the folder again from the run's "
                ".ckpt"
            ) from None

    @property
    def generation_config(self) -> GenerationConfig:
        """``generate``'s defaults: the run's ``samples:`` section (its sampler, steps, seed,
        batch size), saved with every checkpoint and export; assign another
        ``GenerationConfig`` to change them (anything else is an InputValueError)."""
        return self._generation_config

    @generation_config.setter
    def generation_config(self, config: GenerationConfig) -> None:
        self._generation_config = _checked_generation_config(config)

    def to(
        self,
        device: str | torch.device | torch.dtype | None = None,
        dtype: torch.dtype | None = None,
    ) -> Model:
        """Move the model to ``device`` (``cpu``, ``cuda``, ``cuda:1``; checked as ``load``
        checks it) and/or cast its floating-point weights to ``dtype`` (e.g.
        ``torch.bfloat16``; alone, it may come first, as torch's ``Module.to(dtype)``); None
        leaves either as it is. Returns the model. CUDA graphs (``enable_cuda_graphs``) are
        recorded afresh on a CUDA device, and off on any other."""
        if isinstance(device, torch.dtype) and dtype is None:  # model.to(torch.bfloat16)
            device, dtype = None, device
        if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise InputValueError(
                f"dtype must be a floating-point torch dtype (torch.float32, torch.bfloat16, "
                f"torch.float16), got {dtype!r}",
                parameter="dtype",
            )
        target = None if device is None else resolve_device(device)
        self.network.to(device=target, dtype=dtype)
        if self._graphed is not None:  # recordings hold the old weights' memory
            on_cuda = self.device.type == "cuda"
            self._graphed = GraphedNetwork(self.network.eval_backbone) if on_cuda else None
        return self

    def enable_cuda_graphs(self) -> Model:
        """Replay the samplers' network call from CUDA graphs from now on
        (``genodiff.backbones.graphed``): the same sequences, one launch per call instead of
        one per kernel. Needs the model on a CUDA device. Returns the model."""
        if self.device.type != "cuda":
            raise InputValueError(
                f"CUDA graphs need the model on a CUDA device; it is on {self.device} "
                "(load it with device='cuda')",
                parameter="cuda_graphs",
            )
        self._graphed = GraphedNetwork(self.network.eval_backbone)
        return self

    @property
    def tokenizer(self) -> Tokenizer:
        return self.network.tokenizer

    @property
    def config(self) -> dict[str, Any]:
        """The run's completed config (model, objective, data, ... sections)."""
        return self.network.config

    @property
    def classes(self) -> list[str] | None:
        """The class names of a class-conditional model, in label-id order; None otherwise."""
        return self.network.class_names

    @property
    def device(self) -> torch.device:
        return next(self.network.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The floating-point weights' dtype (``Model.to``'s)."""
        return next(p.dtype for p in self.network.parameters() if p.is_floating_point())

    def __repr__(self) -> str:
        objective, backbone = self.config["objective"]["name"], self.config["model"]["name"]
        classes = f", classes={self.classes}" if self.classes else ""
        return f"Model({self.source!r}, {objective} on {backbone}{classes}, {self.device})"

    def generate(
        self,
        num_samples: int,
        length: int | None = None,
        *,
        generation_config: GenerationConfig | None = None,
        generator: torch.Generator | None = None,
        progress: bool | Progress = False,
        **options: Any,
    ) -> Samples:
        """``num_samples`` sequences, the same as ``genodiff sample`` draws with the same
        options and seed.

        ``options`` are the fields of ``genodiff.generation_config.GenerationConfig`` (sampler,
        steps, temperature, top_p, prefix, infill, block, stride, label, guidance and its
        schedule, classifier and its form, guidance_form, seed, batch_size; ``length`` may
        also come second): each one given here wins over ``generation_config`` (default: the
        model's, ``Model.generation_config``, from its run's ``samples:`` section), which wins
        over the defaults; an option given as None is not given. An unknown option, or a value
        of the wrong type or out of range, is an InputValueError naming it.
        ``generator``: a ``torch.Generator`` to draw the seed from instead of ``seed`` (one
        number from it; sequence i then draws from its own stream of (seed, i), as with
        ``seed``, so the batch size changes no draw; ``samples.run.seed`` records it).
        ``progress`` shows the steps."""
        job = self._plan(num_samples, length, options, generation_config, generator)
        check_feasible(job.request, job.batch_size, self.network.eval_backbone)  # all held
        with _progress_bar(progress) as bar:
            batches = self._draw(job, range(num_samples), bar)
            ids = torch.cat([batch for _, batch in batches])
        return Samples(ids, job.run, self.tokenizer)

    def generate_to_file(
        self,
        path: PathLike,
        num_samples: int,
        length: int | None = None,
        *,
        resume: bool = False,
        overwrite: bool = False,
        accelerator: str | None = None,
        devices: int | str | None = None,
        num_nodes: int | None = None,
        inputs: Sequence[tuple[str, PathLike]] = (),
        progress: bool | Progress = False,
        generation_config: GenerationConfig | None = None,
        generator: torch.Generator | None = None,
        **options: Any,
    ) -> SampleFile:
        """``generate``'s sequences (``generation_config``, ``generator``, ``options``: as
        there; the same seed gives the same sequences) written to ``path`` as they are drawn,
        batch by batch: memory stays that of a batch whatever ``num_samples``. The file
        appears complete or not at all (``genodiff.sample_files.SampleStream``); a run killed
        on the way leaves its staged work, and the same call with ``resume=True`` goes on
        after the last complete batch and ends with the file an uninterrupted run writes, byte
        for byte. An existing ``path`` is refused unless ``overwrite``. ``devices`` /
        ``num_nodes`` (with ``accelerator``, as Lightning's; ``accelerator`` alone, which would
        change nothing, is refused): the sequences are drawn by that
        many processes, each a block of them (``genodiff.parallel``) on its own device, into
        one file; the model is back on its device afterwards. ``inputs``: (what, path) pairs
        the output must not overwrite (``genodiff sample``'s checkpoint, template,
        classifier). Returns what was written (in the other processes of a multi-process run:
        ``main`` False)."""
        path = output_path(path)  # as check_output reads it: the part files lie beside it
        resume, overwrite = require_flag(resume, "resume"), require_flag(overwrite, "overwrite")
        spread = spread_asked(accelerator, devices, num_nodes)
        job = self._plan(num_samples, length, options, generation_config, generator)
        settings = process_settings(accelerator, devices, num_nodes)

        def stream_to(target: Path, replace: bool, block: range | None = None) -> SampleStream:
            whole = target == path  # the main process's: its shares are staged beside it
            reads, shares = (inputs, _part_files(target)) if whole else ((), [])
            stamp = {"settings": settings, **job_stamp(job.request, job.run, self.dtype)}
            return SampleStream(
                target, job.run, self.tokenizer, num_samples, job.request.length, reads, resume,
                replace, stamp, block, shares,
            )  # fmt: skip

        # The output is checked before any other process starts or anything is drawn.
        stream = stream_to(path, overwrite) if is_main_process() else None
        try:
            workers = launch_workers(settings) if spread else Workers()
        except BaseException:  # settings Lightning refuses: nothing written, nothing held
            if stream is not None:
                stream.release()
            raise
        share = workers.block(num_samples)
        # The main process's verdict, in every process: --resume found the file finished.
        finished = workers.gather(stream.complete if workers.main else None)[0]
        if finished and not workers.main:  # nothing to draw here either
            workers.wait_for_all()
            return SampleFile(path, num_samples, job.request.length, job.run, False, True)
        if not workers.main:  # another process: its block into a part file of its own
            part = _part_file(path, workers)
            stream = stream_to(part, True, share)
        todo = range(share.start + stream.done, share.stop)  # empty once ``complete``
        placed = self._placed_on(workers.device)  # its own device; back on the model's after
        try:
            with placed, _progress_bar(progress if workers.main else False) as bar:
                shown = bar
                if bar is not None and bar.enabled and workers.world_size > 1 and not finished:
                    shown = _RunProgress(bar, path, workers, num_samples, stream)
                for start, ids in self._draw(job, todo, shown):
                    stream.write(start, ids)
                if not workers.main:
                    stream.finish()
                with shown.waiting() if isinstance(shown, _RunProgress) else nullcontext():
                    workers.wait_for_all()
        except BaseException:
            stream.release()  # the staged work stays for resume=True, in this process too
            raise
        written = SampleFile(
            path, num_samples, job.request.length, job.run, workers.main, stream.complete
        )
        if not workers.main:
            return written
        for rank in range(1, workers.world_size):  # the other processes' blocks, in order
            other = Workers(rank, workers.world_size)
            part, block = _part_file(path, other), other.block(num_samples)
            if stream.done < block.stop:
                stream.append_file(part, len(block))
            part.unlink(missing_ok=True)
        stream.finish()
        return written

    def _plan(
        self,
        num_samples: int,
        length: int | None,
        options: dict[str, Any],
        generation_config: GenerationConfig | None = None,
        generator: torch.Generator | None = None,
    ) -> SamplingPlan:
        """``genodiff.generate.plan`` of ``generate``'s arguments for this model: ``options``
        over ``generation_config`` (default: the model's), the seed drawn from ``generator``
        when given, the classifier loaded when given as a path."""
        if generation_config is None:
            base = self.generation_config
        else:
            base = _checked_generation_config(generation_config)
        check_label_is_a_name(options.get("label"), self.classes, self.source)
        options = {"length": length, **options}
        config = base.updated(**options)
        given = {name for name, value in options.items() if value is not None}
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputValueError(
                f"generator must be a torch.Generator, got {type(generator).__name__}",
                parameter="generator",
            )
        if generator is not None:
            if "seed" in given:
                raise InputValueError(
                    "give a seed or a generator, not both: the generator draws the seed",
                    parameter="seed",
                )
            config = config.updated(seed=seed_from(generator))
        classifier = config.classifier
        if classifier is not None and not isinstance(classifier, NoisyClassifierGuide):
            # plan checks its noisy states against the generator's, loaded here or in Python
            try:
                guide = load_classifier(classifier, self.device)
            except UserInputError as err:  # the classifier is at fault, whatever it says
                err.parameter = "classifier"
                raise
            config = dataclasses.replace(config, classifier=guide)
        return plan(self.network, self.source, num_samples, config, given)

    @contextmanager
    def _placed_on(self, device: torch.device | None) -> Iterator[None]:
        """The model on ``device`` inside the block (None: where it is), back after."""
        home = self.device
        if device is None or device == home:
            yield
            return
        self.to(device)
        try:
            yield
        finally:
            self.to(home)

    def _draw(
        self, job: SamplingPlan, indices: range, progress: ProgressLine | None
    ) -> Iterator[tuple[int, Tensor]]:
        """``genodiff.generate.draw_batches`` of ``job`` for the sequences ``indices``."""
        network = self.network
        end = self._ending()
        try:
            for start, ids in draw_batches(
                network.eval_objective,
                self._graphed or network.eval_backbone,
                job.request,
                job.seed,
                job.batch_size,
                indices,
                progress,
            ):
                yield start, end(ids, job.request.given)
        except NonFiniteOutputError as err:
            raise NonFiniteOutputError(f"{self.source}: {err}") from None

    def _ending(self) -> Callable[[Tensor, Tensor | None], Tensor]:
        """How drawn ids (n, L), with the positions the user gave (L,) or None, end as a
        window of the run's data ends (``DataModule.end_samples``: text's padded sentences at
        their first [SEP] after the last given token); as they are for a model built without a
        data section."""
        if "data" not in self.config:
            return lambda ids, given: ids
        datamodule = build_datamodule(self.config["data"])
        datamodule.attach_tokenizer(self.tokenizer)
        return datamodule.end_samples

    def score(
        self,
        sequences: Iterable[str],
        *,
        t_samples: int | None = None,
        seed: int = 0,
        batch_size: int = 16,
    ) -> list[float]:
        """Each sequence's NELBO (diffusion: a bound; AR: the exact NLL) in nats per scored
        token, in order, read and scored as ``genodiff eval --file`` reads and scores one
        window of a file (DNA: either case; N and the IUPAC ambiguity codes are missing data,
        never scored; any other letter, or a sequence with no base, is an InputValueError
        naming the sequence by its index; a list, not one str), with ``t_samples`` noise draws per
        sequence (default: the objective's) from ``seed``, keyed by ``seed`` and the
        sequence's tokens: a sequence's score is the same alone or among others, in any order
        and under any ``batch_size`` (a time-conditioned model's up to its last bits:
        docs/generating.md, "What the same seed does not fix"). A class-conditional model
        scores p(x) (the null label)."""
        sequences = sequence_list(sequences)
        seed, batch_size = check_option("seed", seed), check_option("batch_size", batch_size)
        return score_sequences(self.network, sequences, t_samples, seed, batch_size)

    def windows(
        self, split: str = "test", **data_files: PathLike | Mapping[str, PathLike]
    ) -> list[str]:
        """Real sequences to compare samples with: every window of ``split`` ("train",
        "valid" or "test") of the data the run was trained on, cut as training cuts them
        (genome data: the bases, upper case, no reverse complement; a class-conditional
        model's: every class's sequences).

        The data files are where the run or the shipped model names them
        (``genodiff.data.training_files.locate_data``); ``data_files`` point at copies
        instead, by the ``data:`` key naming each (``fasta=PATH``; for a mapping key, some of
        its entries: ``fasta_by_label={"human": PATH}``), each checked against the content
        sha256 the model recorded. A file that is nowhere is one InputFileNotFoundError
        naming it, its sha256 and where to get it."""
        split = check_split(split)  # before the data files are looked for
        return self.data_module(**data_files).window_texts(split)

    def class_windows(
        self, split: str = "test", **data_files: PathLike | Mapping[str, PathLike]
    ) -> dict[str, list[str]]:
        """A class-conditional model's ``windows``, by class name (``classes``): the real DNA
        of each class to compare its guided samples with; the data files as ``windows``."""
        if self.classes is None:
            raise InputValueError(
                "this model was not trained on labelled data: it has no classes; use "
                "model.windows(split)",
                parameter="split",
            )
        split = check_split(split)  # before the data files are looked for
        return self.data_module(**data_files).window_texts_by_class(split)

    def data_module(self, **data_files: PathLike | Mapping[str, PathLike]) -> DataModule:
        """The run's data module, built from its data files (found as ``windows`` finds them;
        ``data_files`` as there) and tokenized by this model's tokenizer: its splits'
        datasets (``dataset_of(split)``) give each window's ids and, for labelled data, its
        class."""
        data = locate_data(
            self.config["data"],
            self.network.provenance.get(DATA_FILES_KEY),
            data_files,
            point="then give its path: model.windows(split, {keyword})",
        )
        datamodule = build_datamodule(data)
        datamodule.attach_tokenizer(self.tokenizer)
        return datamodule

    def save_pretrained(
        self,
        folder: PathLike,
        *,
        weights: str = "ema",
        overwrite: bool = False,
        portable_data: bool = False,
        data_source: str | None = None,
    ) -> Path:
        """Write the model as ``genodiff export`` does (config.json, model.safetensors,
        tokenizer.json and genodiff.json: the run's config and record), which ``load``, every
        command and the Hub read back; ``weights`` "ema" (the averaged weights, what sampling
        uses) or "raw" (the trained ones, from a .ckpt only), and ``generation_config`` (its
        sampler, steps, seed and batch_size, as the run's ``samples:`` section: an option no
        run section holds, set away from its default, is an InputValueError, not lost, and so is a
        sampler this model has not).
        A model saved in ``folder`` before is refused unless ``overwrite``, which replaces all
        of its files (``genodiff.checkpoints.folders.OWNED_FILES``); others there are kept.
        ``portable_data``: for a model that ships to other machines (bench/ship_model.py), the
        config names no path of this one: its data files by their repository path or their
        name, recorded with the sha256 of their content and, for the files not in the
        repository, ``data_source`` (where to get them), so that ``windows`` finds them or says
        which they are (``genodiff.data.training_files.portable_record``)."""
        overwrite = require_flag(overwrite, "overwrite")
        portable_data = require_flag(portable_data, "portable_data")
        if data_source is not None and not portable_data:
            raise InputValueError(
                "data_source says where to get the data files of a portable export; give it "
                "with portable_data=True",
                parameter="data_source",
            )
        self._check_saved_sampler()
        # generation_config as load reads it back: the run's samples: section
        samples = {**(self.config.get(RUN_SECTION) or {}), **self.generation_config.run_section()}
        config = {**self.config, RUN_SECTION: samples}
        known = self.network.provenance.get(DATA_FILES_KEY)  # a model exported so before
        portable = portable_record(config, data_source, known) if portable_data else None
        entries = portable or {"config": config}
        return export_model(self.network, folder, weights, overwrite, record_entries=entries)

    def _check_saved_sampler(self) -> None:
        """InputValueError, before anything is written, when ``generation_config`` names a
        sampler this model cannot run: saved, every ``generate`` of the folder that relies on
        it (and ``genodiff sample`` without ``--sampler``) would fail."""
        request = SampleRequest(1, 1, sampler=self.generation_config.sampler)
        try:
            self.network.objective.sampler_name(request)
        except InputValueError as err:
            raise InputValueError(
                f"the generation config cannot be saved with this model: {err}",
                parameter="generation_config",
            ) from None


def load(
    reference: PathLike,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> Model:
    """The trained model ``reference`` names: a run's output folder (its
    ``checkpoints/last.ckpt``), a .ckpt, a folder from ``genodiff export`` /
    ``Model.save_pretrained``, a shipped model's name (``mdlm-chrx``; ``genodiff models``
    lists them), or a Hugging Face Hub id ``org/name[@revision]`` of a .ckpt or folder; on
    ``device`` (default: the CPU, as transformers' ``from_pretrained``: ask for ``"cuda"``
    here or move it with ``Model.to``), its floating-point weights in ``dtype`` (default:
    float32, whatever the files store: a model saved in bfloat16 reads back in float32). Its
    generation config (``Model.generation_config``) is the one its run saved. Nothing is
    unpickled beyond tensors and plain containers: a checkpoint cannot run code
    (``genodiff.checkpoints``)."""
    network = load_model(reference, resolve_device("cpu" if device is None else device))
    return Model(network, str(reference)).to(dtype=dtype)


def check_samples_output(
    model: Model, path: PathLike, inputs: Sequence[tuple[str, PathLike]]
) -> Path:
    """``path`` as a place ``Samples.save`` may write ``model``'s samples to (a format of its
    domain, not a folder, not one of ``inputs``), checked before anything is drawn."""
    return check_output(path, domain_of(model.tokenizer), inputs)


def _checked_generation_config(config: GenerationConfig) -> GenerationConfig:
    """``config``, an InputValueError unless it is a ``GenerationConfig``."""
    if not isinstance(config, GenerationConfig):
        raise InputValueError(
            f"generation_config must be a genodiff GenerationConfig, got {type(config).__name__}",
            parameter="generation_config",
        )
    return config


@contextmanager
def _progress_bar(progress: bool | Progress) -> Iterator[Progress | None]:
    """The progress display ``progress`` asks for: a new one (True, closed at the end), the
    caller's (a ``Progress``) or none."""
    if not isinstance(progress, bool | Progress):
        raise InputValueError(
            f"progress must be True, False or a genodiff Progress, got {progress!r}",
            parameter="progress",
        )
    if progress is True:
        with Progress("genodiff") as bar:
            yield bar
    else:
        yield progress or None


def _part_file(path: Path, workers: Workers) -> Path:
    """Where process ``workers.rank`` of a multi-process run writes its block of samples: a
    hidden file beside ``path``, in its format."""
    return path.with_name(f".{path.stem}.part{workers.rank}of{workers.world_size}{path.suffix}")


class _RunProgress:
    """The progress line of a multi-process ``generate_to_file`` in its main process: the
    samples of the whole run written so far by every process, of all ``num_samples``. This
    process's own are ``stream``'s; the other processes' are read from the records of their
    part files (``items_written``) at most once per ``bar.interval`` seconds, so that no
    process waits for another to be counted. Each sampler step of this process redraws it
    (``update``: the line counts samples, not this process's steps), and so does a thread
    while this process waits for the others (``waiting``)."""

    def __init__(
        self, bar: Progress, path: Path, workers: Workers, num_samples: int, stream: SampleStream
    ) -> None:
        self.bar, self.num_samples, self.stream = bar, num_samples, stream
        others = [Workers(rank, workers.world_size) for rank in range(1, workers.world_size)]
        self.shares = [(_part_file(path, other), other.block(num_samples)) for other in others]
        self.written = [0] * len(self.shares)  # each other process's samples, as last read
        self.read_at: float | None = None

    def update(self, done: float, total: float | None, what: str) -> None:
        """A sampler step of this process (``done`` of its ``total`` steps): redraw."""
        self.show()

    def show(self) -> None:
        """Draw the line (as ``Progress.update`` draws, at most once per interval), the other
        processes' records read again when an interval has passed since the last reading."""
        now = time.monotonic()
        if self.read_at is None or now - self.read_at >= self.bar.interval:
            self.read_at = now
            # a share's count only grows: a reading as its part file is renamed may miss it
            self.written = [
                max(before, _share_written(part, block))
                for before, (part, block) in zip(self.written, self.shares, strict=True)
            ]
        self.bar.update(self.stream.done + sum(self.written), self.num_samples, "samples")

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The block (the wait for the other processes) with the line redrawn as they write,
        and drawn once more when it ends."""
        stop = threading.Event()

        def redraw() -> None:
            while not stop.wait(TERMINAL_INTERVAL):
                self.show()

        thread = threading.Thread(target=redraw, name="genodiff-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        self.read_at = None  # every share is written now: read them all again
        self.show()


def _share_written(part: Path, block: range) -> int:
    """The samples of ``block`` another process has written to its ``part`` file so far: all
    once the file is finished."""
    written = items_written(part)
    if written is not None:
        return written
    return len(block) if part.exists() else 0


def _part_files(path: Path) -> list[Path]:
    """The other processes' shares of a run writing ``path`` (of any number of processes)
    that are beside it: their ``_part_file``, finished or staged (``StagedFile``'s name)."""
    part = rf"\.{re.escape(path.stem)}\.part\d+of\d+{re.escape(path.suffix)}"
    found = path.parent.glob(f"*.{glob.escape(path.stem)}.part*")  # a valid pattern for any name
    return sorted(p for p in found if re.fullmatch(rf"{part}|\.{part}\.partial", p.name))

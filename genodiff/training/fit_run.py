"""The part of a training run (``genodiff.training.run.train``) that needs Lightning, once
the config and the data files have passed their checks: the checks that need the model or the
Trainer, then the training, the report of its best checkpoint and test score, and the samples
of its ``samples:`` section: of each class for a class-conditional run
(``samples_<class>.<ext>``, the label in the headers), else one file (``samples.<ext>``).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import lightning as L
from omegaconf import DictConfig, OmegaConf

from genodiff.checkpoints import run_folder
from genodiff.checkpoints.folders import init_backbones
from genodiff.checkpoints.io import read_checkpoint_file
from genodiff.checkpoints.load import weights_digest
from genodiff.config import ConfigError
from genodiff.data.base import DataModule
from genodiff.data.labelled import class_count_lines
from genodiff.domains import domain_of
from genodiff.errors import InputValueError
from genodiff.generate import cast_dtype, draw_samples
from genodiff.guidance import Guidance
from genodiff.objectives.base import LIKELIHOOD_WORDS
from genodiff.progress import Progress, counted, is_main_process
from genodiff.sample_files import write_samples
from genodiff.sample_formats import SamplingRun
from genodiff.samplers.base import Sampler
from genodiff.samplers.request import SampleRequest
from genodiff.trained_window import check_backbone_length, warn_beyond_trained_window
from genodiff.training.lightning_data import LightningData
from genodiff.training.module import GenerativeTrainingModule
from genodiff.training.run_checks import (
    ema_settings,
    warn_ema_stays_near_init,
    warn_gpu_scale_on_cpu,
)
from genodiff.training.session import check_output, exit_when_stopped, fit, hold_output
from genodiff.training.trainer import build_trainer, checkpoint_reads_unsaid, prepare_tokenizer

RESUME_HINT = "Resume it with ckpt_path=last"
# A stop once trainer.max_steps is reached: the training is done, what follows it is not.
DONE_HINT = (
    "Its training is complete (a resume would have no step left to train), but its test score "
    "and samples were not made: genodiff eval --checkpoint and genodiff sample --checkpoint "
    "take its best-step*.ckpt or last.ckpt"
)


def fit_run(
    cfg: DictConfig,
    config: str | Path,
    datamodule: DataModule,
    classes: list[str] | None,
    show: bool,
) -> Path:
    """Train the run of ``cfg`` (composed from ``config`` and checked, with its data files:
    ``datamodule``, the class names of its labelled data, ``classes``) and finish it; returns
    its folder, as an absolute path. ``show``: the training's progress and the sampling line."""
    out = Path(cfg.output_dir)
    resume = run_folder.resume_checkpoint(cfg.ckpt_path, out)  # read once, checked
    resumed = resume.source if resume else None
    check_output(out, resumed, RESUME_HINT, config)
    tokenizer = prepare_tokenizer(cfg, datamodule)
    datamodule.attach_tokenizer(tokenizer)
    L.seed_everything(cfg.seed, workers=True, verbose=False)  # a refused run says one line
    model = GenerativeTrainingModule(OmegaConf.to_container(cfg, resolve=True), tokenizer)
    # Another model, window or tokenizer than the checkpoint's, or no step left: refused.
    changes = run_folder.check_resume(model.config, resume) if resume else []
    if is_main_process():  # only rank 0 writes checkpoints: hashing once is enough
        model.record_data(datamodule)
    # A window or sample longer than the backbone reads (HyenaDNA's filter) fails here.
    window = cfg.data.get("max_length")
    check_backbone_length(model.backbone, window, "data.max_length", training=True)
    s = cfg.samples
    if s.num_samples:
        check_backbone_length(model.backbone, s.length, "samples.length", training=True)
    request = SampleRequest(max(s.num_samples, 1), s.length, steps=s.steps, sampler=s.sampler)
    check_run_sampler(model.objective.samplers, s.sampler)
    try:  # an unknown sampler fails before training, named by its config key
        sampler = model.objective.sampler_name(request)
    except InputValueError as err:
        raise ConfigError(f"samples.sampler={s.sampler}: {err}") from err
    if s.num_samples:  # the run's own samples, said before it trains
        samplers = model.objective.samplers
        warn_beyond_trained_window(
            model.config, s.length, None, sampler, samplers, tokenizer.unit, run_samples=True
        )
    if cfg.init_from and not cfg.ckpt_path:  # a folder that does not fit fails here
        init_backbones((model.backbone, *([model.ema.module] if model.ema else [])), cfg.init_from)
        print(f"genodiff: backbone initialised from {cfg.init_from}")
    # Windows that cannot be cut (length, split) fail here, before the Trainer logs a line.
    datamodule.dataset_of("valid")
    try:  # writes nothing yet; a trainer setting that cannot work fails
        trainer = build_trainer(cfg, progress_bar=show)
    except ValueError as err:  # Lightning refuses the trainer section's settings
        raise ConfigError(str(err)) from err
    if resume:  # Lightning's read of it takes what the checks read (io.AtomicCheckpointIO)
        trainer.strategy.checkpoint_io.hand_over(resume.source, resume.content)
    datamodule.check_batch_size(trainer.world_size)  # a batch above the train split fails
    # Said once every check has passed: a refused run says its one line alone.
    warn_ema_stays_near_init(*ema_settings(cfg), cfg.trainer.get("max_steps"))
    if trainer.strategy.root_device.type == "cpu" and not resume:  # a resumed one was begun
        windows = datamodule.batch_size * trainer.world_size * trainer.accumulate_grad_batches
        weights = sum(p.numel() for p in model.backbone.parameters())
        warn_gpu_scale_on_cpu(cfg.trainer.get("max_steps"), windows, window, weights)
    with hold_output(out, model.config) as main_process:
        if main_process:
            if changes:
                print(f"genodiff: resuming {resumed} with: {', '.join(changes)}", file=sys.stderr)
            tokenizer.save(out)
            print(f"genodiff: training {cfg.name}; outputs in {out}")
            if classes is not None:
                for line in class_count_lines(datamodule):
                    print(line)
        data = LightningData(datamodule)
        fit(trainer, model, "train", RESUME_HINT, DONE_HINT, datamodule=data, ckpt_path=resumed)
        with exit_when_stopped(trainer, "train", RESUME_HINT, DONE_HINT):  # in the test
            finish(cfg, model, trainer, datamodule, request, sampler, show)
    return out.absolute()


def finish(
    cfg: DictConfig,
    model: GenerativeTrainingModule,
    trainer: L.Trainer,
    datamodule: DataModule,
    request: SampleRequest,
    sampler: str,
    show: bool,
) -> None:
    """Report the best checkpoint, score it on the test split (every process of a DDP run takes
    part) and draw the samples (rank 0 alone): of each class for a class-conditional run
    (``samples_<class>.fa``, label in the headers), else one file (``samples.fa``). ``show``:
    a progress line for each file's sampling, its clock and rate counted from that file's
    start (not from the test scoring, nor from the previous file's first step)."""
    out, s, tokenizer = Path(cfg.output_dir), cfg.samples, model.tokenizer
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint.best_model_score is not None else ""
    likelihood = model.objective.likelihood
    what = LIKELIHOOD_WORDS[likelihood][1]  # of the NLL: exact, bound, ...
    measure = "NLL" if likelihood == "exact" else "NELBO"  # an AR model's is no bound
    report = []
    if best:
        score = float(checkpoint.best_model_score)
        report.append(
            f"genodiff: best val/nelbo {score:.4f} nats/token (perplexity "
            f"{math.exp(score):.4f}, {what}) at {best}"
        )
    weights = checkpoint.last_model_path or "in-memory"  # the weights `model` holds now
    step = trainer.global_step
    if cfg.evaluate_test and not best:  # no validation, or the resumed run's best elsewhere
        t = cfg.trainer
        if cfg.ckpt_path:  # validations may have run before the resume, into another folder
            why = f"no validation ran since the resume, and none before it is in {out}"
        else:
            why = (
                f"no validation ran (trainer.max_steps={t.max_steps} ended the run before "
                f"trainer.val_check_interval={t.get('val_check_interval')} was reached)"
            )
        report.append(
            f"genodiff: {why}, so there is no best checkpoint: the test score is of the last "
            f"weights ({weights})"
        )
    if cfg.evaluate_test:
        tested = best or checkpoint.last_model_path or None  # None: the weights held now
        with checkpoint_reads_unsaid():  # the report names the checkpoint tested
            (result,) = trainer.test(
                model, datamodule=LightningData(datamodule), ckpt_path=tested, verbose=False
            )
        if best:
            weights = best  # trainer.test loaded them into `model`
            step = int(read_checkpoint_file(best, mmap=True)["global_step"])
        report.append(
            f"genodiff: test {measure} {result['test/nelbo']:.4f} nats/token, perplexity "
            f"{result['test/ppl']:.4f} ({what})"
            + (
                f" (true label); {result['test/nelbo_unconditional']:.4f} with the null label"
                if "test/nelbo_unconditional" in result
                else ""
            )
        )
    if not trainer.is_global_zero:
        return
    for line in report:
        print(line)
    if s.num_samples <= 0:
        return
    steps = model.eval_objective.steps_used(request)
    unlabelled = SamplingRun(
        checkpoint=weights,
        sampler=sampler,
        steps=steps,
        seed=s.seed,
        checkpoint_step=step,
        weights_crc32=weights_digest(model),
        dtype=cast_dtype(model.eval_backbone),  # trainer.precision=bf16-true: bfloat16
    )
    file = Path(domain_of(tokenizer).samples_file)
    jobs = [(request, unlabelled, file)]  # (request, provenance, file name)
    if model.class_names is not None and model.eval_objective.samplers[sampler].guided:
        jobs = []
        names = class_sample_files(file, model.class_names)
        for index, name in enumerate(model.class_names):  # p(x | class), one file each
            labelled = replace(request, guidance=Guidance(index, label_name=name))
            labelled = model.eval_objective.resolve_guidance(labelled)
            jobs.append((labelled, replace(unlabelled, guidance=labelled.guidance), names[index]))
    for job_request, run, name in jobs:
        with Progress("genodiff train", enabled=show) as progress:
            samples = draw_samples(
                model.eval_objective,
                model.eval_backbone,
                job_request,
                s.seed,
                s.batch_size,
                progress,
            )
        # the run folder's own file: a resumed or re-run training writes it again
        ends = datamodule.end_samples(samples, job_request.given)
        path = write_samples(ends, out / name, run, tokenizer, overwrite=True)
        print(
            f"genodiff: wrote {counted(s.num_samples, 'sample')} of {s.length} {tokenizer.unit} "
            f"to {path}"
        )


def check_run_sampler(samplers: Mapping[str, Sampler], name: str | None) -> None:
    """ConfigError for a ``samples.sampler`` that needs settings (``Sampler.needs``: semi-ar's
    block and stride) that the samples section does not hold: the run's samples, and every
    draw from the trained model with its generation config, would fail for want of them."""
    needs = samplers[name].needs if name in samplers else ()
    if needs:
        others = [other for other, sampler in samplers.items() if not sampler.needs]
        raise ConfigError(
            f"samples.sampler: {name!r} needs {' and '.join(needs)} for each draw, which the "
            f"samples section does not set; choose one of {', '.join(others)} for the run's "
            f"samples, and draw {name} sequences from the trained model (genodiff sample, "
            "Model.generate) with its settings"
        )


def class_sample_files(file: Path, class_names: Sequence[str]) -> list[Path]:
    """The file of each class's samples beside ``file`` (``samples_NAME.fa``): NAME is the
    class name with any character but letters, digits, ``_``, ``.`` and ``-`` as ``_``; where
    two names would then give one file (``a b`` and ``a_b``; ``Human`` and ``human`` on a file
    system that ignores case) every NAME is led by its class's index (``samples_0_a_b.fa``), so
    no class's samples overwrite another's."""
    safe = [re.sub(r"[^A-Za-z0-9_.-]", "_", name) for name in class_names]
    if len({name.lower() for name in safe}) < len(safe):
        safe = [f"{index}_{name}" for index, name in enumerate(safe)]
    return [file.with_stem(f"{file.stem}_{name}") for name in safe]

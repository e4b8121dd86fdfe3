"""The ``genodiff`` command: train | eval | sample | export | info | data."""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from genodiff.errors import InputValueError, UserInputError
from genodiff.progress import PROGRESS_ENV, Progress, progress_wanted

if TYPE_CHECKING:
    from lightning import LightningDataModule, Trainer
    from omegaconf import DictConfig

    from genodiff.samplers.request import SampleRequest
    from genodiff.training.module import GenerativeTrainingModule


def _train(args: argparse.Namespace) -> None:
    import lightning as L
    from lightning.pytorch.utilities.exceptions import SIGTERMException
    from omegaconf import OmegaConf

    from genodiff.checkpoints import init_backbone, run_folder
    from genodiff.conditioning import record_class_names
    from genodiff.config import ConfigError, load_config
    from genodiff.data.build import build_datamodule
    from genodiff.data.labelled import class_count_lines
    from genodiff.samplers.request import SampleRequest
    from genodiff.training.module import GenerativeTrainingModule
    from genodiff.training.trainer import build_trainer, prepare_tokenizer

    # Every check comes before the first write into output_dir.
    cfg = load_config(args.config, args.overrides)
    run_folder.check_steps(cfg.trainer)  # a run that would train nothing
    datamodule = build_datamodule(cfg.data)
    datamodule.check_files()  # missing data fails here, before any model setup
    classes = datamodule.class_names()
    if classes is not None:  # labelled data: a class-conditional model (genodiff.conditioning)
        record_class_names(cfg, classes)
    out = Path(cfg.output_dir)
    resume = run_folder.resume_checkpoint(cfg.ckpt_path, out)
    # Rank 0 owns output_dir; the other processes of a DDP run (started once rank 0 has taken
    # it, or together with it under SLURM/torchrun) neither check nor write it.
    main_process = run_folder.is_main_process()
    if main_process:
        run_folder.check_output_dir(out, resume)
    tokenizer = prepare_tokenizer(cfg, datamodule)
    datamodule.attach_tokenizer(tokenizer)
    L.seed_everything(cfg.seed, workers=True)
    model = GenerativeTrainingModule(OmegaConf.to_container(cfg, resolve=True), tokenizer)
    # Another model, window or tokenizer than the checkpoint's, or no step left: refused.
    changes = run_folder.check_resume(model.config, resume) if resume else []
    if main_process:  # hashing the data files once is enough: only rank 0 writes checkpoints
        model.record_data(datamodule)
    s = cfg.samples
    request = SampleRequest(max(s.num_samples, 1), s.length, steps=s.steps, sampler=s.sampler)
    sampler = model.objective.sampler_name(request)  # an unknown sampler fails before training
    if cfg.init_from and not cfg.ckpt_path:  # a folder that does not fit fails here
        init_backbone(model.backbone, cfg.init_from)
        if model.ema is not None:  # the average starts from the same weights
            init_backbone(model.ema.module, cfg.init_from)
        print(f"genodiff: backbone initialised from {cfg.init_from}")
    try:  # writes nothing yet; a trainer setting that cannot work fails
        trainer = build_trainer(cfg, progress_bar=progress_wanted(args.no_progress))
    except ValueError as err:  # Lightning refuses the trainer section's settings
        raise ConfigError(str(err)) from err
    # Windows that cannot be cut (length, split) and a batch above the train split fail here.
    datamodule.dataset_of("valid")
    datamodule.check_batch_size(trainer.world_size)
    with run_folder.hold(out) if main_process else contextlib.nullcontext():
        if main_process:
            if changes:
                print(f"genodiff: resuming {resume} with: {', '.join(changes)}", file=sys.stderr)
            OmegaConf.save(OmegaConf.create(model.config), out / "config.yaml")
            tokenizer.save(out)
            print(f"genodiff: training {cfg.name}; outputs in {out}")
            if classes is not None:
                for line in class_count_lines(datamodule):
                    print(line)
        try:
            trainer.fit(model, datamodule=datamodule, ckpt_path=resume)
        except SIGTERMException:
            print(
                f"genodiff train: stopped by SIGTERM at step {trainer.global_step}; saved "
                f"{trainer.checkpoint_callback.last_model_path}. Resume with ckpt_path=last",
                file=sys.stderr,
            )
            raise SystemExit(128 + signal.SIGTERM) from None
        with _progress(args) as progress:
            _after_training(cfg, model, trainer, datamodule, request, sampler, progress)


def _after_training(
    cfg: DictConfig,
    model: GenerativeTrainingModule,
    trainer: Trainer,
    datamodule: LightningDataModule,
    request: SampleRequest,
    sampler: str,
    progress: Progress,
) -> None:
    """Report the best checkpoint, score it on the test split (every process of a DDP run takes
    part) and draw the samples (rank 0 alone): of each class for a class-conditional run
    (``samples_<class>.fa``, label in the headers), else one file (``samples.fa``)."""
    import re
    from dataclasses import replace

    from genodiff.domains import domain_of
    from genodiff.generate import SamplingRun, draw_samples
    from genodiff.sample_files import write_samples

    out, s, tokenizer = Path(cfg.output_dir), cfg.samples, model.tokenizer
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint.best_model_score is not None else ""
    kind = "exact" if model.objective.exact_likelihood else "bound"
    report = []
    if best:
        score = float(checkpoint.best_model_score)
        report.append(
            f"genodiff: best val/nelbo {score:.4f} nats/token (perplexity {kind} "
            f"{math.exp(score):.4f}) at {best}"
        )
    weights = checkpoint.last_model_path or "in-memory"  # the weights `model` holds now
    if cfg.evaluate_test and best:
        (result,) = trainer.test(model, datamodule=datamodule, ckpt_path=best, verbose=False)
        weights = best  # trainer.test loaded them into `model`
        report.append(
            f"genodiff: test NELBO {result['test/nelbo']:.4f} nats/token, perplexity {kind} "
            f"{result['test/ppl']:.4f}"
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
    unlabelled = SamplingRun(checkpoint=weights, sampler=sampler, steps=steps, seed=s.seed)
    file = Path(domain_of(tokenizer).samples_file)
    jobs = [(request, unlabelled, file)]  # (request, provenance, file name)
    if model.class_names is not None and model.eval_objective.samplers[sampler].guided:
        jobs = [  # a conditional run: samples of each class, p(x | class), one file each
            (
                replace(request, label=index),
                replace(unlabelled, label=name, guidance=1.0, guidance_schedule="constant"),
                file.with_stem(f"{file.stem}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"),
            )
            for index, name in enumerate(model.class_names)
        ]
    for job_request, run, name in jobs:
        samples = draw_samples(
            model.eval_objective, model.eval_backbone, job_request, s.seed, s.batch_size, progress
        )
        path = write_samples(samples, out / name, run, tokenizer)
        print(f"genodiff: wrote {s.num_samples} samples of {s.length} {tokenizer.unit} to {path}")


def _finetune(args: argparse.Namespace) -> None:
    from genodiff.finetune import finetune, load_finetune_config

    config = load_finetune_config(args.config, args.overrides)
    paths = finetune(config, progress_bar=progress_wanted(args.no_progress))
    print(f"genodiff: wrote {', '.join(str(p) for p in paths.values())}")


def _classifier(args: argparse.Namespace) -> None:
    from genodiff.classifiers.config import load_classifier_config
    from genodiff.classifiers.run import train_classifier

    config = load_classifier_config(args.config, args.overrides)
    train_classifier(config, progress_bar=progress_wanted(args.no_progress))


def _sample(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from genodiff.checkpoints import load_model
    from genodiff.conditioning import class_names
    from genodiff.devices import resolve_device
    from genodiff.domains import domain_of
    from genodiff.errors import NonFiniteOutputError
    from genodiff.generate import Constraint, SamplingRun, check_feasible, draw_samples
    from genodiff.guidance import check_classifier, label_id
    from genodiff.sample_files import check_output, write_samples
    from genodiff.samplers.request import SampleRequest

    if args.prefix is not None and args.infill is not None:
        raise InputValueError("--prefix and --infill exclude each other; give one")
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    tokenizer = model.tokenizer
    inputs = [("checkpoint", args.checkpoint)]
    if args.infill is not None:
        inputs.append(("--infill template", args.infill))
    if args.classifier is not None:
        inputs.append(("--classifier checkpoint", args.classifier))
    check_output(args.out, domain_of(tokenizer), inputs)  # before any sampling
    classes, classifier = class_names(model.config), None
    if args.classifier is not None:
        from genodiff.classifiers import load_classifier

        objective = model.config["objective"]["name"]
        classifier = load_classifier(args.classifier, device, generator_objective=objective)
        check_classifier(classifier, args.classifier, classes, tokenizer.name)
        classes = classes or list(classifier.class_names)
    label = None if args.label is None else label_id(args.label, classes, args.checkpoint)
    constraint = None
    if args.infill is not None:
        constraint = Constraint.from_file(args.infill, tokenizer)
        if args.length not in (None, constraint.length):
            raise InputValueError(
                f"--length {args.length} differs from the --infill template's "
                f"{constraint.length} {tokenizer.unit}; leave --length out"
            )
    if constraint is not None:
        length = constraint.length
    elif args.length is not None:
        length = args.length  # SampleRequest refuses < 1
    else:
        length = model.config["data"].get("max_length", 1024)
    request = SampleRequest(
        num_samples=args.num_samples,
        length=length,
        steps=args.steps,
        sampler=args.sampler,
        temperature=args.temperature,
        top_p=args.top_p,
        template=constraint.template if constraint else None,
        given=constraint.given if constraint else None,
        block=args.block,
        stride=args.stride,
        label=label,
        guidance=args.guidance,
        guidance_schedule=args.guidance_schedule,
        classifier=classifier,
        classifier_form=args.classifier_form,
    )
    check_feasible(request, args.batch_size, model.eval_backbone)  # before a prefix's (length,)
    if args.prefix is not None:
        constraint = Constraint.from_prefix(args.prefix, length, tokenizer)
        request = replace(request, template=constraint.template, given=constraint.given)
    sampler = model.eval_objective.sampler_name(request)  # its samplers differ per objective
    if sampler != "semi-ar" and (args.block is not None or args.stride is not None):
        raise InputValueError("--block and --stride apply only to --sampler semi-ar")
    with _progress(args) as progress:
        try:
            samples = draw_samples(
                model.eval_objective,
                model.eval_backbone,
                request,
                args.seed,
                args.batch_size,
                progress,
            )
        except NonFiniteOutputError as err:
            raise NonFiniteOutputError(f"{args.checkpoint}: {err}") from None
    run = SamplingRun(
        checkpoint=str(args.checkpoint),
        sampler=sampler,
        steps=model.eval_objective.steps_used(request),
        seed=args.seed,
        temperature=args.temperature,
        top_p=args.top_p,
        block=args.block,
        stride=args.stride,
        constraint=constraint.description if constraint else None,
        **_guidance_provenance(args),
    )
    path = write_samples(samples, args.out, run, tokenizer, inputs)
    unit = tokenizer.unit
    print(f"genodiff: wrote {args.num_samples} samples of {length} {unit} ({sampler}) to {path}")


def _guidance_provenance(args: argparse.Namespace) -> dict[str, str | float | None]:
    """The guidance fields of a ``SamplingRun`` for `genodiff sample`'s options (none when no
    class was asked for)."""
    if args.label is None:
        return {}
    fields = {
        "label": args.label,
        "guidance": args.guidance,
        "guidance_schedule": args.guidance_schedule,
    }
    if args.classifier is not None:
        fields.update(classifier=str(args.classifier), classifier_form=args.classifier_form)
    return fields


def _eval(args: argparse.Namespace) -> None:
    import json

    from genodiff.evaluate import evaluate_checkpoint

    with _progress(args) as progress:
        result = evaluate_checkpoint(
            args.checkpoint,
            data_file=args.file,
            length=args.length,
            num_windows=args.num_windows,
            t_samples=args.t_samples,
            seed=args.seed,
            batch_size=args.batch_size,
            device=args.device,
            per_window=args.per_window,
            progress=progress,
        )
    print(json.dumps(result.to_dict()) if args.json else result.describe())


def _gen_ppl(args: argparse.Namespace) -> None:
    import json

    from genodiff.generative_perplexity import default_ar_checkpoint, score_sample_file

    checkpoint = args.checkpoint
    if checkpoint is None and args.hf_model is None:
        checkpoint = default_ar_checkpoint(args.samples)
        print(
            f"genodiff gen-ppl: scoring with {checkpoint} (no --checkpoint given)", file=sys.stderr
        )
    with _progress(args) as progress:
        result = score_sample_file(
            args.samples,
            checkpoint,
            reference_path=args.reference,
            batch_size=args.batch_size,
            device=args.device,
            max_length=args.max_length,
            progress=progress,
            stride=args.stride,
            hf_model=args.hf_model,
        )
    print(json.dumps(result.to_dict()) if args.json else result.describe())


def _evaluate_samples(args: argparse.Namespace) -> None:
    from genodiff.metrics import QualitySettings, check_report_folder

    samples = Path(args.samples)
    out = Path(args.out) if args.out else samples.with_name(samples.name.split(".")[0] + "_quality")
    check_report_folder(out)  # before the metrics are computed
    settings = QualitySettings(
        window=args.window,
        max_reference=args.max_reference,
        folds=args.folds,
        seed=args.seed,
        identity_threshold=args.identity_threshold,
    )
    with _progress(args) as progress:
        if args.oracle is not None:
            from genodiff.metrics import evaluate_files_with_oracle, write_oracle_report

            quality = evaluate_files_with_oracle(
                args.samples,
                args.reference,
                args.oracle,
                label=args.label,
                settings=settings,
                train=args.train,
                ar_checkpoint=args.ar_checkpoint,
                device=args.device,
                progress=progress,
            )
            paths = write_oracle_report(quality, out)
        else:
            from genodiff.metrics import evaluate_sample_files, write_report

            _check_plain_reference(args.reference, args.label)
            quality = evaluate_sample_files(
                args.samples,
                args.reference[0],
                train=args.train,
                settings=settings,
                ar_checkpoint=args.ar_checkpoint,
                device=args.device,
                progress=progress,
            )
            paths = write_report(quality, out)
    print((out / "metrics.md").read_text())
    print(f"genodiff: wrote {', '.join(str(p) for p in paths)}")


def _check_plain_reference(references: list[str], label: str | None) -> None:
    """Without --oracle: one plain --reference FASTA and no --label."""
    if label is not None:
        raise InputValueError("--label names the samples' class for --oracle CKPT; give --oracle")
    if len(references) != 1:
        raise InputValueError(
            "--reference is given more than once: references per class (NAME=FASTA) are for "
            "--oracle CKPT; give one reference FASTA, or --oracle"
        )
    if "=" in references[0] and not Path(references[0]).exists():
        raise InputValueError(
            f"--reference {references[0]}: a reference per class (NAME=FASTA) is for "
            "--oracle CKPT; give one reference FASTA, or --oracle"
        )


def _export(args: argparse.Namespace) -> None:
    from genodiff.checkpoints import export_checkpoint

    with _progress(args) as progress:
        path = export_checkpoint(
            Path(args.checkpoint),
            Path(args.out),
            weights=args.weights,
            overwrite=args.overwrite,
            progress=progress,
        )
    print(f"genodiff: wrote a Hugging-Face-format folder ({args.weights} weights) to {path}")


def _info(args: argparse.Namespace) -> None:
    import json

    from genodiff.checkpoints import inspect_checkpoint

    info = inspect_checkpoint(args.path)
    print(json.dumps(info.to_dict()) if args.json else info.describe())


def _version() -> str:
    from genodiff import __version__

    where = Path(__file__).resolve().parent
    return f"genodiff {__version__} from {where} (python {sys.version.split()[0]})"


def _data_hg38(args: argparse.Namespace) -> None:
    from genodiff.data.download import prepare_hg38

    kwargs = {"fasta_url": args.fasta_url, "bed_url": args.bed_url}
    prepare_hg38(Path(args.dest), **{k: v for k, v in kwargs.items() if v})


def _data_labelled_split(args: argparse.Namespace) -> None:
    from genodiff.config import load_config
    from genodiff.data.build import build_datamodule
    from genodiff.data.labelled import LabelledDataModule
    from genodiff.data.labelled_split import REFERENCE_FOLDER, write_labelled_split

    cfg = load_config(args.config, args.overrides)
    datamodule = build_datamodule(cfg.data)
    if not isinstance(datamodule, LabelledDataModule):
        raise InputValueError(
            f"{args.config} reads data.name={cfg.data.name}; labelled-split needs a labelled "
            "config (data.name=labelled with data.fasta_by_label, e.g. "
            "configs/conditional_species.yaml)"
        )
    datamodule.check_files()
    task = args.task or cfg.name
    counts = write_labelled_split(
        datamodule,
        args.split,
        args.dest,
        task,
        args.oracle_test_fraction,
        args.overwrite,
        source=" ".join([str(args.config), *args.overrides]),
    )
    dest = Path(args.dest)
    for name, c in counts.items():
        print(
            f"genodiff: class {name}: {c['windows']} {args.split} windows, oracle train "
            f"{c['oracle_train']} / test {c['oracle_test']}"
        )
    print(
        f"genodiff: wrote {dest / task} (genodiff finetune benchmark.root={dest} "
        f"benchmark.tasks=[{task}]) and {dest / REFERENCE_FOLDER}/<class>.fa"
    )


def _progress(args: argparse.Namespace) -> Progress:
    """The progress line of ``genodiff COMMAND`` (see ``genodiff.progress``)."""
    return Progress(f"genodiff {args.command}", enabled=progress_wanted(args.no_progress))


def _add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="show no progress on stderr (default: progress is shown when stderr is a "
        f"terminal; {PROGRESS_ENV}=1 forces it on, =0 off)",
    )


CHECKPOINT_HELP = (
    "a .ckpt from genodiff train, a folder from genodiff export, or a Hugging Face Hub id "
    "org/name[@revision] of either"
)
# `genodiff gen-ppl --hf-model` without a name: the MDLM paper's Gen PPL scorer.
HF_DEFAULT_MODEL = "gpt2-large"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genodiff",
        description="Masked diffusion language models for DNA.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # --version on one line
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train",
        help="train a model from an experiment config",
        description="Train from CONFIG (a YAML under configs/). Overrides are Hydra-style: "
        "trainer.max_steps=20 data=demo output_dir=runs/x optim.lr=3e-4",
    )
    train.add_argument("config", help="experiment YAML, e.g. configs/demo.yaml")
    train.add_argument("overrides", nargs="*", help="key=value or group=option overrides")
    _add_progress_flag(train)
    train.set_defaults(run=_train)

    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a classifier on Genomic Benchmarks tasks with k-fold cross-validation",
        description="Fine-tune from CONFIG, e.g. configs/genomic_benchmarks.yaml. Overrides: "
        "benchmark.root=DIR benchmark.tasks=[a,b] folds=5 pretrained=PATH output_dir=DIR "
        "trainer.max_epochs=10. Finished folds in output_dir are skipped (resume).",
    )
    finetune.add_argument("config", help="fine-tuning YAML, e.g. configs/genomic_benchmarks.yaml")
    finetune.add_argument("overrides", nargs="*", help="key=value or group=option overrides")
    _add_progress_flag(finetune)
    finetune.set_defaults(run=_finetune)

    classifier = commands.add_parser(
        "classifier",
        help="train a classifier for classifier-based guidance (D-CBG, FUDGE)",
        description="Train from CONFIG, e.g. configs/classifier_demo.yaml, a classifier of "
        "labelled sequences (data=labelled) for genodiff sample --classifier. kind=noisy "
        "(D-CBG for masked diffusion): a bidirectional backbone learns p(y | z_t) on states "
        "z_t drawn by the forward process of generator=PATH (an MDLM, SEDD or D3PM "
        "checkpoint with the same tokenizer and classes); kind=causal (FUDGE for AR): a "
        "causal backbone learns p(y | x_<=i) at every position of clean sequences. "
        "Overrides: generator=PATH kind=causal model=mamba trainer.max_steps=200 "
        "output_dir=DIR",
    )
    classifier.add_argument("config", help="classifier YAML, e.g. configs/classifier_demo.yaml")
    classifier.add_argument("overrides", nargs="*", help="key=value or group=option overrides")
    _add_progress_flag(classifier)
    classifier.set_defaults(run=_classifier)

    sample = commands.add_parser(
        "sample",
        help="generate sequences from a checkpoint (FASTA for DNA; .txt or .jsonl for any)",
    )
    sample.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    sample.add_argument(
        "--num-samples", type=int, default=8, help="sequences to draw (default: %(default)s)"
    )
    sample.add_argument(
        "--length",
        type=int,
        default=None,
        help="tokens, bp for DNA (default: the training window, or the --infill template's)",
    )
    sample.add_argument(
        "--steps",
        type=int,
        default=1024,
        help="steps T of ancestral and cached, per window of semi-ar, of SEDD's, UDLM's and "
        "Plaid's samplers; first-hitting and AR models take none (default: %(default)s)",
    )
    sample.add_argument(
        "--sampler",
        default=None,
        help="MDLM/D3PM: ancestral, cached, first-hitting, semi-ar; SEDD: analytic, euler; "
        "UDLM, Plaid, AR: ancestral (default: the first named for the checkpoint's objective)",
    )
    sample.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="divides the log-probabilities, > 0 (default: %(default)s)",
    )
    sample.add_argument(
        "--top-p", "--nucleus", dest="top_p", type=float, default=1.0,
        help="nucleus sampling: probability mass kept, in (0, 1] (default: %(default)s, all)",
    )  # fmt: skip
    sample.add_argument(
        "--prefix",
        default=None,
        help="fixed start: bases for DNA (ACGTTG), text for text (default: none)",
    )
    sample.add_argument(
        "--infill",
        default=None,
        help="template; DNA: a FASTA whose first record fixes its upper-case ACGT and "
        "generates N / lower-case positions; text: a file whose first line is text with the "
        "mask token ([MASK]) at each token to generate. Sets --length (default: none)",
    )
    sample.add_argument(
        "--block",
        type=int,
        default=None,
        help="window length in tokens; semi-ar only, and required there (default: none)",
    )
    sample.add_argument(
        "--stride",
        type=int,
        default=None,
        help="new tokens per window, < --block; semi-ar only, and required there (default: none)",
    )
    sample.add_argument(
        "--label",
        default=None,
        help="draw sequences of this class (a class name of the checkpoint's labelled data, "
        "or of --classifier's for an unconditional model). Guidance per objective: MDLM and "
        "D3PM (every sampler), UDLM (ancestral, at the transition level): classifier-free "
        "(--guidance) and classifier (--classifier); SEDD: classifier-free only; AR: "
        "classifier-free and FUDGE (--classifier); Plaid: none (default: none, p(x))",
    )
    sample.add_argument(
        "--guidance",
        type=float,
        default=1.0,
        help="guidance strength gamma with --label, in [0, 100]: 0 = unconditional p(x), 1 = "
        "the conditional model p(x | label), > 1 extrapolates towards the class (stronger, "
        "less diverse; about 1-5 is useful) (default: %(default)s)",
    )
    sample.add_argument(
        "--guidance-schedule",
        default="constant",
        help="gamma over sampling: constant, or ramp (rising from 0 to gamma as sampling "
        "proceeds, gamma (1 - t) for diffusion: weak guidance on mostly noise, full at the "
        "end) (default: %(default)s)",
    )
    sample.add_argument(
        "--classifier",
        default=None,
        help="classifier-guided sampling with this noisy classifier checkpoint (genodiff "
        "classifier): D-CBG for MDLM/D3PM/UDLM, FUDGE for AR; needs --label (default: none, "
        "classifier-free guidance by the model's own null label)",
    )
    sample.add_argument(
        "--classifier-form",
        default="first-order",
        help="D-CBG: first-order (one forward + backward pass per step) or exact (one "
        "classifier call per position and base: short sequences only) (default: %(default)s)",
    )
    sample.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the same seed draws the same samples (default: %(default)s)",
    )
    sample.add_argument(
        "--batch-size",
        type=int,
        default=16,
        help="sequences per network call (default: %(default)s)",
    )
    sample.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1 (default: the best available)"
    )
    sample.add_argument(
        "--out", required=True, help="output file: .fa (DNA), .txt (one per line) or .jsonl"
    )
    _add_progress_flag(sample)
    sample.set_defaults(run=_sample)

    evaluate = commands.add_parser(
        "eval",
        help="held-out NELBO / perplexity of a checkpoint",
        description="Score held-out windows (the checkpoint's test split, or those of --file "
        "FILE) with the EMA weights: per-token NELBO (exact NLL for AR) in nats and bits, "
        "perplexity, SE.",
    )
    evaluate.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    evaluate.add_argument(
        "--file",
        "--fasta",
        "--text",
        dest="file",
        default=None,
        help="score the windows of FILE instead of the test split, read as the checkpoint's "
        "data module reads a file of its domain (DNA: a FASTA; a text plugin: one sentence per "
        "line); --fasta and --text are aliases of --file",
    )
    evaluate.add_argument(
        "--length", type=int, default=None, help="window length (default: the config's)"
    )
    evaluate.add_argument(
        "--num-windows", type=int, default=None, help="evenly spread subset (default: all)"
    )
    evaluate.add_argument(
        "--t-samples", type=int, default=None, help="noise draws per window (diffusion)"
    )
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--batch-size", type=int, default=16, help="windows per batch")
    evaluate.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: best)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument(
        "--per-window", action="store_true", help="with --json: list every window's NELBO"
    )
    _add_progress_flag(evaluate)
    evaluate.set_defaults(run=_eval)

    gen_ppl = commands.add_parser(
        "gen-ppl",
        help="generative perplexity of samples under an AR checkpoint, with their diversity",
        description="Score SAMPLES (FASTA, .txt one per line, or .jsonl) with an autoregressive "
        "checkpoint's exact NLL: Gen PPL = exp(total NLL / scored tokens), with its SE, the "
        "per-sample mean, and the samples' diversity (mean unigram entropy, distinct-1..4) "
        "beside a --reference set of real data. Without --checkpoint, the first existing of "
        "the conventional AR runs that the domains name for the samples' format (DNA: "
        "outputs/hg38_ar_mamba/checkpoints/last.ckpt) is used. --hf-model scores text "
        "samples with a Hugging Face causal LM instead (the MDLM paper's GPT-2; needs "
        "pip install 'genodiff-text[hub]').",
    )
    gen_ppl.add_argument("samples", help="sample file from genodiff sample (.fa, .txt, .jsonl)")
    scorer = gen_ppl.add_mutually_exclusive_group()
    scorer.add_argument(
        "--checkpoint", default=None, help="AR .ckpt (default: a conventional AR run's last.ckpt)"
    )
    scorer.add_argument(
        "--hf-model",
        nargs="?",
        const=HF_DEFAULT_MODEL,
        default=None,
        metavar="NAME",
        help="score text samples with a Hugging Face causal LM: a Hub id or a local folder "
        f"(given without NAME: {HF_DEFAULT_MODEL}, the paper's Gen PPL scorer); the decoded "
        "text is retokenised by the model's tokenizer",
    )
    gen_ppl.add_argument(
        "--reference", default=None, help="real data in the same formats, for diversity"
    )
    gen_ppl.add_argument("--batch-size", type=int, default=16, help="chunks per batch")
    gen_ppl.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: best)")
    gen_ppl.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens per scored chunk (default: the checkpoint's training window; with "
        "--hf-model the model's context)",
    )
    gen_ppl.add_argument(
        "--stride",
        type=int,
        default=None,
        help="tokens a sample longer than the window advances by from one chunk to the next; "
        "each later chunk reads the window minus stride tokens before it as context, scored "
        "once (1 to the window, below it with --hf-model; default: half the window)",
    )
    gen_ppl.add_argument("--json", action="store_true", help="print one JSON object")
    _add_progress_flag(gen_ppl)
    gen_ppl.set_defaults(run=_gen_ppl)

    quality = commands.add_parser(
        "evaluate-samples",
        help="are generated DNA sequences any good? k-mer, composition, diversity, "
        "memorisation, discriminator and AR-likelihood metrics against real DNA",
        description="Compare generated DNA (SAMPLES, a FASTA) with real DNA (--reference, a "
        "FASTA; records longer than the samples are cut into windows of the samples' length): "
        "k-mer spectrum Jensen-Shannon divergence (k = 1..6), GC content and CpG o/e "
        "distributions, homopolymer and DUST low-complexity fractions, duplicates and pairwise "
        "6-mer distance, a cross-validated discriminator AUROC (0.5 = indistinguishable); with "
        "--train, each sample's identity to its nearest training stretch (copies flagged); "
        "with --ar-checkpoint, generative perplexity of samples and reference. Writes "
        "metrics.json, metrics.md, kmer_spectra.png and gc_histogram.png to --out. With "
        "--oracle CKPT (a genodiff finetune classifier): the oracle's accuracy, macro-F1 and "
        "confusion counts on the samples (each drawn for the class its FASTA header names, "
        "label=NAME, else --label's), and the metrics per class against --reference "
        "NAME=FASTA; metrics.json and metrics.md by class, each class's full report in "
        "--out/NAME/.",
    )
    quality.add_argument("samples", help="generated sequences (FASTA, e.g. from genodiff sample)")
    quality.add_argument(
        "--reference",
        required=True,
        action="append",
        help="real DNA to compare with (FASTA); with --oracle, NAME=FASTA gives class NAME's "
        "real DNA (repeat it for each class) and a plain FASTA is the --label class's",
    )
    quality.add_argument(
        "--oracle",
        default=None,
        help="a classifier checkpoint from genodiff finetune (trained on data the generator "
        "never saw, e.g. from genodiff data labelled-split): reports its accuracy and macro-F1 "
        "on the samples, confusion counts, and every metric per class",
    )
    quality.add_argument(
        "--label",
        default=None,
        help="with --oracle: the class of samples whose FASTA header names none (label=NAME)",
    )
    quality.add_argument(
        "--train", default=None, help="the training DNA (FASTA), to flag copied samples"
    )
    quality.add_argument(
        "--ar-checkpoint",
        default=None,
        help="DNA AR checkpoint (.ckpt, export folder or Hub id) for generative perplexity",
    )
    quality.add_argument(
        "--out", default=None, help="report folder (default: NAME_quality/ beside NAME.fa)"
    )
    quality.add_argument(
        "--window", type=int, default=None, help="reference window, bp (default: sample length)"
    )
    quality.add_argument(
        "--max-reference", type=int, default=2000, help="reference windows used at most"
    )
    quality.add_argument("--folds", type=int, default=5, help="discriminator CV folds")
    quality.add_argument(
        "--identity-threshold",
        type=float,
        default=0.95,
        help="flag samples at least this identical to a training stretch",
    )
    quality.add_argument("--seed", type=int, default=0, help="discriminator fold shuffling")
    quality.add_argument(
        "--device", default=None, help="for --oracle and --ar-checkpoint (default: best)"
    )
    _add_progress_flag(quality)
    quality.set_defaults(run=_evaluate_samples)

    export = commands.add_parser(
        "export", help="turn a training checkpoint into a Hugging-Face-format folder"
    )
    export.add_argument("--checkpoint", required=True, help="Lightning .ckpt from genodiff train")
    export.add_argument("--out", required=True, help="folder for config.json + model.safetensors")
    export.add_argument("--weights", choices=("ema", "raw"), default="ema")
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace config.json / model.safetensors / tokenizer.json / genodiff.json already "
        "in --out (other files there are always kept)",
    )
    _add_progress_flag(export)
    export.set_defaults(run=_export)

    info = commands.add_parser(
        "info",
        help="print what a checkpoint holds",
        description="Objective, backbone, parameters, step, tokens seen, data, tokenizer and "
        "config of PATH: a .ckpt, a checkpoint folder, or a Hub id org/name[@revision].",
    )
    info.add_argument("path", help=CHECKPOINT_HELP)
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=_info)

    data = commands.add_parser("data", help="download and prepare datasets")
    datasets = data.add_subparsers(dest="dataset", required=True)
    hg38 = datasets.add_parser("hg38", help="hg38 FASTA + Basenji BED splits")
    hg38.add_argument("--dest", default="data/hg38", help="folder to write into")
    hg38.add_argument("--fasta-url", default=None, help="override the hg38.ml.fa.gz URL")
    hg38.add_argument("--bed-url", default=None, help="override the sequences_human.bed URL")
    hg38.set_defaults(run=_data_hg38)
    split = datasets.add_parser(
        "labelled-split",
        help="write a split of a labelled run's windows for an oracle: a Genomic Benchmarks "
        "folder for genodiff finetune and one reference FASTA per class",
        description="Write the windows of --split of CONFIG (a labelled-FASTA run config, "
        "data.fasta_by_label, e.g. configs/conditional_species.yaml) to --dest: "
        "DEST/TASK/{train,test}/CLASS/*.txt (the split divided again by position per class: "
        "the last --oracle-test-fraction of each class's windows are the oracle's test set), "
        "DEST/reference/CLASS.fa (every window of the class in the split) and "
        "DEST/manifest.json. Train an oracle with genodiff finetune benchmark.root=DEST "
        "benchmark.tasks=[TASK]; use it with genodiff evaluate-samples --oracle.",
    )
    split.add_argument("config", help="labelled run config, e.g. configs/conditional_species.yaml")
    split.add_argument("overrides", nargs="*", help="key=value overrides, as for genodiff train")
    split.add_argument(
        "--split",
        choices=("train", "valid", "test"),
        default="test",
        help="the split to write; the generator never trains on valid or test "
        "(default: %(default)s)",
    )
    split.add_argument("--dest", required=True, help="folder to write (new or empty)")
    split.add_argument("--task", default=None, help="task folder name (default: the config's name)")
    split.add_argument(
        "--oracle-test-fraction",
        type=float,
        default=0.2,
        help="share of each class's windows (the last ones) in the oracle's test set "
        "(default: %(default)s)",
    )
    split.add_argument(
        "--overwrite", action="store_true", help="replace a non-empty --dest, all of it"
    )
    split.set_defaults(run=_data_labelled_split)
    return parser


# The file system's refusals about the user's files and disk, which the user fixes.
FILE_SYSTEM_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def is_user_error(err: BaseException) -> bool:
    """True for an error in what the user gave (``UserInputError``) or about the user's files
    and disk (missing, not allowed, disk full); anything else is a bug."""
    if isinstance(err, (UserInputError, *FILE_SYSTEM_ERRORS)):
        return True
    return isinstance(err, OSError) and err.errno in DISK_ERRNOS


def main(argv: list[str] | None = None) -> int:
    """Run a command; a user error is one line on stderr (exit status 2), any other error
    raises with its traceback (``GENODIFF_DEBUG=1``: every error does)."""
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except Exception as err:
        if os.environ.get("GENODIFF_DEBUG") or not is_user_error(err):
            raise
        print(f"genodiff {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

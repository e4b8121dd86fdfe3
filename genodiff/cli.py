"""The ``genodiff`` command: argparse and thin handlers over the library.

Every command is one call into the library (``genodiff.pipeline``, ``genodiff.training.run``,
``genodiff.finetuning``, ...), so the CLI and a Python session with the same settings give the
same results. A user error is one line on stderr, with the option at fault named
(``main``); ``genodiff --version`` imports nothing heavy.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import io
import os
import select
import shutil
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from genodiff.errors import InputValueError, UserInputError
from genodiff.generation_config import RUN_SECTION, flag_of
from genodiff.generation_config import options as generation_options
from genodiff.progress import (
    LINE_INTERVAL,
    PROGRESS_ENV,
    Progress,
    counted,
    is_genodiffs_own,
    is_main_process,
    is_terminal,
    progress_wanted,
    shown_by_the_main_process_alone,
)
from genodiff.resources import given_or_shipped
from genodiff.threads import configure_threads


def _progress_setting(args: argparse.Namespace) -> bool | None:
    """``progress`` for the library: off with --no-progress, else as ``GENODIFF_PROGRESS``
    says (default on)."""
    return False if args.no_progress else None


def _train(args: argparse.Namespace) -> None:
    from genodiff.training.run import train

    train(args.config, args.overrides, progress=_progress_setting(args))


def _finetune(args: argparse.Namespace) -> None:
    from genodiff.finetuning import finetune

    results = finetune(args.config, args.overrides, progress=_progress_setting(args))
    if results is not None:  # the main process of a multi-process run
        print(results.table)
        print(f"genodiff: wrote {', '.join(str(p) for p in results.files.values())}")


def _classifier(args: argparse.Namespace) -> None:
    from genodiff.classifiers.run import train_classifier

    train_classifier(args.config, args.overrides, progress=_progress_setting(args))


def _sample(args: argparse.Namespace) -> None:
    import torch

    from genodiff.devices import resolve_device
    from genodiff.generation_config import option_names
    from genodiff.pipeline import check_samples_output, load

    dtype = None if args.dtype is None else getattr(torch, args.dtype)  # None: float32
    model = load(args.checkpoint, resolve_device(args.device), dtype=dtype)  # device None: best
    if args.cuda_graphs:
        model.enable_cuda_graphs()
    inputs = [("checkpoint", args.checkpoint)]
    inputs += [(what, path) for what, path in (("--infill template", args.infill),
               ("--classifier checkpoint", args.classifier)) if path is not None]  # fmt: skip
    check_samples_output(model, args.out, inputs)  # before any sampling
    with _progress(args) as progress:
        written = model.generate_to_file(
            args.out,
            args.num_samples,
            resume=args.resume,
            overwrite=args.overwrite,
            accelerator=args.accelerator,
            devices=args.devices,
            num_nodes=args.num_nodes,
            inputs=inputs,
            progress=progress,
            **{name: getattr(args, name) for name in option_names()},  # None: not given
        )
    if written.main and written.finished_before:
        print(
            f"genodiff: {written.path} holds this command's {counted(written.count, 'sample')} "
            "already "
            "(--resume): nothing to draw"
        )
    elif written.main:
        print(
            f"genodiff: wrote {counted(written.count, 'sample')} of {written.length} "
            f"{model.tokenizer.unit} ({written.run.sampler}) to {written.path}"
        )


def _eval(args: argparse.Namespace) -> None:
    import json

    from genodiff.data.genome import index_files_beside
    from genodiff.evaluate import evaluate_checkpoint

    if args.per_window and not args.json:
        raise UserInputError(
            "--per-window lists every window's NELBO in the JSON object; add --json"
        )

    indexes = index_files_beside(args.data_file) if args.data_file is not None else ()
    existed = [path.exists() for path in indexes]
    with _progress(args) as progress:
        result = evaluate_checkpoint(
            args.checkpoint,
            data_file=args.data_file,
            length=args.length,
            num_windows=args.num_windows,
            t_samples=args.t_samples,
            seed=args.seed,
            batch_size=args.batch_size,
            device=args.device,
            per_window=args.per_window,
            progress=progress,
            accelerator=args.accelerator,
            devices=args.devices,
            num_nodes=args.num_nodes,
            eval_t_power=args.eval_t_power,
            data_files=data_copies(args.data_files),
        )
    if result is None:  # a worker process of a multi-process run: the main one reports
        return
    written = [p.name for p, had in zip(indexes, existed, strict=True) if p.exists() and not had]
    if written:
        print(
            f"genodiff eval: indexed {args.data_file} for random access: wrote "
            f"{' and '.join(written)} beside it (reused next time; safe to delete)",
            file=sys.stderr,
        )
    if args.json:  # the text report shows them; stdout holds the JSON object alone
        for warning in result.warnings:
            print(f"genodiff eval: warning: {warning}", file=sys.stderr)
    print(json.dumps(result.to_dict()) if args.json else result.describe())


def _gen_ppl(args: argparse.Namespace) -> None:
    import json

    from genodiff.generative_perplexity import default_ar_checkpoint, score_sample_file

    checkpoint = args.checkpoint
    if checkpoint is None and args.scorer is None and args.scorer_model is None:
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
            scorer=args.scorer,
            scorer_model=args.scorer_model,
        )
    print(json.dumps(result.to_dict()) if args.json else result.describe())


def data_copies(items: list[str] | None) -> dict[str, Any]:
    """``--data KEY=PATH`` items as ``Model.windows``' data files: ``fasta=PATH`` (or, as a
    card names it, ``data.fasta=PATH``) -> ``{"fasta": PATH}``, ``fasta_by_label.human=PATH``
    -> ``{"fasta_by_label": {"human": PATH}}``."""
    copies: dict[str, Any] = {}
    for item in items or ():
        place, sep, path = item.partition("=")
        key, dot, entry = place.removeprefix("data.").partition(".")
        if not (sep and path and key) or (dot and not entry):
            raise UserInputError(
                f"--data {item}: give KEY=PATH, the data key the model's card names and a "
                "copy of its file (fasta=chrX.fa.gz, fasta_by_label.human=PATH)"
            )
        if dot:
            copies.setdefault(key, {})[entry] = path
        else:
            copies[key] = path
    return copies


def _evaluate_samples(args: argparse.Namespace) -> None:
    from genodiff.metrics import QualitySettings
    from genodiff.sample_quality import evaluate_samples, report_folder

    samples = Path(args.samples)
    out = Path(args.out) if args.out else report_folder(samples)
    settings = QualitySettings(
        window=args.window,
        max_reference=args.max_reference,
        folds=args.folds,
        seed=args.seed,
        splits=args.splits,
        identity_threshold=args.identity_threshold,
    )
    if args.oracle is None and len(args.reference) > 1:
        raise UserInputError(
            "--reference is given more than once: references per class (NAME=FASTA) are for "
            "--oracle CKPT; give one reference FASTA, or --oracle"
        )
    # Paths: an option names a file, whose name a str of letters alone would be taken from
    # Python as a sequence given by mistake (errors.refuse_sequence_as_file_name).
    with _progress(args) as progress:
        evaluate_samples(
            samples,
            args.reference if args.oracle else Path(args.reference[0]),
            out=out,
            oracle=args.oracle,
            label=args.label,
            train=None if args.train is None else Path(args.train),
            ar_checkpoint=args.ar_checkpoint,
            settings=settings,
            device=args.device,
            progress=progress,
            overwrite=args.overwrite,
        )
    print((out / "metrics.md").read_text())
    print(f"genodiff: wrote the report to {out} (metrics.md, metrics.json and plots)")


def _export(args: argparse.Namespace) -> None:
    from genodiff.checkpoints import export_model

    with _progress(args) as progress:
        path = export_model(
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


def _models(args: argparse.Namespace) -> None:
    from genodiff.named_models import MODELS_ENV, model_lines, named_model, named_models

    if args.name is not None:
        model = named_model(args.name)
        print(model.card() or f"{model.name}: no model card ({model.folder})")
        return
    models = named_models()
    # a terminal's lines stay one row each (a summary cut to fit); a file or pipe gets them whole
    width = shutil.get_terminal_size().columns if is_terminal(sys.stdout) else None
    for line in model_lines(models.values(), width):
        print(line)
    if not models:
        print(f"no named models: none ships with this version yet; set {MODELS_ENV} to add yours")


def _version() -> str:
    from genodiff.version import __version__

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
            "config (data.name=labelled, e.g. configs/conditional_demo.yaml)"
        )
    datamodule.check_files()
    task = args.task or cfg.name
    counts = write_labelled_split(
        datamodule,
        args.split,
        args.dest,
        task,
        args.test_fraction,
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


def _training_configs() -> list[str]:
    """The shipped configs ``genodiff train`` takes (read when its help is asked for)."""
    from genodiff.shipped_configs import training_configs

    return training_configs()


def _progress(args: argparse.Namespace) -> Progress:
    """The progress line of ``genodiff COMMAND`` (see ``genodiff.progress``)."""
    return Progress(f"genodiff {args.command}", enabled=progress_wanted(args.no_progress))


def _config_command(
    commands: Any,  # argparse's subparsers action
    run: Callable[[argparse.Namespace], None],
    name: str,
    summary: str,
    description: str,
    example: str,
    configs: Callable[[], list[str]] | None = None,
) -> None:
    """A command that runs a config with Hydra overrides (train, finetune, classifier);
    ``configs`` (called only by -h/--help): the shipped configs it takes, named in its help."""
    command = commands.add_parser(
        name, help=summary, description=description, add_help=configs is None
    )
    if configs is not None:
        command.add_argument("-h", "--help", action=_HelpNamingConfigs, configs=configs)
    command.add_argument("config", help=example)
    command.add_argument("overrides", nargs="*", help="key=value or group=option overrides")
    _add_progress_flag(command)
    command.set_defaults(run=run)


# Lightning's accelerators that genodiff runs on (TPUs would need torch_xla and XLA kernels)
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")


def _at_least_one(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value


class _HelpNamingConfigs(argparse.Action):
    """-h/--help that ends with the shipped configs' names, read from the config folders
    (``genodiff.shipped_configs``) only when the help is asked for."""

    def __init__(
        self, option_strings: list[str], configs: Callable[[], list[str]], **_: Any
    ) -> None:
        super().__init__(
            option_strings, argparse.SUPPRESS, nargs=0, help="show this help message and exit"
        )
        self.configs = configs

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        parser.epilog = (
            f"Shipped configs (a name works from any folder): {', '.join(self.configs())}."
        )
        parser.print_help()
        parser.exit()


def _add_processes_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """Lightning's --accelerator / --devices / --num-nodes: several processes share the work."""
    parser.add_argument(
        "--devices",
        type=_at_least_one,
        help=f"processes on this node that share the {what} (one device each: GPUs with "
        "--accelerator gpu; CPU processes with --accelerator cpu); the result is the same as "
        "one process gives (default: one process on --device)",
    )
    parser.add_argument(
        "--num-nodes", type=_at_least_one, help="nodes of --devices processes each (default: 1)"
    )
    parser.add_argument(
        "--accelerator",
        choices=ACCELERATORS,
        help="with --devices: as Lightning's; without it refused (one process: --device) "
        "(default: auto)",
    )


def _add_generation_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for each option of ``GenerationConfig``, with its type and help: unset, it
    leaves the option to the checkpoint's generation config (then the default)."""
    for field, option in generation_options():
        default = option.default_text or str(field.default)
        if option.run_key:
            default = f"the checkpoint's {RUN_SECTION}.{option.run_key}, else {default}"
        rule = f"; {option.rule}" if option.rule else ""
        choices = f"; one of: {', '.join(option.choices)}" if option.choices else ""
        parser.add_argument(
            flag_of(field.name),
            *option.aliases,
            dest=field.name,
            type=given_or_shipped if option.paths else option.kind,
            help=f"{option.help}{rule}{choices} (default: {default})".replace("%", "%%"),
        )


def _add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="show no progress on stderr (default: shown, one line rewritten in place on a "
        f"terminal, a new line every {LINE_INTERVAL:g} s in a file or pipe; {PROGRESS_ENV}=0 "
        "turns it off)",
    )


CHECKPOINT_HELP = (
    "a .ckpt from genodiff train, a folder from genodiff export, a model's name (genodiff "
    "models lists them) or a Hugging Face Hub id org/name[@revision]"
)


#: ``genodiff sample --dtype``: the torch dtypes ``genodiff.load(dtype=...)`` is given by name.
SAMPLING_DTYPES = ("float32", "bfloat16", "float16")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genodiff",
        description="Masked diffusion language models for DNA.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # --version on one line
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)

    _config_command(
        commands, _train, "train", "train a model from an experiment config",
        "Train from CONFIG (a YAML path, or the name of a shipped config: demo). Overrides are "
        "Hydra-style: trainer.max_steps=20 data=demo output_dir=runs/x optim.lr=3e-4. Resume a "
        "stopped run with the same command plus ckpt_path=last (or ckpt_path=FILE.ckpt).",
        "experiment YAML or name, e.g. configs/demo.yaml or demo",
        _training_configs,
    )  # fmt: skip
    _config_command(
        commands, _finetune, "finetune",
        "fine-tune a classifier on Genomic Benchmarks tasks with k-fold cross-validation",
        "Fine-tune from CONFIG, e.g. configs/genomic_benchmarks.yaml. Overrides: "
        "benchmark.root=DIR benchmark.tasks=[a,b] folds=5 pretrained=PATH output_dir=DIR "
        "trainer.max_epochs=10. Finished folds in output_dir are skipped (resume); with "
        "trainer.devices=N the runs are spread over N processes.",
        "fine-tuning YAML, e.g. configs/genomic_benchmarks.yaml",
    )  # fmt: skip
    _config_command(
        commands, _classifier, "classifier",
        "train a classifier for classifier-based guidance (D-CBG, FUDGE)",
        "Train from CONFIG, e.g. configs/classifier_demo.yaml, a classifier of "
        "labelled sequences (data=labelled) for genodiff sample --classifier. kind=noisy "
        "(D-CBG for masked diffusion): a bidirectional backbone learns p(y | z_t) on states "
        "z_t drawn by the forward process of generator=PATH (an MDLM, SEDD, D3PM or UDLM "
        "checkpoint with the same tokenizer and classes); kind=causal (FUDGE for AR): a "
        "causal backbone learns p(y | x_<=i) at every position of clean sequences. "
        "Overrides: generator=PATH kind=causal model=mamba trainer.max_steps=200 "
        "output_dir=DIR",
        "classifier YAML, e.g. configs/classifier_demo.yaml",
    )  # fmt: skip

    sample = commands.add_parser(
        "sample",
        help="generate sequences from a checkpoint (FASTA for DNA; .txt or .jsonl for any)",
    )
    sample.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    sample.add_argument(
        "--num-samples", type=int, default=8, help="sequences to draw (default: %(default)s)"
    )
    _add_generation_flags(sample)
    sample.add_argument("--device", help="cpu, cuda, cuda:1 (default: the best available)")
    sample.add_argument(
        "--dtype",
        choices=SAMPLING_DTYPES,
        help="the weights' and the network's floating-point type while sampling (bfloat16: "
        "about half the memory and faster on a GPU, the network's rounding changes the "
        "sequences; every draw stays float64) (default: float32, whatever the checkpoint stores)",
    )
    sample.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="replay each whole sampler step (network and sampler arithmetic; with a "
        "classifier, the network call) from a CUDA graph: the same sequences, one launch per "
        "step, on a GPU only (default: off)",
    )
    sample.add_argument(
        "--out",
        required=True,
        help="output file: .fa (DNA), .txt (one per line) or .jsonl; written as the samples "
        "are drawn under a hidden staging name, and complete or not at all",
    )
    sample.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run that a kill stopped (the same command plus --resume): after "
        "its last complete batch, to the file an uninterrupted run writes (default: off: a "
        "killed run's staged work is refused)",
    )
    sample.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --out (default: off: an existing --out is refused)",
    )
    _add_processes_flags(sample, "sequences")
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
        dest="data_file",
        metavar="FILE",
        type=given_or_shipped,
        help="score the windows of FILE instead of the test split, read as the checkpoint's "
        "data module reads a file of its domain (DNA: a FASTA, indexed in FILE.fai, and "
        "FILE.gzi for BGZF, beside it, or in ~/.cache/genodiff/fai where its folder is "
        "read-only or it is a file genodiff ships; a text plugin: one sentence per line); "
        "--fasta and --text are aliases of --file",
    )
    evaluate.add_argument(
        "--data",
        dest="data_files",
        action="append",
        metavar="KEY=PATH",
        help="a copy of a data file the run was trained on, for its test split (repeatable): "
        "the data key its card names, 'data.' optional (fasta=chrX.fa.gz, "
        "fasta_by_label.human=PATH), checked against the content sha256 the model recorded",
    )
    evaluate.add_argument("--length", type=int, help="window length (default: the config's)")
    evaluate.add_argument("--num-windows", type=int, help="evenly spread subset (default: all)")
    evaluate.add_argument(
        "--t-samples",
        type=int,
        help="noise draws per window (diffusion; default: the checkpoint's "
        "objective.eval_t_samples)",
    )
    evaluate.add_argument(
        "--eval-t-power",
        type=float,
        help="UDLM: held-out times t = s^P in [0, 1], importance-weighted; 1 = uniform t "
        "(default: the checkpoint's objective.eval_t_power, 2.5)",
    )
    evaluate.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the noise draws: the same seed gives the same numbers (default: 0)",
    )
    evaluate.add_argument(
        "--batch-size",
        type=int,
        default=16,
        help="windows per batch (the numbers do not depend on it)",
    )
    evaluate.add_argument("--device", help="cpu, cuda, cuda:1 (default: best)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument(
        "--per-window", action="store_true", help="with --json: list every window's NELBO"
    )
    _add_processes_flags(evaluate, "windows")
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
        "outputs/hg38_ar_mamba/checkpoints/last.ckpt) is used. --scorer NAME scores with a "
        "scorer a plugin registers instead, e.g. the text plugin's hf: text samples scored by "
        "a Hugging Face causal LM, the MDLM paper's Gen PPL scorer (pip install "
        "'genodiff-text[hub]').",
    )
    gen_ppl.add_argument("samples", help="sample file from genodiff sample (.fa, .txt, .jsonl)")
    scorer = gen_ppl.add_mutually_exclusive_group()
    scorer.add_argument(
        "--checkpoint",
        help=f"the AR scorer: {CHECKPOINT_HELP} (default: a conventional AR run's last.ckpt)",
    )
    scorer.add_argument(
        "--scorer",
        metavar="NAME",
        help="score with the scorer a plugin registers as NAME (entry-point group "
        "genodiff.scorers), e.g. the text plugin's hf; an unknown NAME lists the registered ones",
    )
    gen_ppl.add_argument(
        "--scorer-model",
        metavar="MODEL",
        help="the model --scorer scores with (for hf: a Hugging Face Hub id or a local folder); "
        "default: the scorer's own default model",
    )
    gen_ppl.add_argument(
        "--reference", type=given_or_shipped, help="real data in the same formats, for diversity"
    )
    gen_ppl.add_argument("--batch-size", type=int, default=16, help="chunks per batch")
    gen_ppl.add_argument("--device", help="cpu, cuda, cuda:1 (default: best)")
    gen_ppl.add_argument(
        "--max-length",
        type=int,
        help="tokens per scored chunk (default: the checkpoint's training window, or the "
        "window of --scorer's model, e.g. hf: the model's context)",
    )
    gen_ppl.add_argument(
        "--stride",
        type=int,
        help="tokens a sample longer than the window advances by from one chunk to the next; "
        "each later chunk reads the window minus stride tokens before it as context, scored "
        "once (1 to the window, below it for a scorer that reads every later window with "
        "context, e.g. hf; default: half the window)",
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
        type=given_or_shipped,
        help="real DNA to compare with (FASTA); with --oracle, NAME=FASTA gives class NAME's "
        "real DNA (repeat it for each class) and a plain FASTA is the --label class's",
    )
    quality.add_argument(
        "--oracle",
        help="a classifier checkpoint from genodiff finetune (trained on data the generator "
        "never saw, e.g. from genodiff data labelled-split): reports its accuracy and macro-F1 "
        "on the samples, confusion counts, and every metric per class",
    )
    quality.add_argument(
        "--label",
        help="with --oracle: the class of samples whose FASTA header names none (label=NAME)",
    )
    quality.add_argument(
        "--train", type=given_or_shipped, help="the training DNA (FASTA), to flag copied samples"
    )
    quality.add_argument(
        "--ar-checkpoint",
        help="DNA AR checkpoint (.ckpt, export folder or Hub id) for generative perplexity",
    )
    quality.add_argument("--out", help="report folder (default: NAME_quality/ beside NAME.fa)")
    quality.add_argument("--window", type=int, help="reference window, bp (default: sample length)")
    quality.add_argument(
        "--max-reference", type=int, default=2000, help="reference windows used at most"
    )
    quality.add_argument("--folds", type=int, default=5, help="discriminator CV folds")
    quality.add_argument(
        "--splits",
        type=int,
        default=20,
        help="random splits of the reference for the real-vs-real k-mer JS and its spread",
    )
    quality.add_argument(
        "--identity-threshold",
        type=float,
        default=0.95,
        help="flag samples at least this identical to a training stretch",
    )
    quality.add_argument(
        "--seed",
        type=int,
        default=0,
        help="discriminator fold shuffling and the k-mer comparison's random splits",
    )
    quality.add_argument("--device", help="for --oracle and --ar-checkpoint (default: best)")
    quality.add_argument(
        "--overwrite", action="store_true", help="replace a report already in --out"
    )
    _add_progress_flag(quality)
    quality.set_defaults(run=_evaluate_samples)

    export = commands.add_parser(
        "export", help="turn a training checkpoint into a Hugging-Face-format folder"
    )
    export.add_argument(
        "--checkpoint", required=True, help=f"the model to export: {CHECKPOINT_HELP}"
    )
    export.add_argument("--out", required=True, help="folder for config.json + model.safetensors")
    export.add_argument(
        "--weights",
        choices=("ema", "raw"),
        default="ema",
        help="which weights of the checkpoint: ema, the exponential moving average that "
        "sample and eval use, or raw, the optimizer's last weights (default: %(default)s)",
    )
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

    models = commands.add_parser(
        "models",
        help="list the models that load by name (genodiff.load(NAME), --checkpoint NAME)",
        description="One line per named model, its name first: those that ship with genodiff "
        "and those in the folders of $GENODIFF_MODELS_PATH, with a summary and the weights' "
        "licence (on a terminal, lines fit its width). With NAME: its model card, all of it.",
    )
    models.add_argument("name", nargs="?", help="print this model's card")
    models.set_defaults(run=_models)

    data = commands.add_parser("data", help="download and prepare datasets")
    datasets = data.add_subparsers(dest="dataset", required=True)
    hg38 = datasets.add_parser("hg38", help="hg38 FASTA + Basenji BED splits")
    hg38.add_argument("--dest", default="data/hg38", help="folder to write into")
    hg38.add_argument("--fasta-url", help="override the hg38.ml.fa.gz URL")
    hg38.add_argument("--bed-url", help="override the sequences_human.bed URL")
    hg38.set_defaults(run=_data_hg38)
    split = datasets.add_parser(
        "labelled-split",
        help="write a split of a labelled run's sequences for an oracle: a Genomic Benchmarks "
        "folder for genodiff finetune and one reference FASTA per class",
        description="Write the sequences of --split of CONFIG (a labelled run config: one FASTA "
        "per class, data.fasta_by_label, e.g. configs/conditional_species.yaml, or a Genomic "
        "Benchmarks folder, e.g. configs/conditional_demo.yaml) to --dest: "
        "DEST/TASK/{train,test}/CLASS/*.txt (the split divided again by position per class: "
        "the last --oracle-test-fraction of each class's windows are the oracle's test set), "
        "DEST/reference/CLASS.fa (every window of the class in the split) and "
        "DEST/manifest.json. Train an oracle with genodiff finetune benchmark.root=DEST "
        "benchmark.tasks=[TASK]; use it with genodiff evaluate-samples --oracle.",
    )
    split.add_argument("config", help="labelled run config, e.g. configs/conditional_demo.yaml")
    split.add_argument("overrides", nargs="*", help="key=value overrides, as for genodiff train")
    split.add_argument(
        "--split",
        choices=("train", "valid", "test"),
        default="test",
        help="the split to write; the generator never trains on valid or test "
        "(default: %(default)s)",
    )
    split.add_argument("--dest", required=True, help="folder to write (new or empty)")
    split.add_argument("--task", help="task folder name (default: the config's name)")
    split.add_argument(
        "--oracle-test-fraction",
        dest="test_fraction",
        metavar="ORACLE_TEST_FRACTION",
        type=float,
        default=0.2,
        help="share of each class's windows (the last ones) in the oracle's test set "
        "(default: %(default)s)",
    )
    split.add_argument(
        "--overwrite", action="store_true", help="replace a non-empty --dest, all of it"
    )
    split.set_defaults(run=_data_labelled_split)
    for command in commands.choices.values():
        _add_threads_flag(command, default=None)
    for dataset in datasets.choices.values():  # after its name too: data hg38 --threads 2
        _add_threads_flag(dataset, default=argparse.SUPPRESS)  # given before it, it is kept
    return parser


def _add_threads_flag(parser: argparse.ArgumentParser, default: Any) -> None:
    """--threads (``genodiff.threads``); ``default`` argparse.SUPPRESS on a subcommand of a
    command that has it, so that the command's value is kept when the subcommand gets none."""
    parser.add_argument(
        "--threads",
        metavar="auto|system|N",
        default=default,
        help="CPU threads to compute on: auto (the cores free when the command starts), "
        "system (torch's and OpenMP's own choice) or a number; several processes on this "
        "machine share them (default: $GENODIFF_THREADS, else auto; "
        "docs/troubleshooting.md#a-shared-machine)",
    )


# The file system's refusals about the user's files and disk, which the user fixes.
FILE_SYSTEM_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def is_user_error(err: BaseException) -> bool:
    """True for an error in what the user gave (``UserInputError``) or about the user's files
    and disk (missing, not allowed, disk full, past the file-size limit); anything else is a
    bug."""
    if isinstance(err, (UserInputError, *FILE_SYSTEM_ERRORS)):
        return True
    return isinstance(err, OSError) and err.errno in DISK_ERRNOS


def option_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The option that sets each argument of ``parser`` and of its subcommands, in its first
    long spelling, by the argument's name (``batch_size`` -> ``--batch-size``, ``top_p`` ->
    ``--top-p``, ``data_file`` -> ``--file``): how the CLI names a library parameter at fault."""
    names: dict[str, str] = {}
    for action in parser._actions:  # argparse lists its actions nowhere public
        if isinstance(action.choices, dict):  # subcommands
            for sub in action.choices.values():
                names |= option_names(sub)
        elif action.option_strings:
            long = [name for name in action.option_strings if name.startswith("--")]
            names.setdefault(action.dest, (long or action.option_strings)[0])
    return names


def command_options(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """``option_names`` of the subcommand ``command`` alone (its own subcommands included)."""
    for action in parser._actions:  # argparse lists its actions nowhere public
        if isinstance(action.choices, dict) and command in action.choices:
            return option_names(action.choices[command])
    return {}


def with_options(message: BaseException, options: dict[str, str]) -> str:
    """The text of ``message`` (an error, a warning) as a command says it: each of its
    ``parameter``'s names (``UserInputError``, ``UserInputWarning``) that the text gives in
    parentheses, the library's way to point at an argument (``(data_file)``), becomes its
    option (``(--file)``), and the options the text then does not name are added at its end."""
    text = str(message)
    parameter = getattr(message, "parameter", None) or ()
    names = [n for n in ((parameter,) if isinstance(parameter, str) else parameter) if n in options]
    for name in names:
        text = text.replace(f"({name})", f"({options[name]})")
    flags = [options[n] for n in names if options[n] not in text]
    return f"{text} ({', '.join(flags)})" if flags else text


def error_line(err: BaseException, command: str, options: dict[str, str]) -> str:
    """``genodiff COMMAND: error: MESSAGE``, with the options of the parameters at fault (a
    ``UserInputError``'s ``parameter``) added that the message does not name already."""
    return f"genodiff {command}: error: {with_options(err, options)}"


@contextmanager
def warnings_as_lines(command: str, options: dict[str, str] | None = None) -> Iterator[None]:
    """For the ``with`` block, genodiff's own warnings printed as one line on stderr,
    ``genodiff COMMAND: warning: MESSAGE``, as its errors are (not Python's ``FILE:LINE:
    UserWarning:`` and the source line after it), with the ``options`` of a
    ``UserInputWarning``'s parameters (``command_options``), and by the main process alone
    (``progress.shown_by_the_main_process_alone``, as from Python): the other processes of a
    multi-process run (``--devices N``) meet the same warnings; other libraries' warnings as
    Python shows them."""
    with warnings.catch_warnings():  # restores showwarning at the end
        python_shows = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            if is_genodiffs_own(message, filename):
                text = with_options(message, options or {})
                print(f"genodiff {command}: warning: {text}", file=file or sys.stderr)
            else:
                python_shows(message, category, filename, lineno, file, line)

        warnings.showwarning = shown_by_the_main_process_alone(show)
        yield


# What a command's refusal of a file that needs unknown classes unpickled offers instead of the
# library's keyword, which no command takes.
UNSAFE_PICKLE_OPT_IN = (
    "no command reads such a file; from Python, genodiff.checkpoints.load_pretrained(FOLDER, "
    "stub_unknown_classes=True) (read_checkpoint_file for one file)"
)


def _for_the_command_line(err: Exception) -> Exception:
    """``err`` as a command says it: an ``UnsafePickleError`` offers what a user can run."""
    reader = sys.modules.get("genodiff.checkpoints.io")  # not loaded: no file was read
    if reader is not None and isinstance(err, reader.UnsafePickleError):
        return err.offering(UNSAFE_PICKLE_OPT_IN)
    return err


def _take_overrides_typed_after_options(args: argparse.Namespace, unknown: list[str]) -> list[str]:
    """For a command that takes overrides: the overrides (``key=value``, ``+key=value``,
    ``~key``) typed after an option (``genodiff train demo a=1 --no-progress b=2``), which
    argparse leaves unparsed, appended to ``args.overrides`` in the order typed. Returns the
    arguments still unknown."""
    if not isinstance(getattr(args, "overrides", None), list):
        return unknown
    overrides = [w for w in unknown if not w.startswith("-") and ("=" in w or w.startswith("~"))]
    args.overrides += overrides
    return [word for word in unknown if word not in overrides]


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and the parsers of its (sub)commands, all the way down."""
    yield parser
    for action in parser._actions:  # argparse lists its actions nowhere public
        if isinstance(action.choices, dict):
            for command in action.choices.values():
                yield from _parsers(command)


@contextmanager
def _nothing_required(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Within: no argument of ``parser`` or of its commands is required; after, as before."""
    required = [a for p in _parsers(parser) for a in p._actions if a.required]
    for action in required:
        action.required = False
    try:
        yield
    finally:
        for action in required:
            action.required = True


def _parsed_leniently(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, list[str]] | None:
    """``parser.parse_known_args(argv)`` with nothing required and nothing printed; None where
    argv has another error (or asks for --help, --version): the real parse then says it."""
    quiet = io.StringIO()
    with _nothing_required(parser), redirect_stdout(quiet), redirect_stderr(quiet):
        try:
            return parser.parse_known_args(argv)
        except SystemExit:
            return None


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, the overrides typed after an option included, that refuses
    arguments no option takes before missing required ones: a mistyped required option is
    both (``genodiff sample --checkpiont x.ckpt``), and its "did you mean" comes first."""
    lenient = _parsed_leniently(parser, argv)
    if lenient is not None:
        args, unknown = lenient
        unknown = _take_overrides_typed_after_options(args, unknown)
        if unknown:
            _refuse_unknown_arguments(parser, args, unknown)
    args, unknown = parser.parse_known_args(argv)  # says what is missing, if anything
    _take_overrides_typed_after_options(args, unknown)  # nothing else: refused above
    return args


def _refuse_unknown_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]
) -> None:
    """Exit as ``parse_args`` does for arguments no option takes, but from the command's own
    parser (``genodiff sample: error: ...`` with its usage), naming the options spelled close
    to a mistyped one (``--lenght``: did you mean --length?)."""
    command = parser
    while True:  # down to the (sub)command the arguments chose: sample, data hg38, ...
        chooser = next((a for a in command._actions if isinstance(a.choices, dict)), None)
        if chooser is None or getattr(args, chooser.dest) is None:  # None: not chosen
            break
        command = chooser.choices[getattr(args, chooser.dest)]
    options = [name for action in command._actions for name in action.option_strings]
    typed = [word.split("=", 1)[0] for word in unknown if word.startswith("--")]
    close = [match for word in typed for match in difflib.get_close_matches(word, options, n=1)]
    meant = f" (did you mean {' or '.join(close)}?)" if close else ""
    command.error(f"unrecognized arguments: {' '.join(unknown)}{meant}")


SIGPIPE_EXIT_STATUS = 128 + 13  # 13: SIGPIPE, which Windows' signal module lacks


def _stdout_reader_left() -> bool:
    """Whether standard output is a pipe whose reader has closed it (``genodiff models NAME |
    head``), the one broken pipe that ends a command quietly: another one (a socket, a
    child's pipe) is an error of its own. The pipe's write end then polls as an error."""
    if not hasattr(select, "poll"):  # Windows: no poll on a pipe
        return False
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor behind sys.stdout
        return False


def _reader_left() -> int:
    """The end of a command whose output's reader left (``_stdout_reader_left``): no
    traceback, as for any program whose pipe closes; the exit status a shell gives to a
    program that SIGPIPE stops."""
    # Unflushed output would raise again at exit: it goes nowhere instead.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return SIGPIPE_EXIT_STATUS


# What a command stopped at once by Ctrl-C kept, and how to go on with it (a command not named
# keeps nothing: run it again). A first Ctrl-C of a training stops it after its step instead.
AFTER_CTRL_C = {
    "sample": "run the same command with --resume to keep the samples written and draw the rest",
    "train": "the checkpoints it saved are kept (ckpt_path=last resumes an unfinished run)",
    "finetune": "run the same command again to resume (finished runs are skipped)",
    "data": "run the same command again (finished files are skipped, a download resumes)",
}
CTRL_C_EXIT_STATUS = 128 + signal.SIGINT  # 130: what a shell reports of a process Ctrl-C ended


def interrupted_line(command: str) -> str:
    """The one line that a command stopped at once by Ctrl-C prints."""
    after = AFTER_CTRL_C.get(command, "run it again")
    return f"genodiff {command}: stopped by Ctrl-C; {after}"


def _main_process_ends() -> bool:
    """In another process of a multi-process run that is stopping: whether the main process
    ends too (``genodiff.parallel.main_process_ends``): it then says why, once."""
    from genodiff.parallel import main_process_ends

    return main_process_ends()


def main(argv: list[str] | None = None) -> int:
    """Run a command; a user error is one line on stderr (exit status 2), Ctrl-C one line
    saying how to go on (exit status 130), any other error raises with its traceback
    (``GENODIFF_DEBUG=1``: every error and Ctrl-C do)."""
    parser = build_parser()
    args = parse_arguments(parser, argv)
    try:
        configure_threads(args.threads)
        with warnings_as_lines(args.command, command_options(parser, args.command)):
            args.run(args)
        sys.stdout.flush()  # a reader that left (`| head`) shows here, not at exit
    except BrokenPipeError:
        if not _stdout_reader_left():
            raise
        return _reader_left()
    except SystemExit as stop:  # a training stopped by a signal (status 128 + its number), ...
        if stop.code and not is_main_process():  # let the main process say it and end first
            _main_process_ends()
        raise
    except KeyboardInterrupt:
        if os.environ.get("GENODIFF_DEBUG"):
            raise
        if is_main_process():
            print(f"\n{interrupted_line(args.command)}", file=sys.stderr)
        else:  # another process of a multi-process run: stops silently, after the main one
            _main_process_ends()
        return CTRL_C_EXIT_STATUS
    except Exception as err:
        if os.environ.get("GENODIFF_DEBUG") or not is_user_error(err):
            raise
        if not is_main_process() and _main_process_ends():
            return 2  # the main process met the error too and printed its line
        err = _for_the_command_line(err)
        print(error_line(err, args.command, command_options(parser, args.command)), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One GPU session of issue 35 as ONE command: train one model, ship it, bring everything back.

A session of the device machine has 15 minutes (its start included) and 10 minutes a command,
and sends the checkout plus at most 64 MiB: so each session trains ONE of the models that ship
with genodiff (models/README.md) and returns it through ``$OUT``. Two parts:

``prepare`` (here, before the session) fills the git-ignored folder ``.gpu_carry/`` that the
``run`` tool carries: the prebuilt wheels of ``../shared/gpu`` (checked against their
SHA256SUMS), the public chrX FASTA recompressed with xz (gzip's 19.8 MB do not fit beside the
wheels; xz gives 15.7 MB) and its sha256s, and optionally the run folder of an earlier session
to resume; it adds up what would travel (the checkout's files and the folder) and refuses a
session over 64 MiB.

``run`` (on the GPU machine) does, each step timed into ``$OUT/session.json``:

1. installs the carried wheels into ``<work>/site`` (``pip install --no-index --no-deps``) and
   puts them on the path of this process and of every command it starts;
2. writes the training FASTA as BGZF (``genodiff.data.genome.bgzip_fasta``), after checking
   the decompressed chrX against the sha256 that ``prepare`` recorded;
3. trains with ``genodiff train``: the config of the job with the overrides of
   ``bench/hg38_table.py --trainer gpu --full-size`` (bf16, 4 loader workers, one optimizer
   step per batch of 128 windows, lr 2e-3, EMA 0.999 with warm-up, validation every quarter),
   ``trainer.max_steps`` for the token target, and ``trainer.max_time`` so that training stops
   (and saves ``last.ckpt``) in time for the export: Lightning's timer counts the training
   time of resumed sessions too, so a resumed run gets the time it had plus this session's;
4. packs the run folder (``last.ckpt``, config, tokenizer, logs, ``gpu_sessions.json``: one
   record per session) into ``$OUT/NAME-run.tar`` at once, so a later failure loses nothing;
5. ships the run with ``bench/ship_model.py`` (export and model card: held-out perplexity on
   the test split and, for chrX, on the repository's chr22 slice; sample realism) into
   ``$OUT/NAME-model.tar``; ``session.log`` holds everything the commands printed.

A run that stops at ``--budget-seconds`` before the token target goes on in a later session
from its ``NAME-run.tar`` (``prepare --resume-from``, then ``run --resume-from``): the same
steps, schedule and data order as one uninterrupted run. ``--smoke`` runs the whole path on a
CPU in seconds (a tiny model, a few steps, the repository's chr22 slice standing in for chrX).

    python bench/gpu_session.py prepare [--resume-from NAME-run.tar] [--no-chrx]
    python3 bench/gpu_session.py run --job mdlm-chrx --out $OUT      # on the GPU machine
    python bench/gpu_session.py run --job mdlm-chrx --out /tmp/out --work /tmp/w --smoke

BENCHMARKS.md ("Prepared GPU sessions for issue 35") gives each session's ``run`` call.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import lzma
import math
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".gpu_carry"  # git-ignored (.gitignore): what the run tool's carry names
SHARED = ROOT.parent / "shared"  # ../shared beside the checkout: wheels and data (issue 35)
CHR22 = ROOT / "data" / "chr22_20-21Mb.fa.gz"
CHRX_XZ, CHRX_RECORD = "chrX.fa.xz", "chrX.json"
TRAVEL_LIMIT = 64 * 2**20  # bytes of the working tree a run call may send (device README)
# From starting `genodiff train` to Lightning's timer starting (imports, data index, model,
# first kernels); and the least training time worth a session.
STARTUP_SECONDS, MIN_TRAIN_SECONDS = 40, 30
LICENSE = "weights Apache-2.0 (as genodiff); data: public reference sequence (data/README.md)"
# Where a user gets the chrX the chrX models trained on (recorded with the shipped model).
CHRX_SOURCE = (
    "hs37chrXtrunc.fa.gz of Debian's smalt-examples package, recompressed as BGZF "
    '(data/README.md, "Human chrX")'
)
HISTORY = "gpu_sessions.json"  # in the run folder: one record per session that trained it


@dataclass(frozen=True)
class Job:
    """One model of issue 35: its config and recipe on a GPU, and a CPU-sized stand-in."""

    config: str
    window: int  # bp per training window
    tokens: int  # training-token target of the GPU run
    summary: str  # the model card's one line
    chrx: bool  # trains on the carried chrX (else on the repository's own data)
    gpu_model: tuple[str, ...] = ()  # overrides on top of the config's model for the GPU
    smoke_row: str | None = None  # bench/hg38_table.py's row whose ~82 K model --smoke uses


JOBS = {
    "mdlm-chrx": Job(
        "configs/hg38.yaml",
        1024,
        500_000_000,
        "MDLM, Caduceus-Ph d118 x 4, trained on human chrX (GRCh37, first 70 Mb)",
        chrx=True,
        smoke_row="mdlm",
    ),
    "ar-chrx": Job(
        "configs/hg38_ar_mamba.yaml",
        1024,
        500_000_000,
        "Autoregressive Mamba d128 x 4, trained on human chrX (GRCh37, first 70 Mb)",
        chrx=True,
        smoke_row="ar_mamba",
    ),
    # The bundled species data (human chr22 slice, E. coli, S. aureus: 4,046 training windows
    # of 256 bp): the configs' MDLM model at 50 M tokens, about 48 passes over them.
    "species-conditional": Job(
        "configs/conditional_species.yaml",
        256,
        50_000_000,
        "Class-conditional MDLM, Caduceus-Ph d118 x 4, on human, E. coli and S. aureus DNA",
        chrx=False,
        gpu_model=("model=caduceus_ph",),
    ),
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def copy_hashing(source: BinaryIO, dest: BinaryIO, digest: Any) -> int:
    """Copy ``source`` to ``dest`` in blocks, feeding ``digest``; the bytes copied."""
    size = 0
    while block := source.read(1 << 20):
        digest.update(block)
        dest.write(block)
        size += len(block)
    return size


# ------------------------------------------------------------------------- prepare (here)


def prepare(args: argparse.Namespace) -> None:
    carry = args.carry
    carry.mkdir(parents=True, exist_ok=True)
    copy_wheels(args.wheels, carry / "wheels")
    if args.chrx is not None:
        recompress_chrx(args.chrx, carry)
    if args.resume_from is not None:
        (carry / "resume").mkdir(exist_ok=True)
        shutil.copy2(args.resume_from, carry / "resume" / args.resume_from.name)
    tree, carried = travelling_bytes(ROOT), folder_bytes(carry)
    print(f"checkout files that travel: {tree:,} bytes")
    for path in sorted(p for p in carry.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")
    total = tree + carried
    print(f"total: {total:,} bytes of {TRAVEL_LIMIT:,} (64 MiB)")
    if total > TRAVEL_LIMIT:
        sys.exit(
            f"gpu_session.py: {total - TRAVEL_LIMIT:,} bytes over the 64 MiB a run call sends; "
            f"carry less in {carry} (BENCHMARKS.md: Prepared GPU sessions for issue 35)"
        )


def copy_wheels(source: Path, dest: Path) -> None:
    """The wheels of ``source`` into ``dest``, each checked against ``source/SHA256SUMS``."""
    sums = dict(reversed(line.split()) for line in (source / "SHA256SUMS").read_text().splitlines())
    dest.mkdir(exist_ok=True)
    for wheel in sorted(source.glob("*.whl")):
        if sha256(wheel) != sums.get(wheel.name):
            sys.exit(f"gpu_session.py: {wheel} does not match {source / 'SHA256SUMS'}")
        shutil.copyfile(wheel, dest / wheel.name)


def recompress_chrx(source: Path, carry: Path) -> None:
    """``source`` (gzip FASTA) as ``carry/chrX.fa.xz``, with the sha256 of the gzip file and of
    the FASTA in ``carry/chrX.json``; kept when the record names the same source file."""
    record_file, source_sha = carry / CHRX_RECORD, sha256(source)
    kept = record_file.exists() and (carry / CHRX_XZ).exists()
    if kept and json.loads(record_file.read_text())["source_sha256"] == source_sha:
        return
    digest = hashlib.sha256()
    with gzip.open(source, "rb") as fin, lzma.open(carry / CHRX_XZ, "wb", preset=9) as fout:
        size = copy_hashing(fin, fout, digest)
    record = {
        "source": source.name,
        "source_sha256": source_sha,
        "fasta_sha256": digest.hexdigest(),
        "fasta_bytes": size,
    }
    record_file.write_text(json.dumps(record, indent=2) + "\n")


def travelling_bytes(root: Path) -> int:
    """Bytes of the checkout's files a run call sends: tracked, and untracked not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    files = (root / os.fsdecode(name) for name in listed if name)
    return sum(path.stat().st_size for path in files if path.is_file())


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


# ------------------------------------------------------------------- run (the GPU machine)


class Session:
    """The session's record (``$OUT/session.json``, rewritten after every step) and log."""

    def __init__(self, out: Path, record: dict[str, Any]) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.record, self.log = out, record, out / "session.log"
        self.start = time.monotonic()
        record["steps_seconds"] = {}

    def say(self, line: str) -> None:
        print(f"gpu_session: {line}", flush=True)
        with self.log.open("a") as log:
            log.write(f"gpu_session: {line}\n")

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.say(f"{name} ...")
        began = time.monotonic()
        try:
            yield
        finally:
            seconds = round(time.monotonic() - began, 1)
            self.record["steps_seconds"][name] = seconds
            self.save()
            self.say(f"{name}: {seconds} s")

    def save(self) -> None:
        self.record["elapsed_seconds"] = round(time.monotonic() - self.start, 1)
        (self.out / "session.json").write_text(json.dumps(self.record, indent=2) + "\n")

    def run(self, command: list[str], env: dict[str, str]) -> None:
        """Run ``command`` in the checkout, its output streamed here and into the log; exit
        (the record saved) when it fails."""
        self.say("$ " + shlex.join(command))
        with (
            self.log.open("a") as log,
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ) as process,
        ):
            for line in process.stdout:
                sys.stdout.write(line)
                log.write(line)
        if process.returncode != 0:
            failed = f"{' '.join(command[:4])} ... exited with status {process.returncode}"
            self.record["failed"] = failed
            self.save()
            sys.exit(f"gpu_session.py: {failed}; see {self.log}")


def install_wheels(wheels: Path | None, site: Path, session: Session) -> dict[str, str]:
    """The carried wheels installed into ``site``, first on this process's path; the
    environment for the commands this session starts (``site`` and the checkout first).
    ``wheels`` None or not a folder: the packages installed here."""
    path = [str(ROOT)]
    sys.path.insert(0, str(ROOT))  # genodiff from this checkout: the GPU machine has no install
    if wheels is not None and wheels.is_dir():
        with session.step("install wheels"):
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
            command += ["--no-compile", "--target", str(site), *map(str, wheels.glob("*.whl"))]
            session.run(command, dict(os.environ))
        sys.path.insert(0, str(site))
        path.insert(0, str(site))
    else:
        session.say(f"no wheels in {wheels}: using the packages installed here")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}


def training_fasta(source: Path, work: Path, session: Session) -> Path:
    """``source`` (xz with its ``chrX.json`` beside it, gzip or plain) as ``work/chrX.fa.gz``
    (BGZF); the xz's FASTA (kept as ``work/chrX.fa``) must have the sha256 that ``prepare``
    recorded."""
    from genodiff.data.genome import bgzip_fasta

    if not source.is_file():
        sys.exit(f"gpu_session.py: {source} not found: run `gpu_session.py prepare` first")
    bgzf = work / "chrX.fa.gz"
    with session.step("data"):
        if source.suffix == ".xz":
            plain, digest = work / "chrX.fa", hashlib.sha256()
            with lzma.open(source, "rb") as fin, plain.open("wb") as fout:
                copy_hashing(fin, fout, digest)
            expected = json.loads((source.parent / CHRX_RECORD).read_text())
            if digest.hexdigest() != expected["fasta_sha256"]:
                sys.exit(f"gpu_session.py: {source} is not the FASTA {CHRX_RECORD} names")
            session.record["data"] = expected
            bgzip_fasta(plain, bgzf)  # the plain file stays: its sha256 goes on the card
        else:
            bgzip_fasta(source, bgzf)
        session.record.setdefault("data", {})["bgzf_sha256"] = sha256(bgzf)
    return bgzf


def timer_seconds(checkpoint: Path) -> float:
    """The training seconds Lightning's timer (``trainer.max_time``) had counted when
    ``checkpoint`` was saved; a resumed run's timer goes on from there (0: no timer ran)."""
    from genodiff.checkpoints.io import read_checkpoint_file

    timer = read_checkpoint_file(checkpoint, mmap=True).get("callbacks", {}).get("Timer", {})
    return float(timer.get("time_elapsed", {}).get("train", 0.0))


def max_time_seconds(seconds_left: float, export_reserve: float, before: float) -> int:
    """``trainer.max_time`` (seconds of training in all, ``before`` of them in earlier
    sessions) that stops training ``export_reserve`` seconds before the budget ends."""
    allowed = seconds_left - export_reserve - STARTUP_SECONDS
    if allowed < MIN_TRAIN_SECONDS:
        sys.exit(
            f"gpu_session.py: {allowed:.0f} s left to train within --budget-seconds "
            f"(less than {MIN_TRAIN_SECONDS} s): raise the budget or lower --export-reserve"
        )
    return math.floor(before + allowed)


def train_overrides(
    job: Job, args: argparse.Namespace, fasta: Path | None, run: Path, steps: int
) -> list[str]:
    """``genodiff train``'s overrides: bench/hg38_table.py's recipe (``--trainer gpu
    --full-size``, or its ~82 K CPU model with ``--smoke``) for ``steps`` steps."""
    import hg38_table  # bench/: needs genodiff's dependencies, installed by now

    recipe = argparse.Namespace(
        fasta=fasta,
        batch_size=args.batch_size,
        steps=steps,
        lr=args.lr,
        trainer="cpu" if args.smoke else "gpu",
    )
    if job.chrx:
        overrides = hg38_table.common_overrides(recipe, run)
    else:
        overrides = [f"data.max_length={job.window}", *hg38_table.recipe_overrides(recipe, run)]
    if args.smoke:
        model = hg38_table.ROWS[job.smoke_row][1] if job.smoke_row else []
        return [*overrides, *model, "samples.steps=8", "data.eval_batch_size=4"]
    return [*overrides, *job.gpu_model]


def unpack(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")


def pack(folder: Path, archive: Path, skip: tuple[str, ...] = ()) -> None:
    """``folder``'s files, but those whose name starts with one of ``skip``, into ``archive``."""

    def keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if Path(member.name).name.startswith(skip) else member

    with tarfile.open(archive, "w") as tar:
        tar.add(folder, arcname=folder.name, filter=keep)


def hardware() -> str:
    import torch

    if torch.cuda.is_available():
        return f"one {torch.cuda.get_device_name(0)}"
    return "CPU"


def run_session(args: argparse.Namespace) -> None:
    job = JOBS[args.job]
    work, out = args.work, args.out
    if (work / "run").exists():
        sys.exit(f"gpu_session.py: {work / 'run'} exists; give another --work")
    if args.resume_from is not None and not args.resume_from.is_file():
        sys.exit(f"gpu_session.py: --resume-from {args.resume_from}: no such file")
    work.mkdir(parents=True, exist_ok=True)
    steps = math.ceil(args.tokens / (args.batch_size * job.window))
    record = {"job": args.job, "argv": sys.argv[1:], "target_steps": steps}
    session = Session(out, record)
    record["hardware"] = hardware()
    if not args.smoke and record["hardware"] == "CPU":
        sys.exit("gpu_session.py run needs a CUDA GPU (use --smoke on a CPU)")
    env = install_wheels(None if args.smoke else args.carry / "wheels", work / "site", session)
    fasta = None
    if job.chrx:
        fasta = training_fasta(CHR22 if args.smoke else args.carry / CHRX_XZ, work, session)
    run, history, trained = work / "run", [], 0
    if args.resume_from is not None:
        unpack(args.resume_from, work)  # the tar holds the folder "run"
        history = json.loads((run / HISTORY).read_text())
        trained = checkpoint_step(run / "checkpoints" / "last.ckpt")
    if trained >= steps:
        # trained in full by earlier sessions (one whose export failed): ship it as it is
        record.update(global_step=trained, target_reached=True)
        session.say(f"the run reached step {trained} of {steps}: no training")
    else:
        train(session, job, args, run, fasta, steps, history, env)
    if not record["target_reached"]:
        session.say(
            f"stopped at step {record['global_step']} of {steps}: resume in another session "
            f"with prepare --resume-from {args.job}-run.tar and run --resume-from"
        )
    if args.ship:
        ship(session, job, args, run, history, env)
    session.save()


def train(
    session: Session,
    job: Job,
    args: argparse.Namespace,
    run: Path,
    fasta: Path | None,
    steps: int,
    history: list[dict[str, Any]],
    env: dict[str, str],
) -> None:
    """``genodiff train`` of the job into ``run`` (resumed from its ``last.ckpt`` if there)
    towards ``steps``, stopped by ``trainer.max_time`` in time for the export before the
    session's ``--budget-seconds`` end; the run comes back even if training fails."""
    checkpoint = run / "checkpoints" / "last.ckpt"
    before = timer_seconds(checkpoint) if checkpoint.exists() else 0.0
    seconds_left = session.start + args.budget_seconds - time.monotonic()
    overrides = train_overrides(job, args, fasta, run, steps)
    max_time = max_time_seconds(seconds_left, args.export_reserve, before)
    overrides.append(f"trainer.max_time={{seconds:{max_time}}}")
    if args.resume_from is not None:
        overrides.append("ckpt_path=last")
    command = [sys.executable, "-m", "genodiff.cli", "train", job.config, *overrides]
    shown = ["genodiff", *command[3:]]  # the command as a user types it
    session.record.update(train_command=shown, trainer_max_time=max_time, timer_before=before)
    try:
        with session.step("train"):
            session.run(command, env)
    finally:  # a training that failed brings back the checkpoint it saved too
        if checkpoint.exists():
            bring_back_run(session, checkpoint, history, job, args, steps)


def checkpoint_step(checkpoint: Path) -> int:
    from genodiff.checkpoints.io import read_checkpoint_file

    return int(read_checkpoint_file(checkpoint, mmap=True)["global_step"])


def bring_back_run(
    session: Session,
    checkpoint: Path,
    history: list[dict[str, Any]],
    job: Job,
    args: argparse.Namespace,
    steps: int,
) -> None:
    """Steps and tokens of ``checkpoint`` into the record, this session into the run's
    ``gpu_sessions.json``, and the run folder (no best-step checkpoint) into
    ``$OUT/NAME-run.tar``."""
    record, run = session.record, checkpoint.parent.parent
    step = checkpoint_step(checkpoint)
    record.update(
        global_step=step,
        tokens=step * args.batch_size * job.window,
        target_reached=step >= steps,
        timer_after=timer_seconds(checkpoint),
    )
    history.append({k: record[k] for k in ("hardware", "train_command", "global_step")})
    history[-1]["train_seconds"] = record["steps_seconds"]["train"]
    (run / HISTORY).write_text(json.dumps(history, indent=2) + "\n")
    with session.step("pack run"):
        pack(run, session.out / f"{args.job}-run.tar", skip=("best-step", ".lock"))


def ship(
    session: Session,
    job: Job,
    args: argparse.Namespace,
    run: Path,
    history: list[dict[str, Any]],
    env: dict[str, str],
) -> None:
    """bench/ship_model.py's export and card into ``$OUT/NAME-model.tar``."""
    options = []  # the species data ship with genodiff: the export names them in the repository
    if job.chrx:
        options = ["--heldout", f"chr22={CHR22.relative_to(ROOT)}", "--data-source", CHRX_SOURCE]
    commands = " && ".join(shlex.join(h["train_command"]) for h in history)
    command = [sys.executable, "bench/ship_model.py", str(run), args.job]
    command += ["--summary", job.summary, "--license", LICENSE, *options]
    command += ["--command", commands, "--dest", str(args.work / "models")]
    command += ["--hardware", ", ".join(sorted({h["hardware"] for h in history}))]
    command += ["--wall-seconds", str(round(sum(h["train_seconds"] for h in history)))]
    command += ["--num-samples", str(args.num_samples)]
    if args.num_windows is not None:
        command += ["--num-windows", str(args.num_windows)]
    with session.step("ship"):
        session.run(command, env)
        pack(args.work / "models" / args.job, session.out / f"{args.job}-model.tar")


# ------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ready = commands.add_parser("prepare", help="fill the carried folder (here)")
    ready.add_argument("--carry", type=Path, default=CARRY)
    ready.add_argument("--wheels", type=Path, default=SHARED / "gpu")
    chrx = SHARED / "data" / "human_chrX_GRCh37_trunc.fa.gz"
    ready.add_argument("--chrx", type=Path, default=chrx, help="gzip FASTA (default: %(default)s)")
    ready.add_argument("--no-chrx", dest="chrx", action="store_const", const=None)
    ready.add_argument("--resume-from", type=Path, help="a session's NAME-run.tar")
    session = commands.add_parser("run", help="one session (on the GPU machine)")
    session.add_argument("--job", choices=JOBS, required=True)
    session.add_argument("--out", type=Path, required=True, help="what comes back ($OUT)")
    session.add_argument("--carry", type=Path, default=CARRY)
    session.add_argument(
        "--work", type=Path, help="scratch folder (default: /tmp/genodiff_session/JOB)"
    )
    session.add_argument("--resume-from", type=Path, help="a NAME-run.tar of an earlier session")
    session.add_argument("--tokens", type=int, help="training tokens (default: the job's)")
    session.add_argument("--batch-size", type=int, help="windows per step (default 128)")
    session.add_argument("--lr", type=float, default=2e-3)
    session.add_argument(
        "--budget-seconds", type=float, default=540, help="this command's wall time, all in"
    )
    session.add_argument(
        "--export-reserve", type=float, default=100, help="seconds kept after training"
    )
    session.add_argument("--num-samples", type=int, help="for the card (default 64)")
    session.add_argument("--num-windows", type=int, help="scored per file (default: all)")
    session.add_argument("--no-ship", dest="ship", action="store_false", help="train and pack")
    session.add_argument("--smoke", action="store_true", help="the whole path on a CPU, tiny")
    args = parser.parse_args(argv)
    if args.command == "run":  # --smoke: a few steps of 4 windows, a few samples and windows
        if args.work is None:  # one folder per job: two jobs can run on one warm machine
            args.work = Path("/tmp/genodiff_session") / args.job
        window = JOBS[args.job].window
        smoke = (4, 3 * 4 * window, 4, 8)
        defaults = smoke if args.smoke else (128, JOBS[args.job].tokens, 64, None)
        names = ("batch_size", "tokens", "num_samples", "num_windows")
        for name, value in zip(names, defaults, strict=True):
            if getattr(args, name) is None:
                setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.command == "prepare":
        prepare(args)
    else:
        run_session(args)


if __name__ == "__main__":
    main()

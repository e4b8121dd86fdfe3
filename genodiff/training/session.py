"""The one way a run that trains takes its output folder and fits: ``genodiff train``,
``genodiff classifier`` and ``genodiff finetune`` all go "checks -> hold the folder -> fit".

1. Checks (each command's own, then ``check_output``): nothing is written yet; a wrong config,
   missing data or a folder that holds another run fails here.
2. ``hold_output``: the main process (``genodiff.progress.is_main_process``: global rank 0 of a
   multi-process run) creates the folder, takes its lock (``run_folder.hold``) and writes the
   run's ``config.yaml`` atomically; the other processes of a DDP run write nothing there.
3. ``fit``: Lightning's ``Trainer.fit``; a SIGTERM (a scheduler's pre-emption) leaves the
   latest checkpoint (``LatestCheckpoint``) and ends the process with status 143 and a line
   saying how to resume (``exit_when_stopped``, which also takes a test after the fit). A
   first Ctrl-C (SIGINT) stops the run the same way (status 130); a second one interrupts at
   once, as Lightning does, and exits with status 130 too.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import OmegaConf

from genodiff.atomic_files import write_text
from genodiff.checkpoints import run_folder
from genodiff.config import ConfigError, resolve_config_path
from genodiff.progress import is_main_process

CONFIG_FILE = "config.yaml"


def check_output(
    output_dir: Path, resume: Path | None, resume_hint: str | None, experiment: str | Path
) -> None:
    """In the main process only: ConfigError unless ``output_dir`` may take this run (it
    holds no other run's results, ``run_folder.check_output_dir``, and a new run's
    ``config.yaml`` would not replace the ``experiment`` file it was composed from);
    ``resume_hint`` says how to continue the run that is there (None: the command cannot
    resume)."""
    if not is_main_process():
        return
    run_folder.check_output_dir(output_dir, resume, resume_hint)
    written = output_dir / CONFIG_FILE
    new_run = resume is None  # a resumed run's config.yaml is a run's, written by genodiff
    if new_run and written.is_file() and written.samefile(resolve_config_path(experiment)):
        raise ConfigError(
            f"output_dir={output_dir} holds the experiment file {written} this run reads, "
            f"which the run would replace with its resolved config; choose another output_dir"
        )


def write_config(config: Mapping[str, Any], path: Path) -> None:
    """``config`` as YAML at ``path``, atomically."""
    write_text(path, OmegaConf.to_yaml(OmegaConf.create(dict(config))))


@contextmanager
def hold_output(output_dir: Path, config: Mapping[str, Any]) -> Iterator[bool]:
    """For the ``with`` block: in the main process, ``output_dir`` held (its lock) with the
    run's ``config.yaml`` written; in the others, nothing. Yields whether this is the main
    process (the one that may write into ``output_dir``)."""
    if not is_main_process():
        yield False
        return
    with run_folder.hold(output_dir):
        write_config(config, output_dir / CONFIG_FILE)
        yield True


def fit(
    trainer: L.Trainer,
    module: L.LightningModule,
    command: str,
    resume_hint: str,
    done_hint: str | None = None,
    **kwargs: Any,
) -> None:
    """``trainer.fit(module, **kwargs)``; on SIGTERM or a first Ctrl-C, the run stops as
    ``exit_when_stopped`` says."""
    stopped_by: list[signal.Signals] = [signal.SIGTERM]
    with (
        exit_when_stopped(trainer, command, resume_hint, done_hint, stopped_by),
        _ctrl_c_stops_like_sigterm(trainer, stopped_by),
    ):
        trainer.fit(module, **kwargs)


@contextmanager
def exit_when_stopped(
    trainer: L.Trainer,
    command: str,
    resume_hint: str,
    done_hint: str | None = None,
    stopped_by: list[signal.Signals] | None = None,
) -> Iterator[None]:
    """For the ``with`` block (a fit, or the test that follows it): when Lightning stops it on
    SIGTERM (or a first Ctrl-C: the last of ``stopped_by``), a line naming the step reached,
    the checkpoint kept and ``resume_hint`` (``done_hint`` instead, when given, if the stop
    came once ``trainer.max_steps`` was reached: a resume would have no step left), then exit
    status 128 + the signal's number (what a scheduler or a shell expects of a process it
    stopped; Lightning's own exception would exit with status 0). A Ctrl-C that interrupts
    Lightning at once (a second one in a fit, one in a test) says the same of the last
    checkpoint saved, with status 130 (Lightning's own exit is status 1)."""
    stopped_by = stopped_by or [signal.SIGTERM]
    try:
        yield
    except SIGTERMException:
        what = "Ctrl-C" if stopped_by[-1] == signal.SIGINT else "SIGTERM"
        if _says_for_the_run(trainer):
            print(_stopped_line(trainer, command, what, resume_hint, done_hint), file=sys.stderr)
        raise SystemExit(128 + stopped_by[-1]) from None
    except SystemExit as stop:
        if not isinstance(stop.__context__, KeyboardInterrupt):
            raise
        line = _stopped_line(trainer, command, "Ctrl-C at once", resume_hint, done_hint)
        if _says_for_the_run(trainer):
            print(line, file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None


def _says_for_the_run(trainer: L.Trainer) -> bool:
    """Whether this process says how its run stopped: the main process of a DDP run (the
    others stop at the same step: one line), any process of a world of one (each fine-tuning
    run of several processes: its own checkpoint)."""
    return trainer.world_size == 1 or is_main_process()


def _stopped_line(
    trainer: L.Trainer, command: str, what: str, resume_hint: str, done_hint: str | None
) -> str:
    """``genodiff COMMAND: stopped by WHAT at step N; saved LAST. HINT``."""
    callback = trainer.checkpoint_callback
    saved = callback.last_model_path if callback is not None else ""
    trained = 0 <= trainer.max_steps <= trainer.global_step
    hint = done_hint if trained and done_hint is not None else resume_hint
    return (
        f"genodiff {command}: stopped by {what} at step {trainer.global_step}"
        + (f"; saved {saved}" if saved else "")
        + f". {hint}"
    )


@contextmanager
def _ctrl_c_stops_like_sigterm(
    trainer: L.Trainer, stopped_by: list[signal.Signals]
) -> Iterator[None]:
    """For the ``with`` block: a first SIGINT asks Lightning to stop as on SIGTERM (at the end
    of the step, with the latest checkpoint saved) and is appended to ``stopped_by``; a second
    one raises KeyboardInterrupt at once. Only the main thread can take signals; elsewhere
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def stop_at_the_step_end(signum: int, frame: Any) -> None:
        if stopped_by[-1] == signal.SIGINT:  # the second Ctrl-C
            raise KeyboardInterrupt
        stopped_by.append(signal.SIGINT)
        trainer._signal_connector.received_sigterm = True  # what Lightning's SIGTERM sets
        if is_main_process():  # once for the run (every process of a DDP run takes it)
            print(
                "\ngenodiff: Ctrl-C: stopping after this step and saving the latest checkpoint "
                "(press Ctrl-C again to stop at once, without saving)",
                file=sys.stderr,
            )

    signal.signal(signal.SIGINT, stop_at_the_step_end)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

"""One run, one folder: which checkpoint a run resumes from, whether ``output_dir`` may be
used, and the lock a live run holds on it.

``genodiff train`` first checks (``check_steps``, ``resume_checkpoint``, ``check_resume``,
``check_output_dir``; none writes anything), then takes the folder with ``hold``: an exclusive
``flock`` on ``output_dir/.lock``, which the operating system releases when the process ends,
however it ends, so a crash never leaves the folder stuck. A run that ends removes the file; a
killed one leaves it, unlocked.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from genodiff.atomic_files import remove_temporary_files
from genodiff.checkpoints.load import (
    CHECKPOINT_FOLDER,
    GENERATOR,
    StoredCheckpoint,
    open_checkpoint,
)
from genodiff.config import ConfigError
from genodiff.errors import InputValueError, UserInputError

LOCK_FILE = ".lock"
LAST = "last.ckpt"
# What a run that trained leaves in its output_dir: a folder holding any of these has a run.
# (Its config.yaml, tokenizer.json and empty log folders alone are what a run stopped before
# its first step wrote: nothing to lose.)
RUN_RESULTS = (f"{CHECKPOINT_FOLDER}/*.ckpt", "logs/*/metrics.csv", "samples.*")
# What a resumed run must share with its checkpoint: the weights' shapes and meaning. Other
# settings (optim, trainer, ...) may change; the change is said and recorded.
KEPT_ON_RESUME = ("model", "tokenizer", "objective.name", "data.max_length")


def resume_checkpoint(ckpt_path: str | None, output_dir: Path) -> StoredCheckpoint | None:
    """The checkpoint a run resumes from, read once (``resumable``): None for a new run; for
    ``ckpt_path=last`` ``output_dir/checkpoints/last.ckpt``, or when that is missing or cannot
    be resumed the newest checkpoint beside it that can (said on stderr); else the file
    ``ckpt_path`` names. ConfigError when there is none to resume from (for a file named, with
    the reader's own line: damaged, unsafe, not a training checkpoint)."""
    if ckpt_path is None:
        return None
    if ckpt_path != "last":
        path = Path(ckpt_path).expanduser().resolve()
        if not path.is_file():  # a folder, even an exported one, holds no training state
            state = "is a folder" if path.is_dir() else "not found"
            raise ConfigError(f"ckpt_path={ckpt_path}: {state}; pass a .ckpt or ckpt_path=last")
        try:
            return resumable(path)
        except UserInputError as err:  # the reader's line, said of the setting
            raise ConfigError(
                f"ckpt_path={ckpt_path} is damaged or not a training checkpoint ({err}); pass "
                "another .ckpt or ckpt_path=last"
            ) from None
    if not output_dir.exists():  # no run was ever here: a new run, or a mistyped folder
        raise ConfigError(
            f"ckpt_path=last: output_dir={output_dir} does not exist, so there is nothing to "
            "resume. Check the spelling of output_dir, or leave ckpt_path out to start a run there"
        )
    folder = output_dir / CHECKPOINT_FOLDER
    candidates = sorted(folder.glob("*.ckpt"), key=lambda p: p.stat().st_mtime, reverse=True)
    candidates.sort(key=lambda p: p.name != LAST)  # last.ckpt first, then newest first
    for path in candidates:
        try:
            stored = resumable(path.resolve())
        except (UserInputError, OSError):  # damaged, unsafe, not a training checkpoint
            continue
        if path.name != LAST:
            print(
                f"genodiff: {folder / LAST} is missing or damaged; resuming from {path}, the "
                "newest loadable checkpoint",
                file=sys.stderr,
            )
        return stored
    found = f"only damaged checkpoints ({', '.join(p.name for p in candidates)})"
    raise ConfigError(
        f"ckpt_path=last: {folder} holds {found if candidates else 'no checkpoint'}, so there is "
        f"nothing to resume. To start afresh, remove {output_dir} or choose another output_dir, "
        "and leave ckpt_path out"
    )


def resumable(path: Path) -> StoredCheckpoint:
    """The training checkpoint ``path`` as ``open_checkpoint`` reads it (CRC-checked,
    ``weights_only``, its records plain; tensors mapped, not read), with the step it reached;
    the reader's one-line error, or an InputValueError naming it, when it cannot be resumed.
    Lightning's own read of it takes this one (``io.AtomicCheckpointIO.hand_over``)."""
    stored = open_checkpoint(path, GENERATOR, mmap=True)
    step = stored.content.get("global_step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InputValueError(
            f"{path} cannot be resumed: it records no training step (global_step is {step!r})"
        )
    return stored


def check_steps(trainer: Mapping[str, Any], done: int = 0) -> None:
    """ConfigError when the ``trainer`` section leaves nothing to train: ``max_steps`` or
    ``max_epochs`` 0, or a ``max_steps`` at or below ``done``, the step a resumed checkpoint
    reached (-1 means no limit)."""
    for key in ("max_steps", "max_epochs"):
        if trainer.get(key) == 0:
            raise ConfigError(f"trainer.{key}=0 trains nothing: give at least 1 (-1: no limit)")
    max_steps = trainer.get("max_steps", -1)
    if done and max_steps is not None and 0 <= max_steps <= done:
        raise ConfigError(
            f"trainer.max_steps={max_steps}: the checkpoint is already trained to step {done}; "
            f"raise trainer.max_steps above {done} to continue"
        )


def check_resume(config: Mapping[str, Any], checkpoint: StoredCheckpoint) -> list[str]:
    """The settings ``config`` (the resumed run's) changes from those ``checkpoint`` (as
    ``resumable`` read it) was trained with, as ``key: old -> new``. ConfigError, naming them,
    when a setting of ``KEPT_ON_RESUME`` differs (the weights would not fit, or would mean
    something else) or when ``trainer.max_steps`` leaves nothing to train (``check_steps``)."""
    recorded = _flat(checkpoint.record)
    current = _flat(config)
    changed = {
        key: f"{key}: {recorded[key]} -> {current[key]}"
        for key in sorted(recorded.keys() & current.keys())
        if recorded[key] != current[key] and key != "ckpt_path"
    }
    kept = [key for key in changed if key.startswith(KEPT_ON_RESUME)]
    if kept:
        # A run started with overrides (model.d_model=64) and resumed without them lacks
        # them, one resumed with new ones has them too many: either way, the trained values.
        trained = " ".join(_trained_value(key, recorded[key]) for key in kept)
        raise ConfigError(
            f"{checkpoint.source} was trained with other settings than this run's "
            f"({'; '.join(changed[key] for key in kept)}); a resumed run keeps its "
            f"{', '.join(KEPT_ON_RESUME[:-1])} and {KEPT_ON_RESUME[-1]}: resume with the "
            f"values it was trained with ({trained}), or start a new run in another output_dir"
        )
    check_steps(config["trainer"], checkpoint.content["global_step"])
    return list(changed.values())


def _trained_value(key: str, value: Any) -> str:
    """How to give ``key`` its trained ``value`` again: an override (``model.d_model=64``), or
    for a section's ``name`` the group that sets it (``model.name=caduceus`` laid over another
    model group, such as ``model=mamba``, would keep that group's other settings)."""
    section, _, field = key.rpartition(".")
    if field == "name" and section:
        return f"a {section} group of name {_as_override(value)} ({section}=GROUP)"
    return f"{key}={_as_override(value)}"


def _as_override(value: Any) -> str:
    """``value`` as a command-line override spells it: ``64``, ``true``, ``null``, ``caduceus``."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _flat(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    out = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def check_output_dir(
    output_dir: Path, resume: Path | None, resume_hint: str | None = "Resume it with ckpt_path=last"
) -> None:
    """ConfigError unless ``output_dir`` may take this run: it is a folder (or absent) and
    holds no other run's results (``RUN_RESULTS``; a run resuming a checkpoint of its own may
    use it). ``resume_hint`` says how to continue the run found there (None: it cannot be)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise ConfigError(f"output_dir={output_dir} is a file; choose a folder")
    held = sorted({str(p.relative_to(output_dir)) for g in RUN_RESULTS for p in output_dir.glob(g)})
    if not held or (resume is not None and resume.is_relative_to(output_dir.resolve())):
        return
    what = "Remove it or choose another output_dir"
    if resume_hint:
        what = f"{resume_hint}, or choose another output_dir"
    raise ConfigError(
        f"output_dir={output_dir} already holds a run ({', '.join(held[:3])}"
        f"{', ...' if len(held) > 3 else ''}). {what}"
    )


@contextmanager
def hold(output_dir: Path) -> Iterator[None]:
    """Create ``output_dir`` and hold its lock for the ``with`` block; ConfigError when a live
    process holds it. Removes the temporary files a killed checkpoint writer left, and the lock
    file when the block ends (only a killed run leaves it behind, unlocked)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / LOCK_FILE
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "another process"
            raise ConfigError(
                f"output_dir={output_dir} is in use by a running genodiff run (pid {owner}); "
                "wait for it to finish or choose another output_dir"
            ) from None
        if not path.exists() or not os.path.samestat(os.fstat(lock.fileno()), path.stat()):
            raise ConfigError(  # its holder removed the file we opened as it ended
                f"output_dir={output_dir}: the run that held it ended just now; start again"
            )
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        remove_temporary_files(output_dir / CHECKPOINT_FOLDER)
        try:
            yield
        finally:
            path.unlink()  # still locked: no other run can have taken the folder meanwhile

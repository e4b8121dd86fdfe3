"""Work spread over processes on Lightning's launcher: independent jobs (fine-tuning runs,
blocks of samples, batches of windows to score), each done by one process.

``launch_workers`` starts the processes the ``accelerator``, ``devices`` and ``num_nodes``
settings ask for through Lightning Fabric's DDP strategy (the command runs again once per
extra local process; under SLURM or torchrun the processes exist already) and joins them in
one process group; each ``Workers`` then takes its share of the jobs. A job runs as it would
in one process, so the results are those of one process.

``genodiff finetune`` gives each process every ``world_size``-th run of the (task, sweep
point, fold) grid, each run's Trainer a world of one process: Lightning's rank-zero guard
(which keeps loggers and messages to rank 0 of a DDP run) is set to this process, so every
run writes its own logs. ``genodiff sample`` and ``genodiff eval`` give each process a block
of sequences or windows and gather the results on the main process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from genodiff.errors import InputValueError
from genodiff.progress import is_main_process
from genodiff.threads import command_threads, share_threads

if TYPE_CHECKING:
    from lightning.fabric import Fabric

# Lightning's names of a CUDA accelerator (a training config's check and the workers' devices).
GPU_ACCELERATORS = ("gpu", "cuda")
PARENT_POLL_SECONDS = 1.0  # how often a started process looks whether its starter still runs
STOP_GRACE_SECONDS = 30.0  # how long it then takes to stop as at Ctrl-C before it just exits
MAIN_REPORT_SECONDS = 10.0  # how long a stopping process waits for the main one to end
# How long a process that finished its share waits at the end for the others (the process
# group's timeout; torch's default, 30 minutes, failed a resumed sampling or an uneven
# fine-tuning whose other shares took longer). A process that dies ends them all sooner
# (Lightning's launcher; ``stop_when_parent_ends``).
SHARES_WAIT = timedelta(days=7)
# Lightning's line as a process joins the process group (``_init_dist_connection``).
JOIN_LOGGER = "lightning.fabric.utilities.distributed"
JOIN_LINE = "Initializing distributed: "


@dataclass
class Workers:
    """This process's share of the runs: ``rank`` of ``world_size`` processes, on the
    ``local_rank``-th device of its node; ``fabric`` holds the process group (None for one
    process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    fabric: Fabric | None = None
    one_device: torch.device | None = None  # one process of an accelerator named: its device

    @property
    def main(self) -> bool:
        """Whether this is the main process (rank 0): the one that writes the results."""
        return self.rank == 0

    @property
    def device(self) -> torch.device | None:
        """This process's device; for one process that of the accelerator it was asked for
        by name ("cpu", "gpu"), else None: the caller's own choice."""
        return self.fabric.device if self.fabric is not None else self.one_device

    def block(self, total: int) -> range:
        """This process's share of ``total`` ordered jobs: the ``rank``-th of ``world_size``
        consecutive blocks of (nearly) equal size."""
        return range(
            total * self.rank // self.world_size, total * (self.rank + 1) // self.world_size
        )

    def gather(self, value: Any) -> list[Any]:
        """Every process's ``value`` (any picklable object), in rank order, in every process
        (one process, with or without a Fabric, has no process group to gather over)."""
        if self.fabric is None or self.world_size == 1:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, value)
        return gathered

    def takes(self, index: int) -> bool:
        """Whether run ``index`` of the grid (in the grid's fixed order) is this process's."""
        return index % self.world_size == self.rank

    def wait_for_all(self) -> None:
        """Return once every process has finished its runs."""
        if self.fabric is not None:
            self.fabric.barrier()

    def run_trainer_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The Trainer settings of one run: ``kwargs`` (the ``trainer`` section) as they are in
        one process; with several, one device per run (this process's) and no strategy."""
        kwargs = dict(kwargs)
        if self.world_size == 1:
            return kwargs
        on_gpu = kwargs.get("accelerator", "auto") in GPU_ACCELERATORS
        kwargs.update(devices=[self.local_rank] if on_gpu else 1, num_nodes=1, strategy="auto")
        return kwargs


class _JoinLineOfTheMainProcess(logging.Filter):
    """Passes Lightning's "Initializing distributed: GLOBAL_RANK: r, MEMBER: m/n" in the main
    process alone: every process prints it as it joins, a line per process that says no more
    than the main process's "Starting with n processes" below it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return is_main_process() or not record.getMessage().startswith(JOIN_LINE)


def join_line_once() -> None:
    """From now on in this process, Lightning's line as a process joins the group is printed
    by the main process alone (``_JoinLineOfTheMainProcess``)."""
    logger = logging.getLogger(JOIN_LOGGER)
    if not any(isinstance(f, _JoinLineOfTheMainProcess) for f in logger.filters):
        logger.addFilter(_JoinLineOfTheMainProcess())


#: The accelerators with which one device is always this process (no device to look for).
ALWAYS_HERE = ("auto", "cpu")


def spread_asked(accelerator: str | None, devices: int | str | None, num_nodes: int | None) -> bool:
    """Whether ``devices`` / ``num_nodes`` ask for the work to be shared by processes
    (``launch_workers``). An ``accelerator`` (other than "auto") without either is refused: it
    is the kind of device of those processes, and one process computes on the device its model
    is on, which the accelerator would silently leave as it is (the CPU for "gpu" on a machine
    without one)."""
    spread = devices is not None or num_nodes is not None
    if not spread and accelerator not in (None, "auto"):
        raise InputValueError(
            f"accelerator={accelerator!r} is the device kind of several processes sharing the "
            "work and needs devices=N (N processes); for one process choose its device with "
            "device ('cuda', 'cpu') instead",
            parameter=("device", "devices", "accelerator"),
        )
    return spread


def process_settings(
    accelerator: str | None, devices: int | str | None, num_nodes: int | None
) -> dict[str, Any]:
    """The ``launch_workers`` settings of a command's ``accelerator`` / ``devices`` /
    ``num_nodes`` (None: Lightning's "auto", one device, one node); a 0 stays 0, for Lightning
    to refuse."""
    return {
        "accelerator": accelerator or "auto",
        "devices": 1 if devices is None else devices,
        "num_nodes": 1 if num_nodes is None else num_nodes,
    }


def launch_workers(trainer: Mapping[str, Any]) -> Workers:
    """The processes the ``trainer`` section (or any mapping of ``accelerator``, ``devices``,
    ``num_nodes``) asks for, started and joined in one process group; one process: no
    launch (Lightning is imported here, not by a command that runs in one process, nor for
    one device of an accelerator in ``ALWAYS_HERE``: ``--devices 1``, on the CPU for "cpu",
    else on the caller's device, as without ``devices``)."""
    one = trainer.get("devices", "auto") == 1 and trainer.get("num_nodes", 1) == 1
    accelerator = trainer.get("accelerator", "auto")
    if one and accelerator in ALWAYS_HERE:  # what Fabric gives for it, without its import
        return Workers(one_device=torch.device("cpu") if accelerator == "cpu" else None)
    from lightning.fabric import Fabric
    from lightning.fabric.strategies import DDPStrategy
    from lightning.fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero
    from lightning.pytorch.utilities.rank_zero import rank_zero_only as trainer_rank_zero

    try:
        fabric = Fabric(
            accelerator=accelerator,
            devices=trainer.get("devices", "auto"),
            num_nodes=trainer.get("num_nodes", 1),
            strategy=DDPStrategy(timeout=SHARES_WAIT),
        )
    except (ImportError, ValueError, RuntimeError, TypeError) as err:  # Lightning's refusals
        raise InputValueError(
            f"accelerator={accelerator!r}, devices={trainer.get('devices')!r}, "
            f"num_nodes={trainer.get('num_nodes')!r}: Lightning cannot start these processes "
            f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); use accelerator "
            "cpu or gpu with at least one device",
            parameter=("accelerator", "devices"),
        ) from err
    if fabric.world_size == 1:
        return Workers(one_device=None if accelerator == "auto" else fabric.device)
    if "NUMBA_NUM_THREADS" not in os.environ:
        # The CPU scan's thread pool, sized as Lightning sizes torch's (cores / processes), in
        # the environment the other processes start with (numba reads it once, on import): a
        # larger pool's idle threads spin on the cores the other processes compute on.
        pool = max(1, (os.cpu_count() or 1) // fabric.strategy.num_processes)
        os.environ["NUMBA_NUM_THREADS"] = str(pool)
    threads = command_threads()  # --threads, shared by this node's processes
    join_line_once()
    fabric.launch()  # the other local processes run the same command up to here
    share_threads(threads, fabric.strategy.num_processes)
    if fabric.local_rank > 0:
        stop_when_parent_ends()
    for guard in (trainer_rank_zero, fabric_rank_zero):
        guard.rank = 0  # each run is a world of one: its logs are written by this process
    return Workers(fabric.global_rank, fabric.world_size, fabric.local_rank, fabric)


def stop_when_parent_ends(
    poll: float = PARENT_POLL_SECONDS, grace: float = STOP_GRACE_SECONDS
) -> threading.Thread:
    """Stop this process (one a launcher started: the main process under Lightning's own
    launcher) once the process that started it has ended, however it ended (an error, kill -9,
    a Ctrl-C that reached it alone): as at Ctrl-C (SIGINT: the staged work is kept, nothing
    printed), and for good ``grace`` seconds later. Otherwise it would go on with its whole
    share of the work (hours of sampling or fine-tuning) that no process is left to take, and
    end with a traceback. Call it from the main thread. Returns the watching thread (a daemon).

    Where SIGINT was ignored as this process started (a script's background job, ``nohup``:
    every process of the job inherits it), a handler takes the ignore's place: this stop
    interrupts all the same, any other SIGINT is still ignored."""
    parent = os.getppid()
    stopping = threading.Event()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupt_once(stopping))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        stopping.set()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(grace)
        os._exit(128 + signal.SIGINT)

    watcher = threading.Thread(target=watch, name="genodiff-parent-watch", daemon=True)
    watcher.start()
    return watcher


def _interrupt_once(stopping: threading.Event) -> Callable[[int, FrameType | None], None]:
    """A SIGINT handler for a process that ignores SIGINT: KeyboardInterrupt once ``stopping``
    is set (the process's own stop), nothing before (a SIGINT it was asked to ignore)."""

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt

    return on_sigint


def main_process_ends(
    poll: float = PARENT_POLL_SECONDS, within: float = MAIN_REPORT_SECONDS
) -> bool:
    """In a process a launcher started that is stopping (an error, Ctrl-C): whether the
    process that started it (the main process, under Lightning's own launcher) ends within
    ``within`` seconds. An error or a Ctrl-C that every process meets stops them all at once:
    the main one reports it, and this one, waiting for it, has nothing to add; and Lightning's
    launcher kills the main process (SIGKILL, before it can say anything) once another ended
    with an error status. False when it goes on (the error is this process's alone: its line
    is the one to print)."""
    parent = os.getppid()
    deadline = time.monotonic() + within
    try:
        while os.getppid() == parent:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)
    except KeyboardInterrupt:  # ``stop_when_parent_ends`` saw it end first
        pass
    return True

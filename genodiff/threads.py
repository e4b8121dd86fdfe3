"""Thread pools that share the machine: how many threads genodiff computes on, and how they wait.

PyTorch's OpenMP runtime (and numba's, for the CPU selective scan) keep an idle thread spinning
at every barrier for 300,000 turns before it sleeps (GNU OpenMP's default). On a machine where
another job computes, those threads spin for the cores the other job's threads hold: a
training step beside one other multi-threaded PyTorch job cost 10-20x the CPU of the same step
on one thread (BENCHMARKS.md, "Threads on a shared machine"). genodiff therefore chooses,
unless told otherwise:

- **short spinning** (``GOMP_SPINCOUNT=1000``): a waiting thread spins briefly, then sleeps.
  Measured on the demo's training step: beside a loaded machine's other job it keeps the CPU
  per step within 1.2x one thread's, on an idle machine it costs ~15% of wall time against
  the default (sleeping at once, ``OMP_WAIT_POLICY=PASSIVE``, cost 2x). OpenMP reads it once,
  when torch loads its runtime, so ``import genodiff`` sets it in the environment before
  torch is imported (``limit_spinning``); a session that imported torch first keeps its
  runtime's setting (set the variable before starting Python instead);
- **as many threads as cores are free** (``configure_threads``, run by every ``genodiff``
  command): the cores this process may run on, less the load measured on them over a tenth of
  a second when the command starts, at least one.

``GENODIFF_THREADS`` (or ``genodiff COMMAND --threads``) overrides: ``auto`` (the default,
above), a number of threads (with short spinning), or ``system`` (leave the thread counts and
the waiting as torch, numba and the ``OMP_*`` variables set them). An ``OMP_NUM_THREADS``,
``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` that the user set is kept. The threads are the
command's: the processes of a multi-process run on one machine share them (``share_threads``).
"""

from __future__ import annotations

import os
import time

from genodiff.errors import InputValueError

THREADS_ENV = "GENODIFF_THREADS"
AUTO, SYSTEM = "auto", "system"
SAMPLE_SECONDS = 0.1  # how long configure_threads watches the cores' load
PROC_STAT = "/proc/stat"  # per-CPU clock ticks (Linux)
SPIN_COUNT = 1000  # turns a waiting OpenMP thread spins before it sleeps (GNU's default: 300,000)


def threads_setting(value: str | int | None = None) -> str | int:
    """``value`` (else ``GENODIFF_THREADS``, else ``auto``) checked: ``auto``, ``system`` or a
    positive thread count; InputValueError naming the setting otherwise."""
    raw = value if value is not None else os.environ.get(THREADS_ENV, AUTO)
    text = str(raw).strip().lower()
    if text in (AUTO, SYSTEM):
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    source = "threads" if value is not None else THREADS_ENV  # the CLI adds (--threads)
    raise InputValueError(
        f"{source}={raw!r}: give auto, system or a number of threads (1 or more)",
        parameter="threads",
    )


def limit_spinning() -> None:
    """Set ``GOMP_SPINCOUNT`` for the OpenMP runtimes not loaded yet (this process's torch and
    numba when imported after this, and every child process), unless the user set how OpenMP
    waits or ``GENODIFF_THREADS=system``. A malformed setting is left for
    ``configure_threads`` to report."""
    try:
        if threads_setting() == SYSTEM:
            return
    except InputValueError:
        pass
    if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _idle_and_total(cpus: list[int]) -> tuple[int, int] | None:
    """(idle, total) clock ticks so far of ``cpus`` from /proc/stat; None where unreadable."""
    try:
        with open(PROC_STAT, encoding="ascii") as stat:
            lines = stat.read(1 << 20).splitlines()
    except OSError:
        return None
    wanted = {f"cpu{cpu}" for cpu in cpus}
    idle = total = 0
    for line in lines:
        name, *fields = line.split()
        if name in wanted:
            ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq ...
            idle += ticks[3] + ticks[4]
            total += sum(ticks)
    return (idle, total) if total else None


def free_cores(seconds: float = SAMPLE_SECONDS) -> float:
    """How many of the usable CPUs were idle over the next ``seconds`` (from /proc/stat);
    elsewhere the usable CPUs less the 1-minute load average."""
    cpus = usable_cpus()
    before = _idle_and_total(cpus)
    if before is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return max(0.0, len(cpus) - load)
    time.sleep(seconds)
    after = _idle_and_total(cpus)
    if after is None or after[1] <= before[1]:
        return float(len(cpus))
    return len(cpus) * (after[0] - before[0]) / (after[1] - before[1])


def auto_threads() -> int:
    """The thread count of ``auto``: the free cores, rounded, from 1 to the usable CPUs."""
    return max(1, min(len(usable_cpus()), round(free_cores())))


def configure_threads(value: str | int | None = None) -> int | None:
    """Set torch's intra-op thread count (the CPU scan's numba pool follows it) as ``value`` or
    ``GENODIFF_THREADS`` says; returns the count set, None where nothing was changed
    (``system``, or an ``OMP_NUM_THREADS`` the user set under ``auto``)."""
    setting = threads_setting(value)
    if setting == SYSTEM or (setting == AUTO and "OMP_NUM_THREADS" in os.environ):
        return None
    import torch

    threads = auto_threads() if setting == AUTO else setting
    torch.set_num_threads(threads)
    return threads


def command_threads() -> int | None:
    """Before a launch of several processes: the threads this command computes on
    (``configure_threads``'s count, else torch's), for ``share_threads``; None where the user's
    ``OMP_NUM_THREADS`` sets each process's count."""
    if "OMP_NUM_THREADS" in os.environ:
        return None
    import torch

    return torch.get_num_threads()


def share_threads(threads: int | None, processes: int) -> None:
    """After a launch of ``processes`` processes on this machine: this one computes on its
    share of the command's ``threads`` (``command_threads``; None: as the launch left them).
    Lightning's launch sets every process to (all cores / processes) threads instead, whatever
    ``--threads`` said (and however busy the machine is, under ``auto``)."""
    if threads is not None:
        import torch

        torch.set_num_threads(max(1, threads // processes))

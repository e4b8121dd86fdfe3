"""How much memory this machine has, and sizes in words: the checks that refuse a request which
cannot fit (a sample batch, a model's weights) before anything is allocated."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


# Where the kernel says which control groups this process is in, and where their files are.
PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def host_memory() -> int:
    """The host memory this process may use, in bytes: the machine's physical memory, or the
    memory limit of its control group (a container's, a SLURM job's) when that is lower."""
    return min([os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), *cgroup_limits()])


def cgroup_limits(proc: Path | None = None, root: Path | None = None) -> list[int]:
    """The memory limits, in bytes, of this process's control group and of the groups above it
    (cgroup v2's ``memory.max``, v1's ``memory.limit_in_bytes``), from ``proc``
    (``/proc/self/cgroup``) and the files under ``root`` (``/sys/fs/cgroup``); none where they
    cannot be read or say ``max``. A container sees its own group as the root: walking up from
    the path ``proc`` names reaches it."""
    proc, root = proc or PROC_CGROUP, root or CGROUP_ROOT
    try:
        lines = proc.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    limits = []
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:  # v2: one hierarchy
            top, name = root, "memory.max"
        elif "memory" in controllers.split(","):  # v1: the memory controller's own
            top, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder = top / path.strip().lstrip("/")
        for here in [folder, *folder.parents]:
            limits += _limit_in(here / name)
            if here == top:
                break
    return limits


def _limit_in(path: Path) -> list[int]:
    """[the bytes the cgroup file ``path`` holds], or [] (none there, or ``max``)."""
    try:
        text = path.read_text(errors="replace")[:32].strip()
    except OSError:
        return []
    return [int(text)] if text.isdigit() else []


def memory_available(device: torch.device) -> tuple[int, int]:
    """(the device's total memory, the host memory this process may use: ``host_memory``) in
    bytes."""
    import torch

    host = host_memory()
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory, host
    return host, host


def size_text(n: float) -> str:
    """``512 bytes``, ``1.5 KiB`` ... ``3.0 PiB`` (larger sizes stay in PiB)."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = 0
    while n >= 1024 and power < len(units) - 1:
        n, power = n / 1024, power + 1
    return f"{n:.0f} bytes" if power == 0 else f"{n:.1f} {units[power]}"


def memory_limit() -> int:
    """The most memory one place on this machine has, in bytes: the host's, or the largest
    visible GPU's when that is larger. A model whose weights need more fits nowhere here."""
    import torch

    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return max(memory_available(device)[0] for device in [torch.device("cpu"), *devices])

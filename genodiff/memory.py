"""How much memory this machine has, and sizes in words: the checks that refuse a request which
cannot fit (a sample batch, a model's weights) before anything is allocated."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def memory_available(device: torch.device) -> tuple[int, int]:
    """(the device's total memory, the host's physical memory) in bytes."""
    import torch

    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
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

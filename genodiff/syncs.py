"""Where hot loops avoid host syncs: reading a device tensor's value on the host (``nonzero``,
``item``, ``bool`` of a tensor) waits for every queued kernel, and a CUDA graph cannot hold one.

``sync_free_on(device)`` is the one switch: the masked samplers' step
(``genodiff.samplers.masked.unmask``) and the label embedding's range check
(``genodiff.conditioning``) take their sync-free form where it says so. On the CPU a host read
costs nothing, and the sparse forms do less arithmetic. tests/test_sync_free_sampling.py turns
it on for the CPU to count the syncs that remain.
"""

from __future__ import annotations

import torch


def sync_free_on(device: torch.device) -> bool:
    """Whether code running on ``device`` takes its sync-free form: on CUDA."""
    return device.type == "cuda"

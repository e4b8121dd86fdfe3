"""Numbers made on the host, sent to the device without waiting for it.

The per-sequence streams (``genodiff.randomness.noise``) draw on the CPU, and a sampler on CUDA
needs each step's numbers (its uniforms, its times) on the device. ``tensor.to("cuda")`` from
ordinary (pageable) memory waits until the device has run everything queued before it: a host
sync at every step, and a host dependency no CUDA graph can hold. ``Staging`` writes the
numbers into one of a ring of ``depth`` pinned host buffers and copies them with
``non_blocking=True``, recording an event after the copy; before the host writes into a
buffer again it waits for that buffer's event, so a copy still in flight never reads numbers
of a later step. The host therefore runs up to ``depth`` steps ahead of the device: it draws
step k + 1's numbers while the device runs step k. What the device receives is what the same
draws give without staging, in the same order (tests/test_staging.py simulates the device and
its events on the CPU).

On the CPU there is nothing to copy: ``Staging.for_device`` gives the numbers in a fresh
tensor, as before staging existed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

#: Pinned buffers in the ring: how many steps the host may run ahead of the device.
DEPTH = 4


class Event(Protocol):
    def synchronize(self) -> None:
        """Wait until the work queued before the event has run."""


class Transfer(Protocol):
    """How numbers reach a device: pinned host memory, an asynchronous copy, an event."""

    def pinned(self, nbytes: int) -> Tensor:
        """(nbytes,) uint8 host memory the device can copy from asynchronously."""
        ...

    def send(self, host: Tensor) -> Tensor:
        """Start copying ``host`` to the device (without waiting); its device tensor."""
        ...

    def record(self) -> Event:
        """An event after every copy sent so far."""
        ...


class CudaTransfer:
    """``Transfer`` to a CUDA device, on its current stream."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def pinned(self, nbytes: int) -> Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def send(self, host: Tensor) -> Tensor:
        return host.to(self.device, non_blocking=True)

    def record(self) -> Event:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event


@dataclass
class _Slot:
    buffer: Tensor | None = None  # (bytes,) uint8, pinned
    in_flight: Event | None = None  # recorded after the last copy out of ``buffer``


class Staging:
    """A ring of ``depth`` pinned buffers sending host-made numbers through ``transfer``
    (module doc); no transfer: the numbers stay where they are made (the CPU)."""

    def __init__(self, transfer: Transfer | None, depth: int = DEPTH) -> None:
        self.transfer = transfer
        self.slots = [_Slot() for _ in range(depth)]
        self.turn = 0  # the slot the next ``stage`` fills

    @classmethod
    def for_device(cls, device: torch.device) -> Staging:
        """Staging to ``device``: through pinned buffers to CUDA, none for the CPU."""
        return cls(CudaTransfer(device) if device.type == "cuda" else None)

    def stage(
        self, shape: tuple[int, ...], dtype: torch.dtype, fill: Callable[[Tensor], object]
    ) -> Tensor:
        """A ``shape`` ``dtype`` tensor on the device holding what ``fill`` writes into its
        host buffer (``fill`` gets the buffer, of that shape and dtype, and fills all of it)."""
        if self.transfer is None:
            host = torch.empty(shape, dtype=dtype)
            fill(host)
            return host
        slot = self.slots[self.turn]
        self.turn = (self.turn + 1) % len(self.slots)
        if slot.in_flight is not None:
            slot.in_flight.synchronize()  # the copy out of this buffer, ``depth`` stages ago
            slot.in_flight = None
        nbytes = math.prod(shape) * dtype.itemsize
        if slot.buffer is None or slot.buffer.numel() < nbytes:
            slot.buffer = self.transfer.pinned(nbytes)
        host = slot.buffer[:nbytes].view(dtype).view(shape)
        fill(host)
        sent = self.transfer.send(host)
        slot.in_flight = self.transfer.record()
        return sent

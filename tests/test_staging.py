"""The step's numbers reach the device through a ring of pinned buffers
(``genodiff.randomness.staging``) unchanged and in order, and no buffer is written again while
its copy is in flight. A simulated device stands in for CUDA: it runs a copy only when an event
recorded after it is waited on (or when the test lets it catch up), so a ring that reused a
buffer too early would send later numbers."""

from __future__ import annotations

import torch

from genodiff.randomness.noise import Noise, sequence_seed
from genodiff.randomness.staging import Staging


class LazyDevice:
    """A ``Transfer`` whose copies wait in a queue until an event after them is waited on."""

    def __init__(self, events_wait: bool = True) -> None:
        self.queue: list[tuple[torch.Tensor, torch.Tensor]] = []  # (host, device) per copy
        self.done = 0  # copies run so far
        self.events_wait = events_wait
        self.pinned_bytes: list[int] = []

    def pinned(self, nbytes: int) -> torch.Tensor:
        self.pinned_bytes.append(nbytes)
        return torch.empty(nbytes, dtype=torch.uint8)

    def send(self, host: torch.Tensor) -> torch.Tensor:
        device = torch.full_like(host, float("nan"))  # nothing arrived yet
        self.queue.append((host, device))
        return device

    def record(self):
        device, upto = self, len(self.queue)

        class Event:
            def synchronize(self) -> None:
                if device.events_wait:
                    device.run(upto)

        return Event()

    def run(self, upto: int) -> None:
        for host, device in self.queue[self.done : upto]:
            device.copy_(host)
        self.done = max(self.done, upto)

    @property
    def pending(self) -> int:
        return len(self.queue) - self.done


SEED, INDICES = 11, [4, 0, 9]


def expected_draws(shapes: list[tuple[int, ...]], rows: list[list[int]]) -> list[torch.Tensor]:
    """What each row's own generator gives, built without Noise or staging."""
    generators = {i: torch.Generator().manual_seed(sequence_seed(SEED, i)) for i in INDICES}
    return [
        torch.stack([torch.rand(shape, generator=generators[INDICES[r]], dtype=torch.float64)
                     for r in picked])
        for shape, picked in zip(shapes, rows, strict=True)
    ]  # fmt: skip


def draw_through(device: LazyDevice, depth: int) -> tuple[list, list, int]:
    """Seven steps' uniforms of three rows (the last two of a subset of rows, as first-hitting
    draws), sent through a ring of ``depth``; the device catches up at the end."""
    noise = Noise.per_sequence(SEED, INDICES, "cpu")
    noise.staging = Staging(device, depth=depth)
    shapes = [(2, 16), (2, 16), (3,), (2, 16), (2, 16), (3,), (3,)]
    rows = [[0, 1, 2]] * 5 + [[2, 0]] * 2
    received = []
    for shape, picked in zip(shapes, rows, strict=True):
        source = noise if len(picked) == 3 else noise.take(torch.tensor(picked))
        received.append(source.uniform(len(picked), *shape))
    pending = device.pending
    device.run(len(device.queue))
    return received, expected_draws(shapes, rows), pending


def test_the_device_receives_each_streams_draws_in_order():
    device = LazyDevice()
    received, expected, pending = draw_through(device, depth=2)
    assert len(received) == 7
    for got, want in zip(received, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert pending == 2  # the host ran two copies ahead and waited for no more
    assert len(device.pinned_bytes) <= 4  # two buffers, grown at most once each


def test_without_waiting_for_its_event_a_buffer_in_flight_is_overwritten():
    # the simulated device is lazy enough to catch a ring that does not wait
    received, expected, _ = draw_through(LazyDevice(events_wait=False), depth=2)
    assert not all(torch.equal(g, w) for g, w in zip(received, expected, strict=True))


def test_on_the_cpu_the_numbers_are_drawn_in_place():
    noise = Noise.per_sequence(SEED, INDICES, "cpu")
    assert noise.staging.transfer is None
    (want,) = expected_draws([(2, 5)], [[0, 1, 2]])
    torch.testing.assert_close(noise.uniform(3, 2, 5), want, rtol=0, atol=0)


def test_one_generator_for_the_batch_is_staged_too():
    device = LazyDevice()
    noise = Noise(torch.Generator().manual_seed(3), "cpu", staging=Staging(device, depth=1))
    first, second = noise.uniform(2, 4), noise.uniform(2, 4)
    device.run(len(device.queue))
    want = torch.rand((2, 2, 4), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(torch.stack([first, second]), want, rtol=0, atol=0)

"""Where a sampler's random numbers come from: one stream per sequence, or one for the batch.

Every sampler draws its randomness through ``Noise``, row by row and in shapes that depend on
nothing but the row's own state (a step's uniforms for every position of a row, whether or not
it is masked), so that what row i draws never depends on the other rows. With
``Noise.per_sequence(seed, indices)`` each row has its own generator, seeded from (seed, the
row's index in the run), and sequence i of a run is then a function of (seed, i) and the request
alone: the same under any batch size, any number of processes and any resume
(``genodiff.generate.draw_samples``). ``Noise(generator)`` draws every row from one generator
(the tests' exact laws, the training objectives), as torch does.

The per-sequence generators live on the CPU (a fixed algorithm, mt19937, on every machine); the
numbers reach the sampler's device through ``genodiff.samplers.staging`` (pinned buffers and
asynchronous copies on CUDA: no step waits for the device). ``SEQUENCE_SEEDS`` names the scheme
in the samples' provenance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from genodiff.samplers.staging import Staging

#: How a sequence's draws are seeded, recorded with the samples (``SamplingRun.draws``): one
#: torch CPU generator per sequence, seeded with the first 64-bit word of NumPy's
#: SeedSequence([seed, index]).
SEQUENCE_SEEDS = "per-sequence-v1"


def sequence_seed(seed: int, index: int) -> int:
    """The 64-bit seed of sequence ``index`` of a run seeded with ``seed`` (``SEQUENCE_SEEDS``)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0])


def seed_from(generator: torch.Generator) -> int:
    """A run's seed drawn from ``generator`` (one number in [0, 2^63), advancing it): what a
    caller's ``torch.Generator`` stands for, the sequences' streams then seeded from it as from
    any seed (``sequence_seed``)."""
    return int(torch.randint(0, 2**63 - 1, (), generator=generator, device=generator.device))


class Noise:
    """The random numbers of one batch of rows: from one ``generator`` for all rows (None:
    torch's global generator), or from one stream per row (``per_sequence``: row j's stream
    seeded with ``seeds[j]``). ``staging`` sends numbers drawn on the CPU to ``device``
    (default: ``Staging.for_device``); the noise of some of the rows (``take``, ``branch``)
    shares it."""

    def __init__(
        self,
        generator: torch.Generator | None = None,
        device: torch.device | str = "cpu",
        seeds: Sequence[int] | None = None,
        staging: Staging | None = None,
    ) -> None:
        self.generator = generator
        self.device = torch.device(device)
        self.seeds = list(seeds) if seeds is not None else None
        self.rows = [torch.Generator().manual_seed(s) for s in self.seeds or ()]
        self.staging = staging if staging is not None else Staging.for_device(self.device)

    @classmethod
    def per_sequence(cls, seed: int, indices: Sequence[int], device: torch.device | str) -> Noise:
        """One stream per row, row j's for sequence ``indices[j]`` of the run."""
        return cls(device=device, seeds=[sequence_seed(seed, i) for i in indices])

    def take(self, rows: Tensor) -> Noise:
        """The noise of the rows ``rows`` (indices into this batch), in that order: the same
        streams, where they are now."""
        if self.seeds is None:
            return self
        taken = Noise(self.generator, self.device, [], self.staging)
        picked = rows.tolist()
        taken.seeds = [self.seeds[i] for i in picked]
        taken.rows = [self.rows[i] for i in picked]
        return taken

    def branch(self, key: int) -> Noise:
        """Fresh streams for part ``key`` of each row's work (a window of the semi-AR
        sampler), seeded from the row's seed and ``key``: what a part draws never depends on
        how much an earlier part drew. One generator for the batch: itself."""
        if self.seeds is None:
            return self
        seeds = [sequence_seed(s, key) for s in self.seeds]
        return Noise(self.generator, self.device, seeds, self.staging)

    def uniform(self, count: int, *shape: int) -> Tensor:
        """(count, *shape) float64 uniforms in [0, 1): row j from row j's stream (``count`` must
        then be the number of rows)."""
        return self._draw(torch.rand, count, shape, torch.float64)

    def normal(self, count: int, *shape: int, dtype: torch.dtype = torch.float32) -> Tensor:
        """(count, *shape) standard normal draws, row by row as ``uniform``."""
        return self._draw(torch.randn, count, shape, dtype)

    def _draw(
        self, fn: Callable[..., Tensor], count: int, shape: tuple[int, ...], dtype: torch.dtype
    ) -> Tensor:
        full = (count, *shape)
        if self.seeds is None:
            device = self.generator.device if self.generator is not None else self.device
            if device.type != "cpu":  # a device's own generator
                return fn(full, generator=self.generator, dtype=dtype, device=device).to(
                    self.device
                )
            return self.staging.stage(
                full, dtype, lambda out: fn(full, generator=self.generator, dtype=dtype, out=out)
            )
        if count != len(self.rows):
            raise ValueError(f"{count} rows asked of the noise of {len(self.rows)} sequences")

        def fill(out: Tensor) -> None:  # (count, *shape): row j from row j's stream
            for row, generator in zip(out, self.rows, strict=True):
                fn(shape, generator=generator, dtype=dtype, out=row)

        return self.staging.stage(full, dtype, fill)


def as_noise(source: Noise | torch.Generator | None, device: torch.device) -> Noise:
    """``source`` as a ``Noise`` for a sampler running on ``device``."""
    if isinstance(source, Noise):
        return source
    return Noise(source, device)

"""Where a sampler's or a score's random numbers come from: one stream per sequence, or one for
the batch.

Every sampler draws its randomness through ``Noise``, row by row and in shapes that depend on
nothing but the row's own state (a step's uniforms for every position of a row, whether or not
it is masked), so that what row i draws never depends on the other rows. With
``Noise.per_sequence(seed, indices)`` each row has its own generator, seeded from (seed, the
row's index in the run), and the draws of sequence i of a run are then a function of (seed, i)
and the request alone: the same under any batch size, any number of processes and any resume
(``genodiff.generate.draw_samples``); so is the sequence, up to the last bits of the network's
arithmetic on a call of only a few rows: tokens, or sequences where it makes one vector per
sequence (a time embedding, a classifier's head; docs/generating.md, "What the same seed does
not fix"). ``Noise(generator)`` draws every row from one generator
(the tests' exact laws, the training objectives), as torch does.

Scoring (``genodiff eval``, ``Model.score``: ``genodiff.evaluate.score_windows``) draws an
objective's loss noise with ``Noise.per_window``: the K noise draws of a window are K rows, each
with its own stream seeded from (``window_seed(seed, the window's token ids)``, k), and the
rows' times are a shifted lattice within the window (``stratified``), so a window's score is a
function of (its tokens, seed, K) alone: not of the batch size, the other windows or their
order (a time-conditioned network's arithmetic aside: docs/generating.md).

The per-sequence generators live on the CPU (a fixed algorithm, mt19937, on every machine); the
numbers reach the sampler's device through ``genodiff.randomness.staging`` (pinned buffers and
asynchronous copies on CUDA: no step waits for the device). ``SEQUENCE_SEEDS`` names the scheme
in the samples' provenance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import torch
from torch import Tensor

from genodiff.randomness.staging import Staging

#: How a sequence's draws are seeded, recorded with the samples (``SamplingRun.draws``): one
#: torch CPU generator per sequence, seeded with the first 64-bit word of NumPy's
#: SeedSequence([seed, index]).
SEQUENCE_SEEDS = "per-sequence-v1"


def sequence_seed(seed: int, index: int) -> int:
    """The 64-bit seed of sequence ``index`` of a run seeded with ``seed`` (``SEQUENCE_SEEDS``)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0])


#: How a scored window's draws are seeded (``Noise.per_window``): its seed is ``sequence_seed``
#: of the run's seed and the SHA-256 of its token ids (little-endian int32, read as an integer);
#: its time offset U is the first float64 uniform of a torch CPU generator seeded with it; its
#: k-th of K draws takes the uniform (U + k/K) mod 1 for its time and draws everything else
#: from a stream seeded with ``sequence_seed`` of the window's seed and k.
WINDOW_SEEDS = "per-window-content-v1"


def window_seed(seed: int, ids: Tensor) -> int:
    """The 64-bit seed of a scored window of token ``ids`` (L,) under ``seed``
    (``WINDOW_SEEDS``): equal windows draw equal noise wherever they are scored."""
    digest = hashlib.sha256(ids.cpu().numpy().astype("<i4").tobytes()).digest()
    return sequence_seed(seed, int.from_bytes(digest, "little"))


def _first_uniform(seed: int) -> float:
    """The first float64 uniform in [0, 1) of a torch CPU generator seeded with ``seed``."""
    return float(torch.rand((), generator=torch.Generator().manual_seed(seed), dtype=torch.float64))


def seed_from(generator: torch.Generator) -> int:
    """A run's seed drawn from ``generator`` (one number in [0, 2^63), advancing it): what a
    caller's ``torch.Generator`` stands for, the sequences' streams then seeded from it as from
    any seed (``sequence_seed``)."""
    return int(torch.randint(0, 2**63 - 1, (), generator=generator, device=generator.device))


class Noise:
    """The random numbers of one batch of rows: from one ``generator`` for all rows (None:
    torch's global generator), or from one stream per row (``per_sequence``, ``per_window``:
    row j's stream seeded with ``seeds[j]``). ``lattice`` (per row, in [0, 1)): each row's
    ``stratified`` uniform, fixed in advance (``per_window``); None: drawn from its stream.
    ``staging`` sends numbers drawn on the CPU to ``device`` (default:
    ``Staging.for_device``); the noise of some of the rows (``take``, ``branch``) shares it."""

    def __init__(
        self,
        generator: torch.Generator | None = None,
        device: torch.device | str = "cpu",
        seeds: Sequence[int] | None = None,
        lattice: Sequence[float] | None = None,
        staging: Staging | None = None,
    ) -> None:
        self.generator = generator
        self.device = torch.device(device)
        self.seeds = list(seeds) if seeds is not None else None
        self.rows = [torch.Generator().manual_seed(s) for s in self.seeds or ()]
        self.lattice = list(lattice) if lattice is not None else None
        self.staging = staging if staging is not None else Staging.for_device(self.device)

    @classmethod
    def per_sequence(cls, seed: int, indices: Sequence[int], device: torch.device | str) -> Noise:
        """One stream per row, row j's for sequence ``indices[j]`` of the run."""
        return cls(device=device, seeds=[sequence_seed(seed, i) for i in indices])

    @classmethod
    def per_window(
        cls, seed: int, windows: Tensor, draws: int, device: torch.device | str
    ) -> Noise:
        """The noise of ``draws`` (K) scorings of each of ``windows`` (B, L), as one batch of
        K B rows in ``windows.repeat(K, 1)``'s order: row k B + j, the k-th draw of window j,
        has its own stream, seeded from (``window_seed(seed, windows[j])``, k), and the
        ``stratified`` uniform (U_j + k/K) mod 1, U_j drawn once for window j
        (``WINDOW_SEEDS``): the window's K times form a randomly shifted lattice, one in each
        K-th of [0, 1), as the times of one batch do under one generator."""
        keys = [window_seed(seed, ids) for ids in windows]
        offsets = [_first_uniform(key) for key in keys]
        seeds = [sequence_seed(key, k) for k in range(draws) for key in keys]
        lattice = [(u + k / draws) % 1.0 for k in range(draws) for u in offsets]
        return cls(device=device, seeds=seeds, lattice=lattice)

    def take(self, rows: Tensor) -> Noise:
        """The noise of the rows ``rows`` (indices into this batch), in that order: the same
        streams, where they are now."""
        if self.seeds is None:
            return self
        taken = Noise(self.generator, self.device, [], staging=self.staging)
        picked = rows.tolist()
        taken.seeds = [self.seeds[i] for i in picked]
        taken.rows = [self.rows[i] for i in picked]
        taken.lattice = None if self.lattice is None else [self.lattice[i] for i in picked]
        return taken

    def branch(self, key: int) -> Noise:
        """Fresh streams for part ``key`` of each row's work (a window of the semi-AR
        sampler), seeded from the row's seed and ``key``: what a part draws never depends on
        how much an earlier part drew. One generator for the batch: itself."""
        if self.seeds is None:
            return self
        seeds = [sequence_seed(s, key) for s in self.seeds]
        return Noise(self.generator, self.device, seeds, self.lattice, self.staging)

    def uniform(
        self, count: int, *shape: int, dtype: torch.dtype = torch.float64, row_axis: int = 0
    ) -> Tensor:
        """(count, *shape) uniforms in [0, 1): row j from row j's stream (``count`` must
        then be the number of rows). ``row_axis``: where the rows' axis sits in the output
        (1: (shape[0], count, *shape[1:])), as one generator fills that shape."""
        return self._draw(torch.rand, count, shape, dtype, row_axis)

    def normal(
        self, count: int, *shape: int, dtype: torch.dtype = torch.float32, row_axis: int = 0
    ) -> Tensor:
        """(count, *shape) standard normal draws, row by row as ``uniform``."""
        return self._draw(torch.randn, count, shape, dtype, row_axis)

    def integers(self, high: int, count: int, *shape: int) -> Tensor:
        """(count, *shape) int64 draws uniform on {0, ..., high - 1}, row by row as
        ``uniform``."""
        return self._draw(partial(torch.randint, high), count, shape, torch.int64)

    def stratified(self, count: int, dtype: torch.dtype = torch.float64) -> Tensor:
        """(count,) low-discrepancy uniforms in [0, 1). One generator: u_i = (U + i / count)
        mod 1, one U for the batch. Row streams: the rows' ``lattice`` (``per_window``: the K
        draws of a window one in each K-th of [0, 1)); without one, each row's own uniform."""
        if self.seeds is None:
            offset = self._draw(torch.rand, 1, (), dtype)  # (1,)
            steps = torch.arange(count, device=self.device, dtype=dtype) / count
            return (offset + steps) % 1.0
        if self.lattice is None:
            return self.uniform(count, dtype=dtype)
        if count != len(self.lattice):
            raise ValueError(f"{count} rows asked of the noise of {len(self.lattice)} sequences")
        lattice = torch.tensor(self.lattice, dtype=torch.float64, device=self.device)
        below_one = 1 - torch.finfo(dtype).eps / 2  # rounding to dtype must not reach 1
        return lattice.to(dtype).clamp_max(below_one)

    def _draw(
        self,
        fn: Callable[..., Tensor],
        count: int,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        row_axis: int = 0,
    ) -> Tensor:
        if self.seeds is None:  # one generator fills the whole shape, its rows on row_axis
            full = (*shape[:row_axis], count, *shape[row_axis:])
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

        return self.staging.stage((count, *shape), dtype, fill).movedim(0, row_axis)


def as_noise(source: Noise | torch.Generator | None, device: torch.device) -> Noise:
    """``source`` as a ``Noise`` for a sampler running on ``device``."""
    if isinstance(source, Noise):
        return source
    return Noise(source, device)

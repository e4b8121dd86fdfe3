"""Memory and time of the memorisation index (``genodiff.metrics.TrainingIndex``) on random
training sets with tandem repeats (a 40-bp unit 600 times every 500 kb), at 3 and 30 Mb.

Prints, per size: the index's arrays (packed seeds, bases), the peak of numpy allocations
while building it (tracemalloc), build time, and the time to search 100 samples of 1 kb (50
copies of training stretches inside repeats, 50 random) with how many were flagged.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from genodiff.domains import DNADomain
from genodiff.metrics import Memorisation, TrainingIndex, nearest_neighbours


def training_set(bases: int, rng: np.random.Generator) -> tuple[str, list[int]]:
    codes = rng.integers(0, 4, bases).astype(np.uint8)
    unit = rng.integers(0, 4, 40).astype(np.uint8)
    starts = list(range(250_000, bases - 24_000, 500_000))
    for start in starts:
        codes[start : start + 24_000] = np.tile(unit, 600)
    return np.frombuffer(b"ACGT", dtype=np.uint8)[codes].tobytes().decode(), starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--megabases", type=int, nargs="+", default=[3, 30], help="training set sizes (Mb)"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for megabases in args.megabases:
        genome, repeats = training_set(megabases * 1_000_000, rng)
        tracemalloc.start()
        began = time.perf_counter()
        index = TrainingIndex([genome], DNADomain.alphabet)
        built = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        firsts = [repeats[i % len(repeats)] - 300 + 37 * i for i in range(50)]
        copies = [genome[f : f + 1000] for f in firsts]
        novel = ["".join(rng.choice(list("ACGT"), 1000)) for _ in range(50)]
        began = time.perf_counter()
        summary = Memorisation.of(nearest_neighbours(copies + novel, index))
        searched = time.perf_counter() - began
        print(
            f"{megabases} Mb: seeds {index.seeds.nbytes / 2**20:.1f} MiB, bases "
            f"{index.codes.nbytes / 2**20:.1f} MiB, build peak {peak / 2**20:.1f} MiB, "
            f"build {built:.2f} s, 100 samples {searched:.2f} s, flagged "
            f"{summary.flagged_samples() == list(range(50))} ({summary.flagged}/100), "
            f"capped {summary.capped}"
        )


if __name__ == "__main__":
    main()

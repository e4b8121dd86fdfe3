"""The sample report's discriminator (``genodiff.metrics.discriminator.discriminator_auroc``) on
one BLAS thread, as it runs, against NumPy's and SciPy's default OpenBLAS pools, with no load
added to the machine and beside a load, in one run.

Its inputs are two reports': the notebook's (8 samples of 64 bp) and one of 64 samples of
1,024 bp (windows of the shipped chr22 slice stand in for generated DNA: the time does not
depend on where the letters came from), each against at most 2,000 other windows of the slice
(the report's ``max_reference``). "default pools" runs the same call with
``threadpoolctl.threadpool_limits`` made a no-op, which is what the code did before. "loaded"
runs bench_threads.py's load beside the call: a PyTorch convolution loop with torch's default
threads (another user's job). Each row is the median of ``--repeats`` calls in this process,
the settings interleaved.

    python bench/bench_discriminator_threads.py [--repeats 5] [--load-threads 0 (= cores)]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import statistics
import time
from pathlib import Path
from unittest import mock

from bench_threads import start_load
from Bio import SeqIO

from genodiff.metrics.discriminator import discriminator_auroc

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "data" / "chr22_20-21Mb.fa.gz"
MAX_REFERENCE = 2000


def windows(length: int, count: int, skip: int = 0) -> list[str]:
    """``count`` windows of ``length`` bp of the slice without N, after the first ``skip``."""
    with gzip.open(SLICE, "rt") as handle:
        sequence = str(next(SeqIO.parse(handle, "fasta")).seq).upper()
    cut = [sequence[i : i + length] for i in range(0, len(sequence) - length + 1, length)]
    return [w for w in cut if "N" not in w][skip : skip + count]


def timed(samples: list[str], reference: list[str], default_pools: bool) -> float:
    patch = (
        mock.patch("threadpoolctl.threadpool_limits", lambda **_: contextlib.nullcontext())
        if default_pools
        else contextlib.nullcontext()
    )
    with patch:
        start = time.perf_counter()
        discriminator_auroc(samples, reference, "ACGT")
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--load-threads", type=int, default=0, help="0: torch's default")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the run")
    rows = []
    for samples, length in ((8, 64), (64, 1024)):
        generated = windows(length, samples)
        reference = windows(length, MAX_REFERENCE, skip=samples)
        for machine in ("no added load", "loaded"):
            load = start_load(args.load_threads) if machine == "loaded" else None
            try:
                times = {"one BLAS thread": [], "default pools": []}
                for _ in range(args.repeats):
                    for setting in times:
                        times[setting].append(
                            timed(generated, reference, setting == "default pools")
                        )
            finally:
                if load is not None:
                    load.kill()
                    load.wait()
            median = {setting: statistics.median(t) for setting, t in times.items()}
            row = {
                "inputs": f"{samples} x {length} bp vs {len(reference)} windows",
                "machine": machine,
                **{f"{setting} (s)": round(m, 3) for setting, m in median.items()},
                "default / one": round(median["default pools"] / median["one BLAS thread"], 1),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    header = list(rows[0])
    print("\n| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for key in header) + " |")


if __name__ == "__main__":
    main()

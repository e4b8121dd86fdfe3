"""Cost of verifying weights on load: the .ckpt CRC-32 check and the model.safetensors checksum,
each beside the ``torch.load`` that every load costs anyway (the file in the page cache, as a
second read is).

    python bench/bench_verify_weights.py [--size-mib 512]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from genodiff.checkpoints.folders import tensors_digest
from genodiff.checkpoints.io import verify_archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=512, help="float32 weights (MiB)")
    args = parser.parse_args()
    parts = 8
    numbers = max(args.size_mib * 1024 * 1024 // 4 // parts, 1)
    tensors = {f"w{i}": torch.randn(numbers) for i in range(parts)}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "verify_cost.ckpt"
        torch.save({"state_dict": tensors}, path)
        torch.load(path, weights_only=True)  # into the page cache
        for name, run in [
            ("torch.load", lambda: torch.load(path, weights_only=True)),
            ("verify_archive (zip CRCs)", lambda: verify_archive(path)),
            ("tensors_digest (safetensors checksum)", lambda: tensors_digest(tensors)),
        ]:
            start = time.perf_counter()
            run()
            print(f"{name}: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()

"""Cost of verifying weights on load: the .ckpt CRC-32 check and the model.safetensors checksum."""

import time
from pathlib import Path

import torch

from genodiff.checkpoints.folders import tensors_digest
from genodiff.checkpoints.io import verify_archive

tensors = {f"w{i}": torch.randn(64 * 1024 * 1024 // 4) for i in range(8)}  # 512 MiB float32
path = Path("/tmp/verify_cost.ckpt")
torch.save({"state_dict": tensors}, path)
torch.load(path, weights_only=True)  # in the page cache, as a second read is
for name, run in [
    ("torch.load", lambda: torch.load(path, weights_only=True)),
    ("verify_archive (zip CRCs)", lambda: verify_archive(path)),
    ("tensors_digest (safetensors checksum)", lambda: tensors_digest(tensors)),
]:
    start = time.perf_counter()
    run()
    print(f"{name}: {time.perf_counter() - start:.2f} s")
path.unlink()

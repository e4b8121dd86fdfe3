"""Contract fakes of ``mamba_ssm`` and ``causal_conv1d`` for machines without a GPU.

Written from the upstream semantics (mamba-ssm 2.3, causal-conv1d 1.7), not copied: each fake
mirrors only the import paths genodiff uses, rejects what the real CUDA / Triton kernel rejects
(dtype combinations, shapes, strides, widths; ``KernelContractError``, or ``NotImplementedError``
for upstream features genodiff never uses and the fakes do not model) and computes the upstream
result with plain reference loops in float32 (gradients by autograd). ``tests/conftest.py``
installs them in ``sys.modules``; ``calls`` counts the calls of each upstream function, so a
test can prove that the upstream branch ran.
"""

from __future__ import annotations

import pkgutil
import sys
from importlib import import_module
from types import ModuleType

from tests.fakes._contract import KernelContractError, calls

__all__ = ["KernelContractError", "calls", "modules"]


def modules() -> dict[str, ModuleType]:
    """The ``sys.modules`` entries that make the fakes importable under the upstream names."""
    package = sys.modules[__name__]
    found = {}
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{__name__}."):
        name = info.name.removeprefix(f"{__name__}.")
        if not name.startswith("_"):
            found[name] = import_module(info.name)
    return found

"""Shared fixtures: the contract fakes of the GPU libraries (``tests/fakes``)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from genodiff.ops import upstream
from tests import fakes


@pytest.fixture
def upstream_fakes(monkeypatch) -> Counter:
    """Install the fakes as ``mamba_ssm`` and ``causal_conv1d`` for one test (shadowing real
    ones); yields the per-function call counts. CPU tensors still take the exact path unless
    the test enters ``genodiff.ops.upstream_kernels_on_cpu()``."""
    for name, module in fakes.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    fakes.calls.clear()
    upstream._load.cache_clear()  # forget what an earlier test found importable
    yield fakes.calls
    upstream._load.cache_clear()

"""The inference path: what a call runs when nothing needs a gradient.

Under ``torch.no_grad`` / ``torch.inference_mode``, or when no input or weight requires a
gradient, the selective scan runs its forward-only kernel (no autograd function, nothing
saved for a backward), a Mamba mixer (and both directions of a Caduceus BiMamba) runs as one
pass (``genodiff.backbones.mamba.mix_directions``) and an RCPS wrapper runs its two strands
as one batch. Each computes the function of the training path, up to float rounding.

``training_path()`` turns all of it off inside its context: every call then takes the path it
takes when gradients are needed, as genodiff did before the inference path existed. Benchmarks
and tests use it to compare the two in one process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import torch

_enabled: ContextVar[bool] = ContextVar("genodiff_inference_path", default=True)


@contextlib.contextmanager
def training_path() -> Iterator[None]:
    """Run every call through the training path inside this context (see the module)."""
    token = _enabled.set(False)
    try:
        yield
    finally:
        _enabled.reset(token)


def inference_path(*tensors: torch.Tensor | None) -> bool:
    """True where a call on ``tensors`` (None entries ignored) takes the inference path: no
    gradient is recorded for any of them, and ``training_path()`` is not active."""
    if not _enabled.get():
        return False
    return not torch.is_grad_enabled() or not any(
        t is not None and t.requires_grad for t in tensors
    )

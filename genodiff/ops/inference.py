"""The inference path: what a call runs when nothing needs a gradient.

Under ``torch.no_grad`` / ``torch.inference_mode``, or when no input or weight requires a
gradient, the selective scan runs its forward-only kernel (no autograd function, nothing
saved for a backward), a Mamba mixer (and both directions of a Caduceus BiMamba) runs as one
pass (``genodiff.backbones.mamba.mix_directions``), an RCPS wrapper runs its two strands
as one batch, and on the CPU a backbone runs a large batch in chunks of rows
(``cpu_chunk_rows``). Each computes the function of the training path, up to float rounding.

Inside ``reused_buffers()`` (a sampler's run on one batch: ``genodiff.generate``) the mixers'
large temporaries on the CPU are the context's buffers (``scratch``), written again by every
chunk, layer and step instead of allocated afresh: glibc hands freed blocks of a few MB back to
the OS, and each chunk then faulted its temporaries in again (BENCHMARKS.md).

``training_path()`` turns all of it off inside its context: every call then takes the path it
takes when gradients are needed, as genodiff did before the inference path existed. Benchmarks
and tests use it to compare the two in one process.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar

import torch

_enabled: ContextVar[bool] = ContextVar("genodiff_inference_path", default=True)
_buffers: ContextVar[dict[str, torch.Tensor] | None] = ContextVar(
    "genodiff_reused_buffers", default=None
)


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


#: Rows x length x hidden width of one chunk of a batch on the CPU inference path: about what
#: keeps a layer's activations (a few times that many floats) in the CPU caches. Measured on
#: 16 x 1,024 bp batches (BENCHMARKS.md; bench/bench_sampling.py prints the chunk): Caduceus
#: d64 x 2 ran 1.19x faster in chunks of 8 rows than whole, d118 x 4 1.22x in chunks of 4,
#: d256 x 2 1.40x in chunks of 2, Caduceus-PS d64 x 2 (width 128) 1.23x in chunks of 4.
CPU_CHUNK_ELEMENTS = 2**19


def cpu_chunk_rows(x: torch.Tensor, hidden_size: int | None, module: torch.nn.Module) -> int:
    """Rows per chunk for running ``module`` on the batch ``x`` (B, L, ...): B (one chunk)
    unless the call takes the inference path on the CPU, where it is
    max(1, CPU_CHUNK_ELEMENTS // (L * hidden_size)). Rows are independent, so a chunked batch
    gives each row's result of the whole batch, up to float rounding."""
    batch = x.shape[0]
    if x.device.type != "cpu" or not hidden_size or not inference_path(x, *module.parameters()):
        return batch
    return min(batch, max(1, CPU_CHUNK_ELEMENTS // (x.shape[1] * hidden_size)))


@contextlib.contextmanager
def reused_buffers() -> Iterator[None]:
    """Inside this context ``scratch`` hands out the context's buffers: one per name, as large
    as the largest request for it, dropped when the context ends (nested: the inner context
    keeps its own)."""
    token = _buffers.set({})
    try:
        yield
    finally:
        _buffers.reset(token)


def scratch(name: str, like: torch.Tensor, *shape: int) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` in ``like``'s dtype and device, for a temporary
    that dies before the next request for ``name``: fresh, or on the CPU inside
    ``reused_buffers()`` a view of the context's buffer ``name`` (replaced by a larger one, or
    one of another dtype, when it does not fit)."""
    buffers = _buffers.get()
    if buffers is None or like.device.type != "cpu":
        return like.new_empty(shape)
    size = math.prod(shape)
    held = buffers.get(name)
    if held is None or held.dtype != like.dtype or held.numel() < size:
        held = buffers[name] = like.new_empty(size)
    return held[:size].view(shape)

"""Where a kernel call goes: mamba_ssm / causal_conv1d's CUDA kernels, or genodiff's exact code.

The rule (docs/architecture.md §6.1): a call takes the upstream branch when its tensor is on
CUDA, in a dtype the kernels take (float32, float16, bfloat16), and the upstream function
imports (the packages built with their CUDA extensions); otherwise genodiff's exact CPU /
PyTorch code runs. It is never "because the module imports": an importable mamba_ssm changes
nothing for CPU tensors. genodiff's own Triton kernel for the short convolution
(``genodiff.ops.conv_triton``) follows the same rule for calls that need no gradient, where
causal_conv1d's kernel is absent (``triton_kernel``).

``upstream_kernels_on_cpu()`` is the one way around it: inside the context CPU tensors take the
upstream branch too, through exactly the calls CUDA tensors make, to whatever ``mamba_ssm`` and
``causal_conv1d`` import (the tests install contract fakes, ``tests/fakes``), so that the CUDA
branch of every backbone runs, and is compared with the exact path, on machines without a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import torch

# (module, function) of each upstream entry point genodiff calls
SELECTIVE_SCAN = ("mamba_ssm.ops.selective_scan_interface", "selective_scan_fn")
MAMBA_INNER = ("mamba_ssm.ops.selective_scan_interface", "mamba_inner_fn")
SELECTIVE_STATE_UPDATE = ("mamba_ssm.ops.triton.selective_state_update", "selective_state_update")
LAYER_NORM = ("mamba_ssm.ops.triton.layer_norm", "layer_norm_fn")
CAUSAL_CONV1D = ("causal_conv1d", "causal_conv1d_fn")
CAUSAL_CONV1D_UPDATE = ("causal_conv1d", "causal_conv1d_update")
# genodiff's own Triton kernel, where causal_conv1d's is absent (``triton_kernel``)
TRITON_CAUSAL_CONV1D = ("genodiff.ops.conv_triton", "causal_conv1d_triton")

KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_on_cpu: ContextVar[bool] = ContextVar("upstream_kernels_on_cpu", default=False)


@functools.cache
def importable(module: str, name: str) -> Callable | None:
    """``module.name``, or None where it does not import (absent, or built without its CUDA
    extension)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, OSError, AttributeError):
        return None


@contextlib.contextmanager
def upstream_kernels_on_cpu() -> Iterator[None]:
    """Route CPU tensors through the upstream (CUDA) branch of every op in this context.

    The upstream functions are looked up afresh on entry and on exit, so modules installed in
    ``sys.modules`` just before (the test fakes) are the ones called.
    """
    token = _on_cpu.set(True)
    importable.cache_clear()
    try:
        yield
    finally:
        _on_cpu.reset(token)
        importable.cache_clear()


def upstream(kernel: tuple[str, str], x: torch.Tensor) -> Callable | None:
    """The upstream function ``kernel`` for a call on ``x``, or None for the exact path."""
    if not (x.is_cuda or _on_cpu.get()) or x.dtype not in KERNEL_DTYPES:
        return None
    return importable(*kernel)


def triton_kernel(kernel: tuple[str, str], *tensors: torch.Tensor | None) -> Callable | None:
    """genodiff's Triton ``kernel`` for a call on ``tensors`` (the input first), or None: it
    runs CUDA tensors in a kernel dtype of which none asks for a gradient (the kernels have no
    backward pass), where triton imports (it comes with PyTorch's CUDA builds)."""
    x = tensors[0]
    if x is None or not x.is_cuda or x.dtype not in KERNEL_DTYPES:
        return None
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        return None
    return importable(*kernel)

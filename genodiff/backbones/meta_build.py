"""Building a backbone on the meta device, where nothing is allocated, to count its weights
before a config's model is built for real (``genodiff.model.backbone_size``).

torch runs most calls on meta tensors as Python reference kernels, and the first of them imports
``torch._dynamo`` (about 1.5 s, every ``genodiff.load``). A meta build therefore skips the
in-place calls (``SkipInPlaceOnMeta``: the initialisers), and a backbone computes its constants
with ``computed_on_cpu``; ``tests/test_import_cost.py`` checks that loading imports no dynamo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

# In-place calls that change a tensor's shape or storage, not its values: these still run.
RESHAPING = frozenset(
    ("resize_", "resize_as_", "unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_")
    + ("swapaxes_", "as_strided_", "set_")
)


class SkipInPlaceOnMeta(TorchFunctionMode):
    """Calls that set a meta tensor's values in place (``normal_``, ``uniform_``, ``zero_``,
    ``copy_``, ...) return it unchanged: a meta tensor has no values to set."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = next((a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), None)
        in_place = name.endswith("_") and not name.endswith("__") and name not in RESHAPING
        if in_place and target is not None and target.is_meta:
            return target
        return func(*args, **kwargs)


def computed_on_cpu(compute: Callable[..., Tensor], *args: Any) -> Tensor:
    """``compute(*args)`` run on the CPU, copied into a tensor on the device the model is built on
    (torch's default device): a backbone's constants (positions, frequencies, initial values)
    are then the same numbers wherever it is built, and a meta build does no arithmetic."""
    with torch.device("cpu"):
        values = compute(*args)
    on_device = torch.empty(values.shape, dtype=values.dtype)
    with torch.no_grad():
        return on_device.copy_(values)

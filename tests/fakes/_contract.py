"""What every fake shares: the call counter and the precondition checks."""

from __future__ import annotations

from collections import Counter

import torch

calls: Counter[str] = Counter()

KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class KernelContractError(RuntimeError):
    """An input that the real CUDA / Triton kernel rejects."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise KernelContractError(message)


def not_modelled(condition: bool, feature: str) -> None:
    """Upstream features genodiff does not use: the fakes refuse them rather than ignore them."""
    if condition:
        raise NotImplementedError(f"the contract fake does not model {feature}")


def same_device(reference: torch.Tensor, **tensors: torch.Tensor | None) -> None:
    """The kernels check that every tensor is on the GPU; here: on the first tensor's device."""
    for name, t in tensors.items():
        require(t is None or t.device == reference.device, f"{name} is on another device")


def shape(t: torch.Tensor, expected: tuple[int, ...], name: str) -> None:
    require(tuple(t.shape) == expected, f"{name} must have shape {expected}, got {tuple(t.shape)}")

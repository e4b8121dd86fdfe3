"""The device a command runs on (the CLI's ``--device``), checked before anything loads."""

from __future__ import annotations

import torch

from genodiff.errors import InputValueError


def resolve_device(name: str | torch.device | None) -> torch.device:
    """The torch device ``name`` names (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...); None: CUDA
    when this machine has it, else the CPU.

    InputValueError (parameter ``device``) for a name torch does not know, or for a device
    this machine does not have (``cuda`` without a GPU or a CUDA build of torch, ``cuda:3`` on
    a machine with two GPUs), instead of torch's errors deep inside loading or sampling.
    """
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise InputValueError(
            f"device {name!r} is not a device name; use cpu, cuda, cuda:N (N = GPU index) or "
            "leave it out for the best available",
            parameter="device",
        ) from None
    if device.type == "cpu":
        return device
    backend = getattr(torch, device.type, None)
    if device.type == "mps":
        backend = getattr(torch.backends, "mps", None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        raise InputValueError(
            f"device {name}: this machine has no {device.type} device (or this torch build "
            f"does not support it: torch {torch.__version__}); use cpu",
            parameter="device",
        )
    count = getattr(backend, "device_count", None)
    if device.index is not None and count is not None and device.index >= count():
        raise InputValueError(
            f"device {name}: this machine has {count()} {device.type} device(s), "
            f"{device.type}:0 to {device.type}:{count() - 1}",
            parameter="device",
        )
    return device

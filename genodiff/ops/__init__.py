"""Compute kernels with one contract each: CUDA kernels on CUDA tensors when importable,
an exact CPU / PyTorch implementation otherwise."""

from genodiff.ops.causal_conv1d import causal_conv1d
from genodiff.ops.norms import RMSNorm, add_norm, rms_norm
from genodiff.ops.selective_scan import selective_scan

__all__ = ["RMSNorm", "add_norm", "causal_conv1d", "rms_norm", "selective_scan"]

"""Compute kernels with one contract each: the upstream CUDA kernels where ``upstream`` sends a
call (CUDA tensors, packages importable), an exact CPU / PyTorch implementation otherwise."""

from genodiff.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from genodiff.ops.inference import inference_path, training_path
from genodiff.ops.norms import RMSNorm, add_norm, rms_norm
from genodiff.ops.selective_scan import mixer_conv, mixer_scan, selective_scan
from genodiff.ops.selective_state_update import selective_state_update
from genodiff.ops.upstream import upstream_kernels_on_cpu

__all__ = [
    "RMSNorm",
    "add_norm",
    "causal_conv1d",
    "causal_conv1d_update",
    "inference_path",
    "mixer_conv",
    "mixer_scan",
    "rms_norm",
    "selective_scan",
    "selective_state_update",
    "training_path",
    "upstream_kernels_on_cpu",
]

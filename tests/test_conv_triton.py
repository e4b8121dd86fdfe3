"""genodiff's Triton kernel of the short convolution (``genodiff.ops.conv_triton``), run on CPU
tensors in Triton's interpreter (``TRITON_INTERPRET=1``), against the convolution's definition
computed in float64 with numpy; and the routing that sends only CUDA calls without gradients to
it (``genodiff.ops.upstream.triton_kernel``); its compilation for a Hopper GPU.
tests/gpu/test_gpu_kernels.py runs the compiled kernel on a GPU.

The ``test`` extra installs triton (the interpreter needs no GPU)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from genodiff.ops import upstream

pytest.importorskip("triton", reason="pip install -e '.[test]' installs triton")
ROOT = Path(__file__).resolve().parents[1]


# (width, length, bias, SiLU, dtype): widths 1-5, lengths below and above the width and above the
# kernel's block of 1,024 positions (the second block reads the first's last ones), float16 in and
# out with the sum in float32
CASES = [
    (4, 37, True, True, torch.float32),
    (4, 3, False, True, torch.float32),
    (2, 20, True, False, torch.float32),
    (1, 5, True, True, torch.float32),
    (5, 9, False, False, torch.float32),
    (4, 1030, True, True, torch.float16),
]
# Triton reads TRITON_INTERPRET when it is imported, so the kernel runs in a process of its own.
RUN_INTERPRETED = """
import sys, torch
from genodiff.ops.conv_triton import causal_conv1d_triton
cases = torch.load(sys.argv[1])
outs = [causal_conv1d_triton(c["x"], c["weight"], c["bias"], c["silu"]) for c in cases]
torch.save(outs, sys.argv[2])
"""


def case_inputs(width, length, with_bias, silu, dtype):
    """x as the mixer passes it, a channel slice of the in_proj output (B, 2 D, L): its strides
    are not those of a contiguous tensor."""
    generator = torch.Generator().manual_seed(width * 10_000 + length)
    xz = torch.randn(2, 6, length, generator=generator).to(dtype)  # (B, 2 D, L)
    weight = torch.randn(3, width, generator=generator).to(dtype)
    bias = torch.randn(3, generator=generator).to(dtype) if with_bias else None
    return {"x": xz[:, :3], "weight": weight, "bias": bias, "silu": silu}


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """Each case's inputs and the kernel's output on them in Triton's interpreter."""
    folder = tmp_path_factory.mktemp("interpreted")
    cases = [case_inputs(*case) for case in CASES]
    torch.save(cases, folder / "cases.pt")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    command = [sys.executable, "-c", RUN_INTERPRETED, folder / "cases.pt", folder / "out.pt"]
    subprocess.run(command, env=environment, check=True, timeout=300)
    return list(zip(cases, torch.load(folder / "out.pt"), strict=True))


def definition(x, weight, bias, silu):
    """out[b, d, t] = act(bias[d] + sum_k weight[d, k] x[b, d, t - K + 1 + k]), x = 0 before
    t = 0, in float64, one position at a time."""
    x, weight = x.double().numpy(), weight.double().numpy()
    batch, channels, length = x.shape
    out = np.zeros(x.shape)
    for b, d, t in np.ndindex(batch, channels, length):
        total = 0.0 if bias is None else float(bias[d])
        for k in range(weight.shape[1]):
            source = t - weight.shape[1] + 1 + k
            if source >= 0:
                total += weight[d, k] * x[b, d, source]
        out[b, d, t] = total / (1 + np.exp(-total)) if silu else total
    return torch.from_numpy(out)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[str(c[:4]) for c in CASES])
def test_the_kernel_is_the_convolution(interpreted, case):
    inputs, out = interpreted[case]
    x = inputs["x"]
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    tolerance = 1e-5 if x.dtype == torch.float32 else 2e-3
    expected = definition(x, inputs["weight"], inputs["bias"], inputs["silu"])
    torch.testing.assert_close(out.double(), expected, rtol=tolerance, atol=tolerance)


def test_only_cuda_calls_without_gradients_are_routed_to_it():
    """CPU tensors never reach the kernel (even inside ``upstream_kernels_on_cpu``, whose fakes
    stand for causal_conv1d, not for Triton), and on CUDA a call asking for a gradient keeps
    PyTorch's autograd path."""
    x, weight = torch.randn(1, 2, 5), torch.randn(2, 4, requires_grad=True)
    assert upstream.triton_kernel(upstream.TRITON_CAUSAL_CONV1D, x, weight, None) is None
    with upstream.upstream_kernels_on_cpu():
        assert upstream.triton_kernel(upstream.TRITON_CAUSAL_CONV1D, x, weight, None) is None
    if torch.cuda.is_available():
        cuda_x, cuda_weight = x.cuda(), weight.detach().cuda().requires_grad_()
        assert upstream.triton_kernel(upstream.TRITON_CAUSAL_CONV1D, cuda_x, cuda_weight) is None
        with torch.no_grad():
            found = upstream.triton_kernel(upstream.TRITON_CAUSAL_CONV1D, cuda_x, cuda_weight)
        assert found is importlib.import_module("genodiff.ops.conv_triton").causal_conv1d_triton


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_kernel_compiles_for_a_hopper_gpu(dtype):
    """Triton's compiler (with the ptxas its wheel carries) builds the kernel for sm_90, the
    H100 / H200 the GPU sessions use, with no GPU here: type and shape errors the interpreter
    lets pass fail here. The signature is built from the kernel's own argument names."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile

    from genodiff.ops.conv_triton import FP_FUSION
    from genodiff.ops.conv_triton import _causal_conv1d_kernel as kernel

    constants = {"K": 4, "HAS_BIAS": True, "SILU": True, "BLOCK": 1024}
    tensors = {"x_ptr": dtype, "weight_ptr": "fp32", "bias_ptr": "fp32", "out_ptr": dtype}
    signature = {
        name: "constexpr"
        if name in constants
        else f"*{tensors[name]}"
        if name in tensors
        else "i32"
        for name in kernel.arg_names
    }
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a launch names every option Triton warns about
        compiled = compile(
            source, target=GPUTarget("cuda", 90, 32), options={"enable_fp_fusion": FP_FUSION}
        )
    assert len(compiled.asm["cubin"]) > 0

"""genodiff.ops.selective_scan against a plain sequential loop differentiated by autograd."""

import importlib

import numba
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from genodiff.ops import _scan_cpu, _scan_torch, selective_scan

scan_module = importlib.import_module("genodiff.ops.selective_scan")  # the package re-exports

NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def scan_reference(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """One time step at a time, every (B, D, N) state kept by autograd."""
    Bsz, Dn, L = u.shape
    if delta_bias is not None:
        delta = delta + delta_bias[:, None]
    if delta_softplus:
        delta = F.softplus(delta)

    def at(X, t):  # (Bsz, Dn, N)
        if X.dim() == 2:
            return X.expand(Bsz, -1, -1)
        if X.dim() == 3:
            return X[:, None, :, t].expand(-1, Dn, -1)
        return X[..., t].repeat_interleave(Dn // X.shape[1], dim=1)

    h = u.new_zeros(Bsz, Dn, A.shape[1])
    ys = []
    for t in range(L):
        h = torch.exp(delta[:, :, t, None] * A) * h + (delta[:, :, t] * u[:, :, t])[..., None] * at(
            B, t
        )
        ys.append((h * at(C, t)).sum(-1))
    y = torch.stack(ys, dim=-1)
    if D is not None:
        y = y + D[:, None] * u
    if z is not None:
        y = y * F.silu(z)
    return y, h


def make_inputs(
    L, B_mode="var", C_mode="var", z=True, D=True, bias=True, Dn=4, N=3, dtype=torch.float64, seed=0
):
    Bsz = 2
    """Mode "var": (B, N, L); "g2": two groups (B, 2, N, L); "const": (D, N)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)

    def bc(mode):
        shape = {"var": (Bsz, N, L), "g2": (Bsz, 2, N, L), "const": (Dn, N)}[mode]
        return randn(*shape)

    A = -(torch.rand(Dn, N, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
    inputs = {
        "u": randn(Bsz, Dn, L),
        "delta": randn(Bsz, Dn, L, scale=0.5),
        "A": A,
        "B": bc(B_mode),
        "C": bc(C_mode),
        "D": randn(Dn) if D else None,
        "z": randn(Bsz, Dn, L) if z else None,
        "delta_bias": randn(Dn, scale=0.5) if bias else None,
    }
    return {k: (v.requires_grad_() if v is not None else None) for k, v in inputs.items()}


def run(fn, inputs, softplus, dout):
    leaves = {k: v.detach().clone().requires_grad_() for k, v in inputs.items() if v is not None}
    args = {k: leaves.get(k) for k in NAMES}
    if fn is selective_scan:
        out, last = fn(**args, delta_softplus=softplus, return_last_state=True)
    else:
        out, last = fn(**args, delta_softplus=softplus)
    (out.float() * dout).sum().backward()
    return out, last, {k: v.grad for k, v in leaves.items()}


@pytest.fixture(params=["numba", "torch"])
def backend(request, monkeypatch):
    """Run on one CPU backend; the other one raises if it is reached."""

    def forbidden(*args):
        raise AssertionError("wrong backend")

    if request.param == "numba":
        monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
        monkeypatch.setattr(_scan_torch, "forward", forbidden)
        monkeypatch.setattr(_scan_torch, "backward", forbidden)
    else:
        monkeypatch.setenv("GENODIFF_DISABLE_NUMBA", "1")
        monkeypatch.setattr(_scan_cpu, "forward", forbidden)
        monkeypatch.setattr(_scan_cpu, "backward", forbidden)
    return request.param


CASES = [  # L, B mode, C mode, z, D, delta_bias, softplus
    (1, "var", "var", False, False, False, False),
    (7, "var", "var", True, True, True, True),
    (7, "const", "var", False, True, True, False),
    (7, "var", "const", True, False, False, True),
    (128, "g2", "g2", True, True, True, True),
    (128, "const", "g2", True, True, False, True),
    (1000, "var", "var", True, True, True, True),
]


@pytest.mark.parametrize("L, B_mode, C_mode, z, D, bias, softplus", CASES)
def test_matches_reference_fp64(backend, L, B_mode, C_mode, z, D, bias, softplus):
    inputs = make_inputs(L, B_mode, C_mode, z, D, bias)
    dout = torch.randn(2, 4, L, dtype=torch.float64)
    out, last, grads = run(selective_scan, inputs, softplus, dout)
    out_ref, last_ref, grads_ref = run(scan_reference, inputs, softplus, dout)
    assert out.dtype == torch.float64 and out.shape == (2, 4, L) and last.shape == (2, 4, 3)
    torch.testing.assert_close(out, out_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(last, last_ref, rtol=1e-10, atol=1e-10)
    assert grads.keys() == grads_ref.keys()
    for name in grads:
        assert grads[name].shape == inputs[name].shape, name
        torch.testing.assert_close(grads[name], grads_ref[name], rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize("B_mode, C_mode", [("var", "g2"), ("const", "var")])
def test_wide_state_matches_reference_fp64(backend, B_mode, C_mode):
    """N = 19: the kernels' vectorised loops over N plus their scalar remainder."""
    inputs = make_inputs(33, B_mode, C_mode, N=19, seed=3)
    dout = torch.randn(2, 4, 33, dtype=torch.float64)
    out, _, grads = run(selective_scan, inputs, True, dout)
    out_ref, _, grads_ref = run(scan_reference, inputs, True, dout)
    torch.testing.assert_close(out, out_ref, rtol=1e-10, atol=1e-10)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize("B_mode, C_mode", [("g2", "const"), ("const", "var")])
def test_channel_chunks_reduce_partial_grads(monkeypatch, B_mode, C_mode):
    """More threads than batch rows: channels split into chunks with per-chunk partial grads."""
    monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
    monkeypatch.setattr(_scan_cpu.numba, "get_num_threads", lambda: 7)  # 4 chunks of 1 channel
    inputs = make_inputs(7, B_mode, C_mode)
    dout = torch.randn(2, 4, 7, dtype=torch.float64)
    _, _, grads = run(selective_scan, inputs, True, dout)
    _, _, grads_ref = run(scan_reference, inputs, True, dout)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], rtol=1e-9, atol=1e-9, msg=name)


def test_kernels_run_on_as_many_threads_as_torch_and_leave_torchs_count(monkeypatch):
    """torch.set_num_threads bounds the CPU scan too (Lightning sets it to cores / processes when
    several CPU processes share a machine), and starting numba's OpenMP pool must not reset
    torch's count: both would then take every core in every process."""
    monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
    inputs = make_inputs(7, "var", "var", z=True)
    dout = torch.randn(2, 4, 7, dtype=torch.float64)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        out, _, grads = run(selective_scan, inputs, True, dout)
        assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1)
    finally:
        torch.set_num_threads(before)
    out_ref, _, grads_ref = run(scan_reference, inputs, True, dout)
    torch.testing.assert_close(out, out_ref, rtol=1e-10, atol=1e-10)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize("B_mode", ["var", "g2"])
def test_fp32_within_upstream_tolerance(backend, B_mode):
    inputs = make_inputs(128, B_mode, B_mode, Dn=8, N=16, seed=1)
    dout = torch.randn(2, 8, 128, dtype=torch.float64)
    inputs32 = {k: (v.float() if v is not None else None) for k, v in inputs.items()}
    out, last, grads = run(selective_scan, inputs32, True, dout.float())
    out_ref, last_ref, grads_ref = run(scan_reference, inputs, True, dout)
    assert out.dtype == torch.float32 and last.dtype == torch.float32
    torch.testing.assert_close(out, out_ref.float(), rtol=6e-4, atol=2e-3)
    torch.testing.assert_close(last, last_ref.float(), rtol=6e-4, atol=2e-3)
    for name in grads:
        assert grads[name].dtype == torch.float32
        torch.testing.assert_close(grads[name], grads_ref[name].float(), rtol=6e-4, atol=2e-3)


def test_bf16_inputs_close_to_fp32():
    inputs = make_inputs(128, Dn=8, N=16, dtype=torch.float32, seed=2)
    dout = torch.randn(2, 8, 128)
    inputs16 = {k: v.to(torch.bfloat16) for k, v in inputs.items() if k in ("u", "delta", "z")}
    inputs16 = {**inputs, **inputs16}  # weights stay fp32, as in the Mamba module
    out, _, grads = run(selective_scan, inputs16, True, dout)
    out_ref, _, grads_ref = run(selective_scan, inputs, True, dout)
    assert out.dtype == torch.bfloat16 and grads["u"].dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), out_ref, rtol=3e-2, atol=5e-2)
    for name in ("u", "delta", "z"):
        torch.testing.assert_close(grads[name].float(), grads_ref[name], rtol=3e-2, atol=5e-2)


def test_cpu_tensors_never_reach_the_cuda_kernel(upstream_fakes):
    inputs = make_inputs(7, dtype=torch.float32)  # float64 would skip the kernel anyway
    out = selective_scan(**inputs, delta_softplus=True)  # mamba_ssm imports (the fake)
    out.sum().backward()
    assert out.shape == (2, 4, 7) and inputs["u"].grad is not None
    assert upstream_fakes["selective_scan_fn"] == 0


def test_numba_failure_falls_back_to_torch(monkeypatch):
    def broken(*args):
        raise _scan_cpu.NumbaError("cannot compile")

    monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
    monkeypatch.setattr(_scan_cpu, "forward", broken)
    monkeypatch.setattr(scan_module, "_numba_failed", False)
    inputs = make_inputs(7)
    with pytest.warns(UserWarning, match="numba"):
        out = selective_scan(**inputs, delta_softplus=True)
    torch.testing.assert_close(out, run(scan_reference, inputs, True, 0)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_float_functions_match_numpy(dtype):
    """The kernels' vectorisable exp / softplus / sigmoid: within 4 eps of float64 numpy (exp
    flushes results below 4 smallest normals to 0), infinities and NaN as numpy."""
    x = np.concatenate([np.linspace(-800, 800, 100_001), np.linspace(-30, 30, 100_001)])
    x = np.concatenate([x, [np.inf, -np.inf, np.nan]]).astype(dtype)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        expected = {
            "exp": np.exp(x64),
            "softplus": np.where(x64 > 20, x64, np.logaddexp(0, x64)),
            "sigmoid": 1 / (1 + np.exp(-x64)),
        }
        expected = {name: want.astype(dtype) for name, want in expected.items()}
    tiny, eps = 4 * np.finfo(dtype).tiny, np.finfo(dtype).eps
    for name, want in expected.items():
        got = _apply_kernel_function(getattr(_scan_cpu, f"_{name}"), x)
        assert got.dtype == dtype
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)]), name
        assert np.all(np.abs(got[np.abs(want) <= tiny]) <= tiny), name
        normal = np.isfinite(want) & (np.abs(want) > tiny)
        rel = np.abs(got[normal] - want[normal]) / np.abs(want[normal])
        assert rel.max() <= 4 * eps, (name, rel.max() / eps)


def _apply_kernel_function(fn, x):
    @numba.njit
    def apply(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])

    out = np.empty_like(x)
    apply(x, out)
    return out


def test_returns_output_only_by_default():
    inputs = make_inputs(7, z=False)
    assert isinstance(selective_scan(**inputs), torch.Tensor)


MISFITS = {  # u (2, 4, 7), A (4, 3): arguments that do not fit, which the kernels would misread
    "B": torch.randn(2, 3, 3, 7),  # 3 groups do not divide D = 4 (read past B's end)
    "C": torch.randn(1, 3, 7),  # batch 1 for a batch of 2 (row 0 read for both)
    "delta": torch.randn(2, 4, 6),  # one step short
    "D": torch.randn(3),  # one channel short
}


@pytest.mark.parametrize("name", sorted(MISFITS))
def test_misfit_shapes_are_one_line_errors(backend, name):
    inputs = make_inputs(7, B_mode="g2")
    inputs[name] = MISFITS[name].to(torch.float64)
    with pytest.raises(ValueError, match=f"^selective_scan: {name} ") as caught:
        selective_scan(**inputs)
    assert "\n" not in str(caught.value)


def _mixer_kernel_inputs(dtype, rows=2, length=48, channels=236, state=16, rank=8):
    """Random arguments of the inference kernels, channels not a multiple of any vector
    width (so every loop has a remainder), decays from ~1 to underflow."""
    rng = np.random.default_rng(0)

    def draw(*shape, scale=1.0, low=None):
        x = rng.random(shape) if low is not None else rng.standard_normal(shape)
        return ((x if low is None else low * x) * scale).astype(dtype)

    S = 2
    return {
        "u": draw(S, rows, length, channels),
        "x_dbl": draw(S, rows, length, rank + 2 * state),
        "dt_weight_t": draw(S, rank, channels, scale=0.5),
        "At2": draw(S, state, channels, low=-200.0),
        "D_skip": draw(S, channels),
        "xz": draw(rows, length, 1, 2 * channels),
        "bias": draw(S, channels),
        "conv_weight_t": draw(S, 4, channels),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inference_kernels_give_the_bits_of_llvms_own_vector_width(dtype):
    """The inference kernels ask LLVM for 512-bit vectors (``_prefer_wide_vectors``): each
    channel's arithmetic is the same at any width, so the outputs equal, bit for bit, those of
    the same kernels compiled with LLVM's own choice (256-bit on recent Intel server CPUs),
    and a sampler draws the same sequences. Where the CPU has AVX-512 the wide kernels do use
    512-bit registers (the scan ran 1.4x faster with them)."""
    x = _mixer_kernel_inputs(dtype)
    decay = _scan_cpu._DECAY_CONSTANTS[np.dtype(dtype)]
    outputs = {}
    for name, conv, scan in (
        ("wide", _scan_cpu._mixer_conv_kernel, _scan_cpu._mixer_scan_kernel),
        (
            "default",
            _scan_cpu.with_default_vectors(_scan_cpu._mixer_conv_kernel),
            _scan_cpu.with_default_vectors(_scan_cpu._mixer_scan_kernel),
        ),
    ):
        u = np.empty_like(x["u"])
        conv(x["xz"], x["conv_weight_t"], x["bias"], u)
        y = np.empty((*x["xz"].shape[:2], 1, x["u"].shape[-1]), dtype)  # summed directions
        args = (x["dt_weight_t"], x["At2"], x["D_skip"], x["xz"], x["bias"], decay)
        scan(u, x["x_dbl"], *args, 1, y)
        outputs[name] = (u, y)
    for wide, default in zip(outputs["wide"], outputs["default"], strict=True):
        assert np.isfinite(default).all()
        np.testing.assert_array_equal(wide.view(np.uint8), default.view(np.uint8))


def test_inference_kernels_use_512_bit_registers_where_the_cpu_has_them():
    from llvmlite import binding

    if not binding.get_host_cpu_features().get("avx512f", False):
        pytest.skip("this CPU has no AVX-512")
    x = _mixer_kernel_inputs(np.float32, length=8)
    decay = _scan_cpu._DECAY_CONSTANTS[np.dtype(np.float32)]
    u, y = np.empty_like(x["u"]), np.empty((*x["xz"].shape[:2], 1, x["u"].shape[-1]), np.float32)
    conv_args = (x["xz"], x["conv_weight_t"], x["bias"], u)
    scan_args = (u, x["x_dbl"], x["dt_weight_t"], x["At2"], x["D_skip"], x["xz"], x["bias"])
    for kernel, args in (
        (_scan_cpu._mixer_conv_kernel, conv_args),
        (_scan_cpu._mixer_scan_kernel, (*scan_args, decay, 1, y)),
    ):
        # a fresh compile: numba shows no assembly of a kernel loaded from its disk cache
        fresh = numba.njit(**_scan_cpu.fresh_options(kernel))(kernel.py_func)
        fresh(*args)
        assert "zmm" in "\n".join(fresh.inspect_asm().values()), kernel.py_func.__name__

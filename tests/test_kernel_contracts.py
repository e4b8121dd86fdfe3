"""The CUDA branch without a GPU: the contract fakes (tests/fakes) against genodiff's exact ops,
their rejections, the dispatch switch, and every backbone through the upstream branch."""

from __future__ import annotations

import pytest
import torch

from genodiff import ops
from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.hyena import HyenaDNA
from genodiff.backbones.mamba import Mamba
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.ops import upstream_kernels_on_cpu
from genodiff.tokenizers import DNATokenizer
from tests.fakes import KernelContractError
from tests.fakes.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from tests.fakes.mamba_ssm.ops.selective_scan_interface import mamba_inner_fn, selective_scan_fn
from tests.fakes.mamba_ssm.ops.triton.layer_norm import layer_norm_fn
from tests.fakes.mamba_ssm.ops.triton.selective_state_update import selective_state_update


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


def scan_inputs(Bsz=2, D=8, L=12, N=4, groups=None, seed=0) -> dict[str, torch.Tensor]:
    """Inputs in the dtypes the kernel wants (fp32 here); B, C (Bsz, N, L), grouped, or
    constant (D, N) with ``groups="constant"``."""
    bc = {None: (Bsz, N, L), "constant": (D, N)}.get(groups, (Bsz, groups, N, L))
    return {
        "u": randn(Bsz, D, L, seed=seed),
        "delta": randn(Bsz, D, L, seed=seed + 1) * 0.5,
        "A": -torch.rand(D, N, generator=gen(seed + 2)) - 0.5,
        "B": randn(*bc, seed=seed + 3),
        "C": randn(*bc, seed=seed + 4),
        "D": randn(D, seed=seed + 5),
        "z": randn(Bsz, D, L, seed=seed + 6),
        "delta_bias": randn(D, seed=seed + 7) * 0.1,
    }


def grads_of(fn, inputs: dict[str, torch.Tensor], dout: torch.Tensor):
    leaves = {
        k: v.detach().clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()
    }
    out = fn(**leaves)
    (out.float() * dout).sum().backward()
    return out.detach(), {k: v.grad for k, v in leaves.items() if v.grad is not None}


# each fake computes the upstream result (compared with genodiff's exact ops) ---------------------


@pytest.mark.parametrize("groups", [None, 2, "constant"])
def test_fake_selective_scan_matches_the_exact_scan(groups):
    inputs = scan_inputs(groups=groups)
    dout = randn(2, 8, 12, seed=9)
    kwargs = {"delta_softplus": True}
    out, grads = grads_of(lambda **a: selective_scan_fn(**a, **kwargs), inputs, dout)
    ref, ref_grads = grads_of(lambda **a: ops.selective_scan(**a, **kwargs), inputs, dout)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert ref_grads.keys() == grads.keys() == inputs.keys()
    for name in inputs:
        torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-4, atol=1e-5, msg=name)
    out, last = selective_scan_fn(**inputs, return_last_state=True)
    ref, ref_last = ops.selective_scan(**inputs, return_last_state=True)
    assert last.shape == (2, 8, 4) and last.dtype == torch.float32 and not last.requires_grad
    if groups == "constant":  # the real kernel's state leaves a constant B out: h_L / B
        ref_last = ref_last / inputs["B"]
    torch.testing.assert_close((out, last), (ref, ref_last), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups", [None, "constant"])
def test_the_kernels_last_state_is_corrected_for_a_constant_b(upstream_fakes, groups):
    """Through the kernel (the fake, which leaves a constant B out of its state as the real
    one does) genodiff returns the true h_L: the exact path's."""
    inputs = scan_inputs(groups=groups)
    expected = ops.selective_scan(**inputs, delta_softplus=True, return_last_state=True)
    with upstream_kernels_on_cpu():
        got = ops.selective_scan(**inputs, delta_softplus=True, return_last_state=True)
    assert upstream_fakes["selective_scan_fn"] >= 1
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_kernel_that_keeps_b_in_its_state_is_not_corrected(upstream_fakes, monkeypatch):
    """A release that fixes the kernel is detected by the probe and not corrected twice."""
    from tests.fakes.mamba_ssm.ops import selective_scan_interface as fake

    def fixed(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False, *rest):
        return fake._scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus)  # true h_L

    monkeypatch.setattr(fake, "selective_scan_fn", fixed)
    inputs = scan_inputs(groups="constant")
    expected = ops.selective_scan(**inputs, return_last_state=True)
    with upstream_kernels_on_cpu():
        torch.testing.assert_close(ops.selective_scan(**inputs, return_last_state=True), expected)


def test_fake_causal_conv1d_matches_the_exact_conv_and_its_update():
    x, weight, bias = randn(2, 8, 10, seed=1), randn(8, 4, seed=2), randn(8, seed=3)
    for activation in (None, "silu"):
        expected = ops.causal_conv1d(x, weight, bias, activation)
        torch.testing.assert_close(
            causal_conv1d_fn(x, weight, bias, activation=activation), expected
        )
    state, state_ref = torch.zeros(2, 8, 4), torch.zeros(2, 8, 4)
    for t in range(10):  # stepping through the sequence reproduces the full convolution
        out = causal_conv1d_update(x[..., t], state, weight, bias, "silu")
        torch.testing.assert_close(
            out, ops.causal_conv1d_update(x[..., t], state_ref, weight, bias, "silu")
        )
        torch.testing.assert_close(out, ops.causal_conv1d(x, weight, bias, "silu")[..., t])
    torch.testing.assert_close(state, x[..., -4:])


def test_fake_state_update_matches_the_exact_update():
    p = scan_inputs(L=1)
    x, dt, z = p["u"][..., 0], p["delta"][..., 0], p["z"][..., 0]
    B, C = p["B"][..., 0], p["C"][..., 0]
    state, state_ref = randn(2, 8, 4, seed=11), randn(2, 8, 4, seed=11)
    args = (p["A"], B, C, p["D"])
    kwargs = {"z": z, "dt_bias": p["delta_bias"], "dt_softplus": True}
    out = selective_state_update(state, x, dt, *args, **kwargs)
    ref = ops.selective_state_update(state_ref, x, dt, *args, **kwargs)
    torch.testing.assert_close((out, state), (ref, state_ref))
    # one step from a zero state is the scan over one position
    state.zero_()
    out = selective_state_update(state, x, dt, *args, **kwargs)
    scan = ops.selective_scan(**{**p, "B": p["B"], "C": p["C"]}, delta_softplus=True)
    torch.testing.assert_close(out, scan[..., 0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("is_rms_norm", [True, False])
def test_fake_fused_norm_values_and_dtype_rules(is_rms_norm):
    x, residual = randn(2, 5, 8, seed=1, dtype=torch.bfloat16), randn(2, 5, 8, seed=2)
    weight, bias = torch.rand(8, generator=gen(3)), (None if is_rms_norm else randn(8, seed=4))
    norm = ops.RMSNorm(8) if is_rms_norm else torch.nn.LayerNorm(8)
    with torch.no_grad():
        norm.weight.copy_(weight)
        if bias is not None:
            norm.bias.copy_(bias)
    kwargs = {"eps": 1e-5, "is_rms_norm": is_rms_norm, "prenorm": True}
    out, res = layer_norm_fn(x, weight, bias, residual=residual, **kwargs)
    assert out.dtype == torch.bfloat16 and res.dtype == torch.float32  # x's, residual's dtypes
    s = x.float() + residual
    torch.testing.assert_close(res, s)
    torch.testing.assert_close(out, norm(s).to(torch.bfloat16))
    # no residual: float32 with residual_in_fp32, else x itself
    _, res = layer_norm_fn(x, weight, bias, residual_in_fp32=True, **kwargs)
    assert res.dtype == torch.float32
    _, res = layer_norm_fn(x, weight, bias, **kwargs)
    assert res is x
    assert isinstance(
        layer_norm_fn(x, weight, bias, eps=1e-5, is_rms_norm=is_rms_norm), torch.Tensor
    )


def test_fake_mamba_inner_matches_the_unfused_mixer():
    torch.manual_seed(0)
    m = Mamba(8, d_state=4)
    xz = m.in_proj_xz(randn(2, 10, 8, seed=1))
    A = -torch.exp(m.A_log.float())
    expected = m.out_proj(m.ssm(xz, A).mT)  # y (B, d_inner, L)
    out = mamba_inner_fn(
        xz, m.conv1d.weight, m.conv1d.bias, m.x_proj.weight, m.dt_proj.weight,
        m.out_proj.weight, m.out_proj.bias, A, None, None, m.D.float(),
        delta_bias=m.dt_proj.bias.float(), delta_softplus=True,
    )  # fmt: skip
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


# each fake rejects what its kernel rejects ------------------------------------------------------


def test_fake_scan_rejects_what_the_kernel_rejects():
    p = scan_inputs()
    bf16 = {k: p[k].bfloat16() for k in ("u", "delta", "z", "B", "C")}
    selective_scan_fn(**{**p, **bf16})  # bf16 inputs with fp32 A, D, delta_bias: accepted
    bad = {
        "D in bf16": {**p, **bf16, "D": p["D"].bfloat16()},
        "delta_bias in bf16": {**p, **bf16, "delta_bias": p["delta_bias"].bfloat16()},
        "delta not in u's dtype": {**p, **bf16, "delta": p["delta"]},
        "float64 u": {k: v.double() for k, v in p.items()},
        "B and C with different groups": {**p, "C": torch.randn(2, 2, 4, 12)},
        "D of the wrong length": {**p, "D": torch.randn(7)},
        "dstate over 256": {
            **p,
            "A": -torch.rand(8, 257),
            "B": torch.randn(2, 257, 12),
            "C": torch.randn(2, 257, 12),
        },
    }
    for name, kwargs in bad.items():
        with pytest.raises(KernelContractError):
            selective_scan_fn(**kwargs)
            pytest.fail(name)


def test_fake_conv_rejects_what_the_kernel_rejects():
    x, weight, bias = torch.randn(2, 6, 10), torch.randn(6, 4), torch.randn(6)
    bad = {
        "Conv1d weight (D, 1, W)": (x, weight.unsqueeze(1), bias),
        "width 5": (x, torch.randn(6, 5), bias),
        "width 1": (x, torch.randn(6, 1), bias),
        "bias not in weight's dtype": (x, weight, bias.bfloat16()),
        "float64 x": (x.double(), weight, bias),
        "channel-last with dim % 8 != 0": (x.mT.contiguous().mT, weight, bias),
    }
    for name, args in bad.items():
        with pytest.raises(KernelContractError):
            causal_conv1d_fn(*args, activation="silu")
            pytest.fail(name)
    with pytest.raises(NotImplementedError):
        causal_conv1d_fn(x, weight, bias, activation="relu")
    state = torch.zeros(2, 6, 4)
    with pytest.raises(KernelContractError):  # conv_state must be in x's dtype
        causal_conv1d_update(x[..., 0].bfloat16(), state, weight, bias, "silu")
    with pytest.raises(KernelContractError):
        causal_conv1d_update(x[..., 0], torch.zeros(2, 6, 2), weight, bias, "silu")


def test_fake_state_update_rejects_mismatched_shapes():
    state, x = torch.zeros(2, 8, 4), torch.randn(2, 8)
    A, B = -torch.rand(8, 4), torch.randn(2, 4)
    selective_state_update(state, x, x, A, B, B, torch.ones(8))
    for args in [
        (state, x, x, A, B, torch.randn(2, 5), None),  # C not B's shape
        (state, x, x[:, :7], A, B, B, None),  # dt not x's shape
        (state, x, x, A, B, B, torch.ones(7)),  # D of the wrong length
        (torch.zeros(3, 8, 4), x, x, A, B, B, None),  # state of another batch
    ]:
        with pytest.raises(KernelContractError):
            selective_state_update(*args)


def test_fake_norm_rejects_what_the_kernel_rejects():
    x, weight = torch.randn(2, 3, 8), torch.ones(8)
    with pytest.raises(KernelContractError):  # residual of another shape
        layer_norm_fn(x, weight, None, residual=torch.randn(2, 3, 4), is_rms_norm=True)
    with pytest.raises(KernelContractError):  # weight of another size
        layer_norm_fn(x, torch.ones(4), None, is_rms_norm=True)
    wide = torch.randn(1, 32768)  # 128 KB of float32 per row: over the Triton block
    with pytest.raises(KernelContractError):
        layer_norm_fn(wide, torch.ones(32768), None, is_rms_norm=True)
    layer_norm_fn(wide.bfloat16(), torch.ones(32768), None, is_rms_norm=True)  # 64 KB: fits


def test_fake_mamba_inner_rejects_a_squeezed_conv_weight():
    torch.manual_seed(0)
    m = Mamba(8, d_state=4)
    xz = m.in_proj_xz(torch.randn(2, 10, 8))
    args = (m.conv1d.bias, m.x_proj.weight, m.dt_proj.weight, m.out_proj.weight, None)
    A = -torch.exp(m.A_log)
    with pytest.raises(KernelContractError):
        mamba_inner_fn(xz, m.conv1d.weight.squeeze(1), *args, A, None, None, m.D)
    with pytest.raises(KernelContractError):  # D must be float32 for the scan kernel
        mamba_inner_fn(xz, m.conv1d.weight, *args, A, None, None, m.D.bfloat16())


# the dispatch switch ----------------------------------------------------------------------------


def run_every_op(x: torch.Tensor) -> None:
    p = scan_inputs()
    ops.selective_scan(**p)
    ops.causal_conv1d(x, torch.randn(8, 4), torch.randn(8), "silu")
    ops.causal_conv1d_update(x[..., 0], torch.zeros(2, 8, 4), torch.randn(8, 4), None, "silu")
    ops.selective_state_update(
        torch.zeros(2, 8, 4), x[..., 0], x[..., 0], p["A"], p["B"][..., 0], p["C"][..., 0]
    )
    ops.add_norm(x.mT, None, ops.RMSNorm(8), residual_in_fp32=True, fused=True)


def test_cpu_tensors_take_the_exact_path_even_when_the_kernels_import(upstream_fakes):
    run_every_op(torch.randn(2, 8, 12))
    assert sum(upstream_fakes.values()) == 0
    with upstream_kernels_on_cpu():
        run_every_op(torch.randn(2, 8, 12))
        ops.add_norm(torch.randn(2, 3, 8), None, ops.RMSNorm(8), True)  # not fused: exact
        ops.selective_scan(**{k: v.double() for k, v in scan_inputs().items()})  # no fp64 kernel
    assert dict(upstream_fakes) == {
        "selective_scan_fn": 1,
        "causal_conv1d_fn": 1,
        "causal_conv1d_update": 1,
        "selective_state_update": 1,
        "layer_norm_fn": 1,
    }
    run_every_op(torch.randn(2, 8, 12))  # the switch is off again
    assert sum(upstream_fakes.values()) == 5


def test_the_switch_falls_back_to_the_exact_path_when_nothing_imports(monkeypatch):
    import sys

    for name in ("mamba_ssm", "causal_conv1d"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with upstream_kernels_on_cpu():
        out = ops.selective_scan(**scan_inputs(), delta_softplus=True)
    torch.testing.assert_close(out, ops.selective_scan(**scan_inputs(), delta_softplus=True))


# every backbone through the CUDA branch, against the CPU branch ---------------------------------

SMALL = {"d_model": 16, "n_layer": 2, "vocab_size": 12}
UNFUSED = {"fused_add_norm": False, "ssm_cfg": {"use_fast_path": False}}
# Caduceus-PS with the DNA tokenizer\'s complement map, as a config builds it
PS = {"rcps": True, "complement_map": DNATokenizer().complement_map}
FUSED_CALLS, UNFUSED_CALLS = (
    {"mamba_inner_fn", "layer_norm_fn"},
    {"causal_conv1d_fn", "selective_scan_fn"},
)
BACKBONES = {
    "caduceus-ph": (lambda: Caduceus(**SMALL), FUSED_CALLS),
    "caduceus-ph-unfused": (lambda: Caduceus(**SMALL, **UNFUSED), UNFUSED_CALLS),
    "caduceus-ph-untied": (
        lambda: Caduceus(**SMALL, bidirectional_weight_tie=False),
        FUSED_CALLS,
    ),
    "caduceus-ps": (lambda: Caduceus(**SMALL, **PS), FUSED_CALLS),
    "caduceus-ps-unfused": (lambda: Caduceus(**SMALL, **PS, **UNFUSED), UNFUSED_CALLS),
    "mamba": (lambda: MambaLM(**SMALL), FUSED_CALLS),
    "mamba-unfused": (lambda: MambaLM(**SMALL, **UNFUSED), UNFUSED_CALLS),
    "hyena": (
        lambda: HyenaDNA(**SMALL, d_inner=32, layer={"l_max": 64, "filter_order": 16}),
        set(),  # FFT convolutions: no upstream kernel
    ),
}


def logits_and_grads(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    logits = model(ids)
    weights = torch.randn(logits.shape, generator=gen(5))
    (logits.float() * weights).sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads


@pytest.mark.parametrize("name", BACKBONES)
def test_backbone_forward_and_backward_through_the_cuda_branch(name, upstream_fakes):
    make, expected_calls = BACKBONES[name]
    torch.manual_seed(0)
    model = make().eval()
    ids = torch.randint(7, 12, (2, 24), generator=gen(1))
    logits, grads = logits_and_grads(model, ids)
    assert sum(upstream_fakes.values()) == 0
    with upstream_kernels_on_cpu():
        kernel_logits, kernel_grads = logits_and_grads(model, ids)
    assert set(upstream_fakes) == expected_calls
    torch.testing.assert_close(kernel_logits, logits, rtol=1e-4, atol=1e-5)
    assert kernel_grads.keys() == grads.keys()
    for key, grad in grads.items():
        torch.testing.assert_close(kernel_grads[key], grad, rtol=1e-3, atol=1e-5, msg=key)


def test_ps_fused_ordering_survives_the_fused_kernel(upstream_fakes):
    """Through the kernel path, PS with fused_add_norm stays RC-equivariant and keeps the
    half-swapped ordering: it differs from the non-fused model with the same weights."""
    torch.manual_seed(0)
    fused = Caduceus(**SMALL, **PS).eval()
    plain = Caduceus(**SMALL, **PS, fused_add_norm=False).eval()
    with torch.no_grad():  # the same weights; only the norms' keys differ (.submodule.)
        for p, q in zip(fused.parameters(), plain.parameters(), strict=True):
            q.copy_(p)
    ids = torch.randint(7, 12, (2, 24), generator=gen(2))
    cmap = fused.lm_head.complement_map
    with upstream_kernels_on_cpu(), torch.no_grad():
        logits = fused(ids)
        logits_rc = fused(cmap[ids.flip(-1)])
        other = plain(ids)
    assert upstream_fakes["layer_norm_fn"] > 0
    torch.testing.assert_close(logits_rc, logits.flip(1)[..., cmap], rtol=1e-4, atol=1e-5)
    assert (logits - other).abs().max() > 1e-3


def test_mamba_step_through_the_cuda_branch(upstream_fakes):
    """Recurrent steps with the decode kernels reproduce the exact steps and the forward."""
    torch.manual_seed(0)
    model = MambaLM(**SMALL).eval()
    ids = torch.randint(7, 12, (2, 10), generator=gen(3))

    def stepped() -> torch.Tensor:
        cache = model.allocate_inference_cache(2)
        return torch.stack([model.step(ids[:, t], cache) for t in range(ids.shape[1])], dim=1)

    with torch.no_grad():
        exact = stepped()
        with upstream_kernels_on_cpu():
            kernel = stepped()
        full = model(ids)
    assert upstream_fakes["causal_conv1d_update"] == upstream_fakes["selective_state_update"] == 20
    assert upstream_fakes["layer_norm_fn"] == 10 * 3  # two blocks and the final norm per step
    torch.testing.assert_close(kernel, exact, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(kernel, full, rtol=1e-4, atol=1e-5)


def test_mamba_step_under_autocast_through_the_cuda_branch(upstream_fakes):
    """bf16 autocast makes in_proj's output bf16 while the cache is float32: the decode
    kernels must still accept every call."""
    torch.manual_seed(0)
    model = MambaLM(**SMALL).eval()
    ids = torch.randint(7, 12, (2, 6), generator=gen(3))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        exact_cache, kernel_cache = (
            model.allocate_inference_cache(2),
            model.allocate_inference_cache(2),
        )
        exact = [model.step(ids[:, t], exact_cache) for t in range(6)]
        with upstream_kernels_on_cpu():
            kernel = [model.step(ids[:, t], kernel_cache) for t in range(6)]
    assert upstream_fakes["causal_conv1d_update"] == 12
    torch.testing.assert_close(torch.stack(kernel), torch.stack(exact), rtol=3e-2, atol=5e-2)


@pytest.mark.parametrize("rcps", [False, True])
def test_caduceus_under_bf16_autocast_through_the_cuda_branch(rcps, upstream_fakes):
    """Mixed precision is where dtype contracts break: every kernel call must be accepted, and
    the result stay close to the exact path under the same autocast."""
    torch.manual_seed(0)
    model = Caduceus(**SMALL, complement_map=PS["complement_map"], rcps=rcps).eval()
    ids = torch.randint(7, 12, (2, 16), generator=gen(4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, grads = logits_and_grads(model, ids)
        with upstream_kernels_on_cpu():
            kernel_logits, kernel_grads = logits_and_grads(model, ids)
    assert set(upstream_fakes) == FUSED_CALLS
    torch.testing.assert_close(kernel_logits.float(), logits.float(), rtol=3e-2, atol=5e-2)
    for key, grad in grads.items():  # bf16 noise: measured at most 4e-2 of the norm
        assert (kernel_grads[key] - grad).norm() / grad.norm() < 0.1, key


def test_unfused_mixer_under_autocast_passes_kernel_dtypes(upstream_fakes):
    torch.manual_seed(0)
    m = Mamba(16, use_fast_path=False)
    h = torch.randn(2, 12, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16), upstream_kernels_on_cpu():
        out = m(h)
    assert out.dtype == torch.bfloat16
    assert upstream_fakes["selective_scan_fn"] == upstream_fakes["causal_conv1d_fn"] == 1
    torch.testing.assert_close(out.float(), m(h), rtol=5e-2, atol=5e-2)

"""The real mamba-ssm / causal-conv1d kernels on a CUDA GPU against genodiff's exact CPU path.

Skipped, as a whole, without a CUDA device or without mamba-ssm; the tests of causal-conv1d's
kernels (and of mamba_inner_fn, which calls them) are skipped without it, and the others then run
with the short convolution in PyTorch, as genodiff does. On a GPU machine:

    pip install --no-build-isolation -e '.[cuda,test]'
    python -m pytest -q tests/gpu

Tolerances: upstream's own for the scan (float32 rtol 6e-4 / atol 2e-3, bfloat16 3e-2 / 5e-2);
whole models in float32 within 2e-3 (TF32 is switched off for these tests).
"""

# ruff: noqa: E402  (the upstream imports come after the module-level skips)

from __future__ import annotations

import copy
import importlib
import warnings

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("tests/gpu needs a CUDA GPU", allow_module_level=True)
INSTALL = "with CUDA: pip install --no-build-isolation '.[cuda]'"
pytest.importorskip("mamba_ssm.ops.selective_scan_interface", reason=f"needs mamba-ssm {INSTALL}")

from mamba_ssm.ops.selective_scan_interface import mamba_inner_fn, selective_scan_fn
from mamba_ssm.ops.triton.layer_norm import layer_norm_fn
from mamba_ssm.ops.triton.selective_state_update import selective_state_update

from genodiff import cli, ops
from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.hyena import HyenaDNA
from genodiff.backbones.mamba import Mamba
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.objectives import UDLM
from genodiff.ops import upstream
from genodiff.samplers import MASKED_SAMPLERS, UNIFORM_SAMPLERS
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import DNATokenizer
from tests import guided
from tests.dna_objectives import DNA, ar, mdlm
from tests.test_cli import DEMO, TINY

CUDA = torch.device("cuda")
CAUSAL_CONV1D = upstream.upstream(upstream.CAUSAL_CONV1D, torch.zeros(1, device=CUDA))
needs_causal_conv1d = pytest.mark.skipif(
    CAUSAL_CONV1D is None, reason=f"needs causal-conv1d {INSTALL}"
)
SCAN_TOL = {
    torch.float32: {"rtol": 6e-4, "atol": 2e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 5e-2},
}
MODEL_TOL = {"rtol": 2e-3, "atol": 2e-3}


@pytest.fixture(autouse=True)
def no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def on_both(inputs: dict[str, torch.Tensor | None]) -> tuple[dict, dict]:
    """Leaf copies of the inputs on the CPU and on the GPU (requiring grad when float)."""

    def leaf(t, device):
        if t is None:
            return None
        t = t.detach().to(device)
        return t.requires_grad_() if t.is_floating_point() else t

    return {k: leaf(v, "cpu") for k, v in inputs.items()}, {
        k: leaf(v, CUDA) for k, v in inputs.items()
    }


def assert_grads_close(cpu: dict, gpu: dict, **tol) -> None:
    for name, t in cpu.items():
        if t is not None and t.grad is not None:
            torch.testing.assert_close(
                gpu[name].grad.cpu().float(), t.grad.float(), **tol, msg=name
            )


def test_dispatch_sends_cuda_tensors_to_the_real_kernels():
    x = torch.zeros(1, device=CUDA)
    kernels = [
        (upstream.SELECTIVE_SCAN, selective_scan_fn),
        (upstream.MAMBA_INNER, mamba_inner_fn),
        (upstream.LAYER_NORM, layer_norm_fn),
        (upstream.SELECTIVE_STATE_UPDATE, selective_state_update),
    ]
    if CAUSAL_CONV1D is not None:
        import causal_conv1d

        kernels += [
            (upstream.CAUSAL_CONV1D, causal_conv1d.causal_conv1d_fn),
            (upstream.CAUSAL_CONV1D_UPDATE, causal_conv1d.causal_conv1d_update),
        ]
    for kernel, fn in kernels:
        assert upstream.upstream(kernel, x) is fn
        assert upstream.upstream(kernel, x.cpu()) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["variable", "grouped", "constant"])
def test_selective_scan_kernel(layout, dtype):
    Bsz, D, L, N = 2, 16, 256, 16
    bc = {"variable": (Bsz, N, L), "grouped": (Bsz, 2, N, L), "constant": (D, N)}[layout]
    bc_dtype = torch.float32 if layout == "constant" else dtype  # the kernel's rule
    inputs = {
        "u": randn(Bsz, D, L, seed=0).to(dtype),
        "delta": randn(Bsz, D, L, seed=1, scale=0.5).to(dtype),
        "A": -(torch.rand(D, N, generator=torch.Generator().manual_seed(2)) + 0.5),
        "B": randn(*bc, seed=3).to(bc_dtype),
        "C": randn(*bc, seed=4).to(bc_dtype),
        "D": randn(D, seed=5),
        "z": randn(Bsz, D, L, seed=6).to(dtype),
        "delta_bias": randn(D, seed=7, scale=0.5),
    }
    dout = randn(Bsz, D, L, seed=8)
    cpu, gpu = on_both(inputs)
    out, last = ops.selective_scan(**cpu, delta_softplus=True, return_last_state=True)
    out_k, last_k = ops.selective_scan(**gpu, delta_softplus=True, return_last_state=True)
    (out.float() * dout).sum().backward()
    (out_k.float() * dout.to(CUDA)).sum().backward()
    tol = SCAN_TOL[dtype]
    assert out_k.dtype == dtype and last_k.dtype == torch.float32
    torch.testing.assert_close(out_k.cpu().float(), out.float(), **tol)
    torch.testing.assert_close(last_k.cpu(), last, **tol)
    assert_grads_close(cpu, gpu, **tol)


@needs_causal_conv1d
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [2, 3, 4])
def test_causal_conv1d_kernel_and_its_update(width, dtype):
    inputs = {
        "x": randn(2, 64, 128, seed=0).to(dtype),
        "weight": randn(64, width, seed=1),
        "bias": randn(64, seed=2),
    }
    cpu, _ = on_both({**inputs, "x": inputs["x"].float()})  # the exact path wants one dtype
    _, gpu = on_both(inputs)  # the kernel takes bf16 x with a float32 weight
    out = ops.causal_conv1d(**cpu, activation="silu")
    out_k = ops.causal_conv1d(**gpu, activation="silu")
    dout = randn(2, 64, 128, seed=3)
    (out.float() * dout).sum().backward()
    (out_k.float() * dout.to(CUDA)).sum().backward()
    tol = SCAN_TOL[dtype]
    torch.testing.assert_close(out_k.cpu().float(), out.float(), **tol)
    assert_grads_close(cpu, gpu, **tol)

    x, weight, bias = (t.detach() for t in gpu.values())
    state = torch.zeros(2, 64, width, device=CUDA, dtype=dtype)
    with torch.no_grad():
        steps = [ops.causal_conv1d_update(x[..., t], state, weight, bias, "silu") for t in range(8)]
    torch.testing.assert_close(torch.stack(steps, -1).cpu().float(), out[..., :8].float(), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [1, 4, 5])
def test_triton_conv_kernel_without_gradients(width, dtype, monkeypatch):
    """genodiff's compiled Triton convolution (where causal-conv1d is absent, or its kernel does
    not take the width) on x as the mixer passes it (a channel slice), against the exact path;
    a call that asks for a gradient stays on PyTorch's autograd."""
    conv_module = importlib.import_module("genodiff.ops.causal_conv1d")  # not the function
    monkeypatch.setattr(conv_module, "upstream", lambda kernel, x: None)  # no causal-conv1d
    xz = randn(2, 128, 1030, seed=0).to(dtype)  # (B, 2 D, L): a second block of positions
    inputs = {"x": xz[:, :64], "weight": randn(64, width, seed=1).to(dtype), "bias": randn(64)}
    with torch.no_grad():
        out = ops.causal_conv1d(**{k: v.float() for k, v in inputs.items()}, activation="silu")
        cuda = {k: v.to(CUDA) for k, v in inputs.items()}
        assert upstream.triton_kernel(upstream.TRITON_CAUSAL_CONV1D, *cuda.values()) is not None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # its compile options named: Triton warns of none
            out_k = ops.causal_conv1d(**cuda, activation="silu")
    assert out_k.dtype == dtype and out_k.is_contiguous()
    torch.testing.assert_close(out_k.cpu().float(), out, **SCAN_TOL[dtype])
    weight = cuda["weight"].float().requires_grad_()
    ops.causal_conv1d(cuda["x"].float(), weight, activation="silu").sum().backward()
    assert weight.grad is not None


@pytest.mark.parametrize("use_fast_path", [pytest.param(True, marks=needs_causal_conv1d), False])
def test_mamba_mixer_fused_and_unfused(use_fast_path):
    torch.manual_seed(0)
    cpu_model = Mamba(64, use_fast_path=use_fast_path)
    gpu_model = copy.deepcopy(cpu_model).to(CUDA)
    h = randn(2, 256, 64, seed=1)
    out = cpu_model(h)
    out_k = gpu_model(h.to(CUDA))
    dout = randn(*out.shape, seed=2)
    (out * dout).sum().backward()
    (out_k * dout.to(CUDA)).sum().backward()
    torch.testing.assert_close(out_k.cpu(), out, **MODEL_TOL)
    for (name, p), q in zip(cpu_model.named_parameters(), gpu_model.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-2, atol=1e-3, msg=name)


@pytest.mark.parametrize("norm_cls", [ops.RMSNorm, torch.nn.LayerNorm])
def test_fused_add_norm_kernel(norm_cls):
    torch.manual_seed(0)
    norm = norm_cls(128)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    inputs = {"x": randn(2, 64, 128, seed=1).bfloat16(), "residual": randn(2, 64, 128, seed=2)}
    cpu, gpu = on_both(inputs)
    normed, residual = ops.add_norm(**cpu, norm=norm, residual_in_fp32=True, fused=True)
    normed_k, residual_k = ops.add_norm(
        **gpu, norm=copy.deepcopy(norm).to(CUDA), residual_in_fp32=True, fused=True
    )
    assert normed_k.dtype == torch.bfloat16 and residual_k.dtype == torch.float32
    torch.testing.assert_close(residual_k.cpu(), residual)
    torch.testing.assert_close(normed_k.cpu().float(), normed.float(), rtol=1e-2, atol=1e-2)
    (normed.float().sum() + residual.square().sum()).backward()
    (normed_k.float().sum() + residual_k.square().sum()).backward()
    assert_grads_close(cpu, gpu, rtol=1e-2, atol=1e-2)


SMALL = {"d_model": 32, "n_layer": 2, "vocab_size": 12}
UNFUSED = {"fused_add_norm": False, "ssm_cfg": {"use_fast_path": False}}
# Caduceus-PS with the DNA tokenizer\'s complement map, as a config builds it
PS = {"rcps": True, "complement_map": DNATokenizer().complement_map}
BACKBONES = {
    "caduceus-ph": lambda: Caduceus(**SMALL),
    "caduceus-ph-unfused": lambda: Caduceus(**SMALL, **UNFUSED),
    "caduceus-ps": lambda: Caduceus(**SMALL, **PS),
    "caduceus-ps-unfused": lambda: Caduceus(**SMALL, **PS, **UNFUSED),
    "mamba": lambda: MambaLM(**SMALL),
    "hyena": lambda: HyenaDNA(**SMALL, d_inner=64, layer={"l_max": 258, "filter_order": 16}),
}


@pytest.mark.parametrize("name", BACKBONES)
def test_backbone_logits_and_gradients(name):
    torch.manual_seed(0)
    cpu_model = BACKBONES[name]().eval()
    gpu_model = copy.deepcopy(cpu_model).to(CUDA)
    ids = torch.randint(7, 11, (2, 256), generator=torch.Generator().manual_seed(1))
    logits = cpu_model(ids)
    logits_k = gpu_model(ids.to(CUDA))
    torch.testing.assert_close(logits_k.cpu(), logits, **MODEL_TOL)
    logits.logsumexp(-1).sum().backward()
    logits_k.logsumexp(-1).sum().backward()
    for (key, p), q in zip(cpu_model.named_parameters(), gpu_model.parameters(), strict=True):
        if p.grad is not None:
            scale = p.grad.abs().max().clamp_min(1e-6)
            assert (q.grad.cpu() - p.grad).abs().max() / scale < 1e-2, key


def test_mamba_steps_with_decode_kernels():
    torch.manual_seed(0)
    cpu_model = MambaLM(**SMALL).eval()
    gpu_model = copy.deepcopy(cpu_model).to(CUDA)
    ids = torch.randint(7, 11, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cache = gpu_model.allocate_inference_cache(3)
        steps = torch.stack([gpu_model.step(ids[:, t].to(CUDA), cache) for t in range(32)], 1)
        full = cpu_model(ids)
    torch.testing.assert_close(steps.cpu(), full, **MODEL_TOL)


def test_one_training_step_in_bf16():
    """bf16 autocast with the kernels on the GPU vs float32 on the CPU: the same loss on the same
    noise within 1e-2 (relative), gradients aligned, and the AdamW step finite."""
    torch.manual_seed(0)
    cpu_model = Caduceus(d_model=64, n_layer=2, vocab_size=12)
    gpu_model = copy.deepcopy(cpu_model).to(CUDA)
    objective = mdlm()
    ids = torch.randint(7, 11, (8, 512), generator=torch.Generator().manual_seed(1))
    t, masked = objective.process.draw_noise(ids, torch.Generator().manual_seed(2))
    nelbo, _ = objective.nelbo_terms(cpu_model, ids, t, masked)
    loss = nelbo.sum() / ids.numel()
    loss.backward()
    optimizer = torch.optim.AdamW(gpu_model.parameters(), lr=1e-3)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        nelbo_k, _ = objective.nelbo_terms(gpu_model, ids.to(CUDA), t.to(CUDA), masked.to(CUDA))
        loss_k = nelbo_k.sum() / ids.numel()
    loss_k.backward()
    assert abs(loss_k.item() - loss.item()) / loss.item() < 1e-2
    g = torch.cat([p.grad.flatten() for p in cpu_model.parameters() if p.grad is not None])
    g_k = torch.cat([p.grad.flatten().cpu() for p in gpu_model.parameters() if p.grad is not None])
    assert torch.nn.functional.cosine_similarity(g, g_k, dim=0) > 0.99
    before = [p.detach().clone() for p in gpu_model.parameters()]
    optimizer.step()
    after = list(gpu_model.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_train_command_in_bf16_on_the_gpu(tmp_path):
    args = [a for a in TINY if not a.startswith(("trainer.max_steps", "trainer.val_check"))]
    args += ["trainer.max_steps=2", "trainer.val_check_interval=2"]
    args += ["trainer.accelerator=gpu", "trainer.devices=1", "trainer.precision=bf16-mixed"]
    assert cli.main(["train", DEMO, *args, f"output_dir={tmp_path}"]) == 0
    assert (tmp_path / "samples.fa").is_file()


@pytest.mark.parametrize("sampler", MASKED_SAMPLERS)
def test_masked_samplers_on_the_gpu(sampler):
    torch.manual_seed(0)
    cpu_model = Caduceus(d_model=32, n_layer=2, vocab_size=12).eval()
    model = copy.deepcopy(cpu_model).to(CUDA)
    objective = mdlm(sample_ids=DNA.sample_ids)
    template = torch.full((64,), DNA.mask_id)
    template[:8] = torch.tensor([7, 8, 9, 10] * 2)
    given = torch.zeros(64, dtype=torch.bool)
    given[:8] = True
    request = SampleRequest(
        4, 64, steps=32, sampler=sampler, template=template, given=given, block=32, stride=16
    )

    def draw(seed: int) -> torch.Tensor:
        generator = torch.Generator(device=CUDA).manual_seed(seed)
        return objective.sample(model, request, generator).cpu()

    samples = draw(0)
    assert samples.shape == (4, 64)
    assert torch.isin(samples, torch.tensor(DNA.sample_ids)).all()
    assert (samples[:, :8] == template[:8]).all()
    assert torch.equal(draw(0), samples)  # seeded on the GPU: reproducible

    # the network call the samplers make agrees with the CPU's
    x_t = samples.clone()
    x_t[:, 32:] = DNA.mask_id
    t = torch.full((4,), 0.5)
    with torch.no_grad():
        log_p = objective.x0_log_probs(cpu_model, x_t, t)
        log_p_k = objective.x0_log_probs(model, x_t.to(CUDA), t.to(CUDA))
    torch.testing.assert_close(log_p_k.cpu(), log_p, **MODEL_TOL)


def test_ar_mamba_sampling_on_the_gpu():
    torch.manual_seed(0)
    model = MambaLM(**SMALL).eval().to(CUDA)
    request = SampleRequest(4, 64)
    generator = torch.Generator(device=CUDA).manual_seed(0)
    samples = ar().sample(model, request, generator).cpu()
    assert samples.shape == (4, 64)
    assert torch.isin(samples, torch.tensor(DNA.sample_ids)).all()


@pytest.mark.parametrize("rcps", [False, True], ids=["ph", "ps"])
def test_label_and_time_conditioned_caduceus_on_the_gpu(rcps):
    """The conditioning UDLM and guidance use (a label and sigma at every position) through the
    fused kernels: GPU logits equal the CPU's, and they do depend on the label and on sigma."""
    torch.manual_seed(0)
    cpu_model = Caduceus(**SMALL, **(PS if rcps else {}), num_classes=3, time_conditioning=True)
    backbone = cpu_model.backbone
    with torch.no_grad():  # both start at zero (an unconditional function): move them off it
        for p in [*backbone.label_embedding.parameters(), *backbone.sigma_embedding.parameters()]:
            p.add_(randn(*p.shape, seed=p.numel(), scale=0.5))
    cpu_model.eval()
    gpu_model = copy.deepcopy(cpu_model).to(CUDA)
    ids = torch.randint(7, 11, (4, 128), generator=torch.Generator().manual_seed(1))
    labels, sigma = torch.tensor([0, 1, 2, 3]), torch.tensor([0.1, 0.5, 1.0, 3.0])  # 3 = null
    with torch.no_grad():
        logits = cpu_model(ids, sigma=sigma, labels=labels)
        logits_k = gpu_model(ids.to(CUDA), sigma=sigma.to(CUDA), labels=labels.to(CUDA))
        other_label = gpu_model(ids.to(CUDA), sigma=sigma.to(CUDA), labels=labels.flip(0).to(CUDA))
        other_sigma = gpu_model(ids.to(CUDA), sigma=sigma.flip(0).to(CUDA), labels=labels.to(CUDA))
    torch.testing.assert_close(logits_k.cpu(), logits, **MODEL_TOL)
    assert (other_label - logits_k).abs().max() > 1e-2
    assert (other_sigma - logits_k).abs().max() > 1e-2


GUIDED = [(s, "mdlm") for s in MASKED_SAMPLERS] + [(s, "udlm") for s in UNIFORM_SAMPLERS]


@pytest.mark.parametrize(("sampler", "objective_name"), GUIDED)
def test_guided_samplers_on_the_gpu(sampler, objective_name):
    """D-CFG at gamma 2 (two network calls a step, ramp schedule) on a conditional model whose
    label really matters: every sample on the alphabet, the given prefix kept, seeded draws
    reproducible on the GPU, and the label changes what is drawn."""
    torch.manual_seed(0)
    udlm_run = objective_name == "udlm"
    # UDLM needs the noise level; MDLM runs without it (the cached sampler requires that)
    model = Caduceus(
        d_model=32, n_layer=2, vocab_size=12, num_classes=2, time_conditioning=udlm_run
    )
    with torch.no_grad():
        model.backbone.label_embedding.embedding.weight.normal_(0, 2.0)
    model = model.eval().to(CUDA)
    objective = UDLM(sample_ids=DNA.sample_ids) if udlm_run else mdlm(sample_ids=DNA.sample_ids)
    template = torch.full((64,), DNA.mask_id)
    template[:8] = torch.tensor([7, 8, 9, 10] * 2)
    given = torch.zeros(64, dtype=torch.bool)
    given[:8] = True

    def draw(label: int, seed: int) -> torch.Tensor:
        request = guided.request(
            8, 64, steps=32, sampler=sampler, template=template, given=given, block=32,
            stride=16, label=label, guidance=2.0, guidance_schedule="ramp",
        )  # fmt: skip
        generator = torch.Generator(device=CUDA).manual_seed(seed)
        return objective.sample(model, request, generator).cpu()

    samples = draw(0, seed=0)
    assert samples.shape == (8, 64)
    assert torch.isin(samples, torch.tensor(DNA.sample_ids)).all()  # no mask left, no specials
    assert (samples[:, :8] == template[:8]).all()
    assert torch.equal(draw(0, seed=0), samples)
    assert not torch.equal(draw(1, seed=0), samples)

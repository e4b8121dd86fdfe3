"""The inference path (``genodiff.ops.inference``) against the training path it replaces when
no gradient is needed: the forward-only selective scan, the one-pass mixer of both BiMamba
directions, the batched RCPS strands, and the samplers on top of them."""

import contextlib
import gc
import importlib
import weakref

import numba
import numpy as np
import pytest
import torch

from genodiff.backbones.caduceus import BiMamba, Caduceus
from genodiff.backbones.mamba import Mamba
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.backbones.rcps import rc_ids
from genodiff.generate import draw_batches
from genodiff.ops import (
    _scan_cpu,
    _scan_torch,
    inference,
    selective_scan,
    training_path,
    upstream_kernels_on_cpu,
)
from genodiff.samplers.categorical import sample_categorical, sharpen
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.score_entropy import landing, transition_probs
from genodiff.samplers.time_grid import time_grid
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import mdlm, sedd
from tests.test_selective_scan import make_inputs

scan_module = importlib.import_module("genodiff.ops.selective_scan")
mamba_module = importlib.import_module("genodiff.backbones.mamba")
generate_module = importlib.import_module("genodiff.generate")
CMAP = torch.tensor(DNATokenizer().complement_map)  # (16,)
TOL = {"rtol": 1e-10, "atol": 1e-10}  # float64 throughout


@pytest.fixture(params=["numba", "torch"])
def backend(request, monkeypatch):
    """Run the kernels of one CPU backend; the other one raises if it is reached."""

    def forbidden(*args):
        raise AssertionError("wrong backend")

    other = _scan_torch if request.param == "numba" else _scan_cpu
    if request.param == "numba":
        monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
    else:
        monkeypatch.setenv("GENODIFF_DISABLE_NUMBA", "1")
    for name in ("forward", "mixer_conv", "mixer_scan"):
        monkeypatch.setattr(other, name, forbidden)
    return request.param


@pytest.fixture
def separate_passes(monkeypatch):
    """Counts the calls of the training path's per-direction mixer (``Mamba.mix``)."""
    calls = []
    mix = Mamba.mix

    def counted(self, *args):
        calls.append(self)
        return mix(self, *args)

    monkeypatch.setattr(Mamba, "mix", counted)
    return calls


def perturbed(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """``module`` in float64 with every weight moved off its init (non-trivial conv biases,
    D, dt biases, norms), so that no term of the comparison vanishes."""
    module = module.double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def both_paths(module: torch.nn.Module, *args) -> tuple[torch.Tensor, torch.Tensor]:
    """(inference path, training path) outputs of ``module(*args)`` under no_grad."""
    with torch.no_grad():
        new = module(*args)
        with training_path():
            old = module(*args)
    return new, old


# the selective scan ---------------------------------------------------------------------------


@pytest.fixture
def autograd_entries(monkeypatch):
    """Counts the entries into the training path's autograd function."""
    calls = []
    forward = scan_module._SelectiveScan.forward

    def counted(ctx, *args):
        calls.append(1)
        return forward(ctx, *args)

    monkeypatch.setattr(scan_module._SelectiveScan, "forward", staticmethod(counted))
    return calls


def saved_tensors(fn) -> tuple[object, int]:
    """(fn(), the number of tensors autograd saved for a backward while it ran)."""
    saved = []

    def pack(tensor):
        saved.append(tensor.shape)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        return fn(), len(saved)


@pytest.mark.parametrize("grad_mode", ["no_grad", "inputs_without_grad"])
def test_scan_without_grad_is_the_forward_kernel_alone(backend, grad_mode, autograd_entries):
    inputs = make_inputs(37, "g2", "var")  # (B, D, L) = (2, 4, 37), every input requires grad
    if grad_mode == "inputs_without_grad":
        inputs = {k: v.detach() if v is not None else None for k, v in inputs.items()}
    with torch.no_grad() if grad_mode == "no_grad" else torch.enable_grad():
        (out, last), n_saved = saved_tensors(
            lambda: selective_scan(**inputs, delta_softplus=True, return_last_state=True)
        )
    assert not autograd_entries and n_saved == 0 and out.grad_fn is None
    with training_path():
        out_ref, last_ref = selective_scan(**inputs, delta_softplus=True, return_last_state=True)
    assert autograd_entries  # the training path went through the autograd function
    assert torch.equal(out, out_ref) and torch.equal(last, last_ref)  # the same kernel


def test_scan_with_grad_keeps_the_training_path(autograd_entries):
    inputs = make_inputs(7)
    out, n_saved = saved_tensors(lambda: selective_scan(**inputs, delta_softplus=True))
    assert autograd_entries and n_saved > 0 and out.grad_fn is not None


# the one-pass mixer ---------------------------------------------------------------------------


def _apply_decay(x: np.ndarray) -> np.ndarray:
    """The inference scan's ``_decay`` (2^x for x <= 0) on every element of ``x``."""

    @numba.njit
    def apply(x, constants, out):
        k = _scan_cpu._decay_tuple(constants)
        for i in range(x.shape[0]):
            out[i] = _scan_cpu._decay(x[i], k)

    out = np.empty_like(x)
    apply(x, _scan_cpu._DECAY_CONSTANTS[x.dtype], out)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decay_is_exp2_within_two_ulp(dtype):
    """The mixer scan's decay factor 2^x (x = dt A log2 e <= 0) against float64 / long-double
    numpy: within 2 eps relative down to the smallest normal exponent, that power of 2 (never
    a denormal, never 0) below it, exactly 1 at 0, NaN for NaN."""
    info = np.finfo(dtype)
    lo = float(info.minexp)  # -126 / -1022
    x = np.concatenate([-np.geomspace(1e-30, -lo, 200_001), -np.linspace(0, -lo, 200_001)])
    x = x.astype(dtype)
    got = _apply_decay(x)
    want = np.exp2(x.astype(np.longdouble))
    rel = np.abs(got.astype(np.longdouble) - want) / want
    assert got.dtype == dtype and rel.max() <= 2 * info.eps, rel.max() / info.eps
    assert _apply_decay(np.zeros(1, dtype))[0] == 1.0
    below = _apply_decay(np.array([lo - 0.5, 2 * lo, -np.inf], dtype))
    np.testing.assert_array_equal(below, np.full(3, 2.0**lo, dtype))
    assert np.isnan(_apply_decay(np.array([np.nan], dtype))[0])


def test_mixer_scan_with_large_decays_matches_the_training_path():
    """Steps where exp(dt A) underflows (dt A < -87 in float32): the decay's floor at the
    smallest normal power of 2 leaves the states and outputs as the exact exponential does."""
    torch.manual_seed(0)
    S, B, L, D, N, R = 2, 2, 9, 4, 3, 2
    u, x_dbl = torch.randn(S, B, L, D), torch.randn(S, B, L, R + 2 * N)
    xz = torch.randn(B, L, 1, 2 * D)
    A = -torch.tensor([1.0, 50.0, 500.0]).repeat(S, D, 1)  # (S, D, N)
    bias = torch.full((S, D), 3.0)  # dt ~ softplus(3 + noise) ~ 3: dt A down to ~ -1500
    args = (u, x_dbl, torch.randn(S, D, R) * 0.1, A, torch.ones(S, D), xz, bias, True)
    got = _scan_cpu.mixer_scan(*args, torch.empty(B, L, 1, D))
    want = _scan_torch.mixer_scan(*args, torch.empty(B, L, 1, D))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


MIXERS = {  # BiMamba / Mamba keyword arguments (d_model 6: d_inner 12, dt_rank 1, N 3)
    "tied-add": {},
    "tied-ew_multiply": {"bidirectional_strategy": "ew_multiply"},
    "untied-add": {"bidirectional_weight_tie": False},
    "untied-ew_multiply": {
        "bidirectional_weight_tie": False,
        "bidirectional_strategy": "ew_multiply",
    },
    "projection-biases": {"bias": True, "conv_bias": False},
    "untied-biases": {"bidirectional_weight_tie": False, "bias": True},
    "wide-conv": {"d_conv": 6},
    "conv-1": {"d_conv": 1},
    "one-direction": {"bidirectional": False},
}


@pytest.mark.parametrize("length", [1, 3, 29])
@pytest.mark.parametrize("name", MIXERS)
def test_bimamba_in_one_pass_equals_the_separate_directions(backend, name, length, separate_passes):
    torch.manual_seed(0)
    mixer = perturbed(BiMamba(6, d_state=3, **MIXERS[name]))
    hidden = torch.randn(3, length, 6, dtype=torch.float64)
    new, old = both_paths(mixer, hidden)
    assert len(separate_passes) == (1 if name == "one-direction" else 2)  # training path only
    torch.testing.assert_close(new, old, **TOL)


def test_mamba_in_one_pass_equals_its_training_path(backend, separate_passes):
    torch.manual_seed(0)
    mixer = perturbed(Mamba(8, d_state=4, bias=True))
    hidden = torch.randn(2, 33, 8, dtype=torch.float64)
    new, old = both_paths(mixer, hidden)
    assert len(separate_passes) == 1
    torch.testing.assert_close(new, old, **TOL)


@pytest.mark.parametrize("batch, threads", [(1, 7), (3, 2), (2, 64)])
def test_scan_channel_chunks_cover_every_channel(monkeypatch, batch, threads):
    """More threads than batch rows: each row's channels split into (uneven) chunks, the last
    ones possibly empty (10 channels in 7 chunks of 2). Run on one real thread too, where an
    error inside a work item surfaces (in a parallel region numba may lose it)."""
    monkeypatch.delenv("GENODIFF_DISABLE_NUMBA", raising=False)
    monkeypatch.setattr(_scan_cpu.numba, "get_num_threads", lambda: threads)
    torch.manual_seed(0)
    mixer = perturbed(BiMamba(5, d_state=3, expand=2))  # d_inner 10
    hidden = torch.randn(batch, 17, 5, dtype=torch.float64)
    before = torch.get_num_threads()
    try:
        for real_threads in (before, 1):
            torch.set_num_threads(real_threads)  # the scan's pool follows torch's
            new, old = both_paths(mixer, hidden)
            torch.testing.assert_close(new, old, **TOL)
    finally:
        torch.set_num_threads(before)


def test_float32_mixer_within_rounding():
    torch.manual_seed(0)
    mixer = perturbed(BiMamba(16)).float()
    new, old = both_paths(mixer, torch.randn(2, 64, 16))
    torch.testing.assert_close(new, old, rtol=1e-5, atol=1e-5)


def test_grad_autocast_bf16_and_upstream_keep_the_training_path(separate_passes, upstream_fakes):
    torch.manual_seed(0)
    mixer = BiMamba(8)
    hidden = torch.randn(2, 12, 8)
    mixer(hidden).sum().backward()  # weights require grad: the training path
    assert len(separate_passes) == 2
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        mixer(hidden)
    with torch.no_grad():
        mixer.to(torch.bfloat16)(hidden.bfloat16())
        mixer.float()
        with upstream_kernels_on_cpu():
            mixer(hidden)
    assert len(separate_passes) == 8
    assert sum(upstream_fakes.values()) > 0


# whole models ---------------------------------------------------------------------------------

MODELS = {
    "ph": lambda: Caduceus(d_model=8, n_layer=2, vocab_size=12),
    "ph-untied-ew": lambda: Caduceus(
        d_model=8,
        n_layer=2,
        vocab_size=12,
        bidirectional_weight_tie=False,
        bidirectional_strategy="ew_multiply",
    ),
    "ps-fused": lambda: Caduceus(
        d_model=8, n_layer=2, vocab_size=12, rcps=True, complement_map=CMAP.tolist()
    ),
    "ps-unfused": lambda: Caduceus(
        d_model=8,
        n_layer=2,
        vocab_size=12,
        rcps=True,
        complement_map=CMAP.tolist(),
        fused_add_norm=False,
    ),
    "mamba-lm": lambda: MambaLM(d_model=8, n_layer=2, vocab_size=12),
}


def ids(length=24, batch=3, seed=1):
    return torch.randint(0, 12, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", MODELS)
def test_model_logits_equal_the_training_path(backend, name, separate_passes):
    torch.manual_seed(0)
    model = perturbed(MODELS[name]())
    new, old = both_paths(model, ids())
    assert separate_passes  # the training path ran the directions one by one
    torch.testing.assert_close(new, old, **TOL)


@pytest.mark.parametrize("name", ["ps-fused", "ps-unfused"])
def test_ps_stays_rc_equivariant_on_the_inference_path(name):
    torch.manual_seed(0)
    model = perturbed(MODELS[name]())
    x = ids()
    with torch.no_grad():
        logits, logits_rc = model(x), model(rc_ids(x, CMAP))
        hidden, hidden_rc = model.hidden_states(x), model.hidden_states(rc_ids(x, CMAP))
    torch.testing.assert_close(logits_rc, logits.flip(1)[..., CMAP], **TOL)
    torch.testing.assert_close(hidden_rc, hidden.flip(-2, -1), **TOL)


@pytest.fixture
def backbone_batches(monkeypatch):
    """Row counts of every call of a model's inner ``backbone`` (ids or embeddings -> states),
    with CPU chunks of 64 elements (rows x length x hidden width)."""
    monkeypatch.setattr(inference, "CPU_CHUNK_ELEMENTS", 64)
    rows = []

    def watch(model):
        model.backbone.register_forward_hook(lambda module, args, out: rows.append(len(out)))
        return model

    return watch, rows


@pytest.mark.parametrize("name", MODELS)
def test_cpu_inference_runs_in_row_chunks_with_the_same_result(name, backbone_batches):
    """7 rows x length 4 x hidden 8 (PS 16): chunks of 64 // 32 = 2 rows (PS: 1 row), every
    row's logits and hidden states those of the whole batch on the training path."""
    watch, rows = backbone_batches
    torch.manual_seed(0)
    model = watch(perturbed(MODELS[name]()))
    x = ids(length=4, batch=7)
    new, old = both_paths(model, x)
    torch.testing.assert_close(new, old, **TOL)
    chunk = 64 // (4 * model.capabilities.hidden_size) or 1
    assert rows == [chunk] * (7 // chunk) + ([7 % chunk] if 7 % chunk else []) + [7]


def test_row_chunks_of_embeddings(backbone_batches):
    """inputs_embeds (Plaid) split like ids."""
    watch, rows = backbone_batches
    model = watch(perturbed(MODELS["ph"]()))
    embeds = torch.randn(5, 4, 8, dtype=torch.float64)
    new, old = both_paths(model, None, None, embeds)
    torch.testing.assert_close(new, old, **TOL)
    assert rows == [2, 2, 1, 5]


def test_no_row_chunks_with_grad(backbone_batches):
    watch, rows = backbone_batches
    model = watch(MODELS["ph"]())
    model(ids(length=4, batch=5)).sum().backward()
    assert rows == [5]


def test_chunk_rows_rule():
    """max(1, 2^19 // (L x hidden)) rows, never more than the batch: 16 x 1,024 bp at
    d_model 64 runs in 8-row chunks, a 128k-bp sequence alone."""
    model = MODELS["ph"]()
    with torch.no_grad():
        for (batch, length, hidden), want in {
            (16, 1024, 64): 8,
            (16, 1024, 118): 4,
            (3, 1024, 64): 3,
            (2, 2**17, 64): 1,
        }.items():
            x = torch.zeros(batch, length, dtype=torch.long)
            assert inference.cpu_chunk_rows(x, hidden, model) == want
        assert inference.cpu_chunk_rows(x, None, model) == 2  # width not declared: no chunks


# reused buffers -------------------------------------------------------------------------------


@pytest.fixture
def scratch_pointers(monkeypatch):
    """The data pointers ``scratch`` hands out, per buffer name, in call order."""
    pointers: dict[str, list[int]] = {}
    scratch = inference.scratch

    def watched(name, *args):
        tensor = scratch(name, *args)
        pointers.setdefault(name, []).append(tensor.data_ptr())
        return tensor

    monkeypatch.setattr(mamba_module, "scratch", watched)
    return pointers


@pytest.mark.parametrize("name", [name for name in MODELS if name != "mamba-lm"])
def test_reused_buffers_serve_every_chunk_and_layer_with_unchanged_results(
    name, backend, monkeypatch, scratch_pointers
):
    """7 rows in chunks of 2 (PS: 1) through 2 layers inside ``reused_buffers``: each of the
    mixers' temporaries is one buffer for all of them, and every row's logits are the bits of
    the same calls with fresh temporaries (and the training path's, to rounding). A chunk
    that left its result in a buffer would see it overwritten by the next chunk's."""
    monkeypatch.setattr(inference, "CPU_CHUNK_ELEMENTS", 64)
    torch.manual_seed(0)
    model = perturbed(MODELS[name]())
    x = ids(length=4, batch=7)
    fresh, old = both_paths(model, x)  # temporaries allocated afresh
    scratch_pointers.clear()
    with torch.no_grad(), inference.reused_buffers():
        reused = model(x)
        again = model(x)
    assert torch.equal(reused, fresh) and torch.equal(again, fresh)
    torch.testing.assert_close(reused, old, **TOL)
    assert set(scratch_pointers) == {"xz", "u", "x_dbl", "y"}
    for pointers in scratch_pointers.values():
        chunks = 7 // 2 + 1 if name.startswith("ph") else 7  # chunks of 2 rows, PS: 1 row
        assert len(pointers) == 2 * chunks * 2  # 2 calls x chunks x 2 layers
        assert len(set(pointers)) == 1


def test_scratch_is_fresh_outside_reused_buffers_and_released_at_its_end():
    like = torch.zeros(1, dtype=torch.float64)
    a, b = inference.scratch("t", like, 2, 3), inference.scratch("t", like, 2, 3)
    assert a.data_ptr() != b.data_ptr()
    with inference.reused_buffers():
        first = inference.scratch("t", like, 4, 3)
        assert (first.shape, first.dtype) == ((4, 3), torch.float64)
        smaller = inference.scratch("t", like, 2, 5)
        assert smaller.data_ptr() == first.data_ptr() and smaller.shape == (2, 5)
        assert inference.scratch("other", like, 2).data_ptr() != first.data_ptr()
        held = weakref.ref(first._base)
        del first, smaller
        gc.collect()
        assert held() is not None  # kept by the context
        larger = inference.scratch("t", like, 5, 3)
        assert larger.numel() == 15 and held() is None  # replaced, the old one freed
        assert inference.scratch("t", like.float(), 3).dtype == torch.float32
        with inference.reused_buffers():  # an inner context keeps its own
            assert inference.scratch("t", like, 2).data_ptr() != larger.data_ptr()
        held = weakref.ref(larger._base)
        del larger
    gc.collect()
    assert held() is None


def test_mixer_kernels_refuse_an_out_that_does_not_fit(backend):
    xz, weight, bias = torch.randn(2, 5, 1, 8), torch.randn(2, 4, 3), torch.randn(2, 4)
    u = torch.empty(2, 2, 5, 4)
    assert scan_module.mixer_conv(xz, weight, bias, out=u) is u
    with pytest.raises(ValueError, match=r"shape \(2, 2, 5, 4\)"):
        scan_module.mixer_conv(xz, weight, bias, out=torch.empty(2, 2, 5, 5))
    with pytest.raises(ValueError, match="float32 tensor"):
        scan_module.mixer_conv(xz, weight, bias, out=u.double())
    with pytest.raises(ValueError, match="contiguous"):
        scan_module.mixer_conv(xz, weight, bias, out=torch.empty(2, 2, 4, 5).mT)


# samplers -------------------------------------------------------------------------------------


def dna_model() -> torch.nn.Module:
    """A float64 Caduceus with peaked predictions, so that every draw matters."""
    torch.manual_seed(0)
    model = Caduceus(
        d_model=8, n_layer=2, vocab_size=12, initializer_cfg={"initializer_range": 0.5}
    )
    return perturbed(model).eval()


REQUESTS = {
    "ancestral": {"steps": 16},
    "cached": {"steps": 64},
    "first-hitting": {},
    "semi-ar": {"steps": 8, "block": 12, "stride": 6},
}


@pytest.mark.parametrize("sampler", REQUESTS)
def test_samplers_draw_the_same_samples_on_both_paths(sampler):
    model, objective = dna_model(), mdlm()
    request = SampleRequest(3, 20, sampler=sampler, temperature=0.9, **REQUESTS[sampler])

    def draw():
        return objective.sample(model, request, torch.Generator().manual_seed(3))

    new = draw()
    with training_path():
        old = draw()
    assert (new != objective.process.mask_id).all()
    assert torch.equal(new, old)


def test_sampling_steps_reuse_one_set_of_buffers_and_draw_the_same(monkeypatch, scratch_pointers):
    """``draw_batches`` runs each batch's sampler inside ``reused_buffers``: every network call
    of its steps writes the same buffers, and the samples are those drawn with fresh
    temporaries."""
    model, objective = dna_model(), mdlm()
    request = SampleRequest(5, 20, sampler="ancestral", steps=8, temperature=0.9)

    def draw() -> torch.Tensor:
        return torch.cat([ids for _, ids in draw_batches(objective, model, request, 3, 5)])

    reused = draw()
    assert len(scratch_pointers["xz"]) == 8 * 2  # a network call per step, x 2 layers
    assert all(len(set(pointers)) == 1 for pointers in scratch_pointers.values())
    monkeypatch.setattr(generate_module, "reused_buffers", contextlib.nullcontext)
    assert torch.equal(reused, draw())


def sedd_sample_reference(objective, model, request, generator):
    """SEDD sampling as written before the inference path: float64 probabilities and a draw
    at every (n, L) position, the masked ones kept."""
    rule = objective.sampler_name(request)
    process = objective.process
    n = request.num_samples
    x, given = request.canvas(objective.process.mask_id, torch.device("cpu"))
    for t, s in time_grid(1.0, objective.process.sampling_eps, request.steps):
        masked = (x == objective.process.mask_id) & ~given
        if not masked.any():
            break
        log_score = objective.log_score(model, x, t.expand(n).float())  # (n, L, V)
        probs = transition_probs(process, log_score, t, s, rule, request)  # (n, L, V)
        x = torch.where(masked, sample_categorical(probs, generator), x)
    masked = (x == objective.process.mask_id) & ~given
    if masked.any():
        log_score = objective.log_score(model, x, torch.full((n,), objective.process.sampling_eps))
        probs = sharpen(landing(process, log_score), request.temperature, request.top_p)
        x = torch.where(masked, sample_categorical(probs, generator), x)
    return x


@pytest.mark.parametrize("rule, steps, options", [
    ("analytic", 12, {}),
    ("euler", 5, {"temperature": 0.7, "top_p": 0.9}),  # few steps: the denoiser draws too
])  # fmt: skip
def test_sedd_draws_only_masked_rows_with_the_same_samples(rule, steps, options):
    model, objective = dna_model(), sedd()
    template = torch.tensor([DNATokenizer().base_ids[0]] * 4 + [objective.process.mask_id] * 16)
    given = torch.arange(20) < 4
    request = SampleRequest(
        4, 20, steps=steps, sampler=rule, template=template, given=given, **options
    )
    with torch.no_grad():
        new = objective.sample(model, request, torch.Generator().manual_seed(5))
        old = sedd_sample_reference(objective, model, request, torch.Generator().manual_seed(5))
    assert (new != objective.process.mask_id).all()
    assert torch.equal(new, old)

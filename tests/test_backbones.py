"""Mamba mixer, Caduceus-Ph backbone and the small ops they use (causal conv, RMSNorm)."""

import math

import pytest
import torch
import torch.nn.functional as F

from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.mamba import Mamba
from genodiff.ops import RMSNorm, add_norm, causal_conv1d, rms_norm, selective_scan
from genodiff.registry import get
from genodiff.tokenizers import DNATokenizer


def small(**kwargs):
    torch.manual_seed(0)
    return Caduceus(**{"d_model": 16, "n_layer": 2, "vocab_size": 12, **kwargs})


def ids(L=40, batch=2, seed=1):
    return torch.randint(7, 12, (batch, L), generator=torch.Generator().manual_seed(seed))


# ops --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", [None, "silu"])
def test_causal_conv1d_matches_padded_conv(activation):
    conv = torch.nn.Conv1d(6, 6, 4, groups=6, padding=3)
    x = torch.randn(2, 6, 9)
    expected = conv(x)[..., :9]
    expected = F.silu(expected) if activation else expected
    out = causal_conv1d(x, conv.weight.squeeze(1), conv.bias, activation=activation)
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError):
        causal_conv1d(x, conv.weight.squeeze(1), activation="relu")


def test_rms_norm_and_add_norm():
    x = torch.randn(3, 5, 8)
    weight = torch.rand(8)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight
    torch.testing.assert_close(rms_norm(x, weight), expected)

    norm = RMSNorm(8)
    h = torch.randn(3, 5, 8, dtype=torch.bfloat16)
    normed, residual = add_norm(h, None, norm, residual_in_fp32=True)
    assert residual.dtype == torch.float32 and normed.dtype == torch.float32
    torch.testing.assert_close(residual, h.float())
    normed2, residual2 = add_norm(h, residual, norm, residual_in_fp32=False)
    torch.testing.assert_close(residual2, 2 * h.float())
    torch.testing.assert_close(normed2, norm(2 * h.float()))


# Mamba mixer ------------------------------------------------------------------------------------


def test_mamba_names_shapes_and_init():
    torch.manual_seed(0)
    m = Mamba(40)  # d_inner 80, dt_rank 3, N 16
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {
        "in_proj.weight": (160, 40),
        "conv1d.weight": (80, 1, 4),
        "conv1d.bias": (80,),
        "x_proj.weight": (3 + 32, 80),
        "dt_proj.weight": (80, 3),
        "dt_proj.bias": (80,),
        "A_log": (80, 16),
        "D": (80,),
        "out_proj.weight": (40, 80),
    }
    torch.testing.assert_close(m.A_log.exp(), torch.arange(1, 17.0).repeat(80, 1))
    assert torch.equal(m.D, torch.ones(80))
    assert m.dt_proj.weight.abs().max() <= 3**-0.5
    dt = F.softplus(m.dt_proj.bias)
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 0.1 * 1.001


def test_mamba_forward_matches_unfused_path_and_is_causal():
    torch.manual_seed(0)
    m = Mamba(16)
    h = torch.randn(2, 12, 16)
    out = m(h)
    # mamba_simple's path without kernels, written out
    x, z = m.in_proj(h).transpose(1, 2).chunk(2, dim=1)
    x = F.silu(m.conv1d(x)[..., :12])
    dt, B, C = m.x_proj(x.transpose(1, 2)).split([1, 16, 16], dim=-1)
    dt = F.linear(dt, m.dt_proj.weight, m.dt_proj.bias).transpose(1, 2)
    A = -torch.exp(m.A_log)
    y = selective_scan(x, dt, A, B.mT, C.mT, m.D, z=z, delta_softplus=True)
    torch.testing.assert_close(out, m.out_proj(y.transpose(1, 2)))

    h2 = h.clone()
    h2[:, 7] += 1.0
    out2 = m(h2)
    torch.testing.assert_close(out2[:, :7], out[:, :7], rtol=0, atol=0)
    assert not torch.allclose(out2[:, 7:], out[:, 7:])


# Caduceus ---------------------------------------------------------------------------------------


def test_registered_and_ph_only():
    assert get("backbone", "caduceus") is Caduceus
    # PS is supported now: tests/test_caduceus_ps.py
    assert small(rcps=True, complement_map=DNATokenizer().complement_map).rcps


def test_parameter_count_matches_paper_model():
    model = Caduceus(d_model=118, n_layer=4, vocab_size=12)
    assert model.vocab_size == 16
    assert sum(p.numel() for p in model.parameters()) == 470_702


def test_shapes_and_tied_head():
    model = small()
    x = ids()
    logits = model(x, sigma=torch.rand(2))
    hidden = model.hidden_states(x)
    assert logits.shape == (2, 40, 16) and logits.dtype == torch.float32
    assert hidden.shape == (2, 40, 16)
    embedding = model.backbone.embeddings.word_embeddings.weight
    torch.testing.assert_close(logits, hidden @ embedding.T)
    torch.testing.assert_close(model(x), logits)  # sigma is ignored
    embeds = model.backbone.embeddings(x)
    torch.testing.assert_close(model(None, inputs_embeds=embeds), logits)


def test_state_dict_keys_match_hf_layout():
    model = small(n_layer=2)
    fwd = ["A_log", "D", "conv1d.weight", "conv1d.bias", "dt_proj.weight", "dt_proj.bias"]
    fwd += ["in_proj.weight", "out_proj.weight", "x_proj.weight"]
    rev = ["A_log", "D", "conv1d.weight", "conv1d.bias", "dt_proj.weight", "dt_proj.bias"]
    rev += ["x_proj.weight"]
    expected = {"backbone.embeddings.word_embeddings.weight", "backbone.norm_f.weight"}
    for i in range(2):
        expected.add(f"backbone.layers.{i}.norm.weight")
        expected |= {f"backbone.layers.{i}.mixer.mamba_fwd.{k}" for k in fwd}
        expected |= {f"backbone.layers.{i}.mixer.mamba_rev.{k}" for k in rev}
    assert set(model.state_dict()) == expected


def test_weight_tie_shares_projections():
    tied, untied = small(), small(bidirectional_weight_tie=False)
    n_tied = sum(p.numel() for p in tied.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    mixer = tied.backbone.layers[0].mixer
    assert n_untied - n_tied == 2 * (mixer.mamba_fwd.in_proj.weight.numel() + 16 * 32)
    # the reverse direction reads mamba_fwd.in_proj: changing it moves the reverse output
    with torch.no_grad():
        mixer.mamba_fwd.D.zero_()
        mixer.mamba_fwd.x_proj.weight.zero_()  # B = C = 0: the forward direction outputs 0
    h = torch.randn(1, 10, 16)
    before = mixer(h)
    assert before.abs().max() > 0
    with torch.no_grad():
        mixer.mamba_fwd.in_proj.weight.mul_(2.0)
    assert not torch.allclose(mixer(h), before)
    loss = tied(ids()).logsumexp(-1).sum()
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in tied.parameters())


def test_bidirectional_context():
    x = ids()
    x2 = x.clone()
    x2[:, 30] = 7 if x[0, 30] != 7 else 8
    bi = small()
    assert not torch.allclose(bi(x2)[:, :30], bi(x)[:, :30])  # sees tokens after t
    uni = small(bidirectional=False)
    out, out2 = uni(x), uni(x2)
    torch.testing.assert_close(out2[:, :30], out[:, :30], rtol=0, atol=0)
    assert not torch.allclose(out2[:, 30:], out[:, 30:])


@pytest.mark.parametrize("strategy", ["add", "ew_multiply"])
def test_flip_equivariant_when_directions_share_weights(strategy):
    model = small(bidirectional_strategy=strategy)
    with torch.no_grad():
        for layer in model.backbone.layers:
            fwd, rev = layer.mixer.mamba_fwd, layer.mixer.mamba_rev
            for name in ("A_log", "D", "conv1d.weight", "conv1d.bias", "x_proj.weight"):
                rev.get_parameter(name).copy_(fwd.get_parameter(name))
            rev.dt_proj.load_state_dict(fwd.dt_proj.state_dict())
    x = ids()
    torch.testing.assert_close(model(x.flip(1)), model(x).flip(1), rtol=1e-4, atol=1e-5)


def test_init_follows_reference():
    model = Caduceus(
        d_model=64, n_layer=4, vocab_size=12, initializer_cfg={"initializer_range": 0.05}
    )
    assert abs(model.backbone.embeddings.word_embeddings.weight.std().item() - 0.05) < 0.015
    mamba = model.backbone.layers[0].mixer.mamba_fwd
    bound = 1 / math.sqrt(mamba.d_inner) / math.sqrt(4)  # kaiming_uniform(a=sqrt 5) / sqrt(n_layer)
    assert mamba.out_proj.weight.abs().max() <= bound
    assert mamba.out_proj.weight.abs().max() > 0.9 * bound
    assert F.softplus(mamba.dt_proj.bias).min() >= 0.999e-3  # dt bias is not zeroed


@pytest.mark.parametrize("bias", [False, True])
def test_the_unfused_mixer_copies_no_channels_by_length_tensor(monkeypatch, bias):
    # On CUDA without causal-conv1d, Mamba.mix runs ``ssm`` around mamba-ssm's scan, whose
    # wrapper copies every input whose last stride is not 1; a matmul that folds a transposed
    # operand copies it too. Each copy of a (B, d_inner, L) tensor costs the memory traffic of
    # a kernel (BENCHMARKS.md, "GPU sampler"). With the conv and the scan replaced by stand-ins
    # that record their inputs, nothing else in the mixer may copy a tensor that large.
    from torch.utils._python_dispatch import TorchDispatchMode

    import genodiff.backbones.mamba as mamba_module

    batch, length, mixer = 3, 64, Mamba(16, d_state=4, bias=bias)
    big = batch * mixer.d_inner * length
    scanned = {}

    def conv(x, weight, bias, activation):
        return torch.empty(x.shape)  # (B, d_inner, L), contiguous, as the conv kernel's output

    def scan(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
        scanned.update(u=u, delta=delta, B=B, C=C, z=z)
        return torch.ones(u.shape)  # (B, d_inner, L)

    class BigCopies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            copying = func._schema.name in ("aten::copy_", "aten::clone", "aten::_to_copy")
            if copying and out.numel() >= big:
                self.seen.append(func._schema.name)
            return out

    monkeypatch.setattr(mamba_module, "causal_conv1d", conv)
    monkeypatch.setattr(mamba_module, "selective_scan", scan)
    hidden = torch.randn(batch, length, 16)
    with torch.no_grad(), BigCopies() as copies:
        out = mixer.mix(mixer.in_proj_xz(hidden), mixer.out_proj)
    assert copies.seen == []
    assert all(t.stride(-1) == 1 for t in scanned.values())  # the scan's wrapper copies none
    assert scanned["delta"].shape == (batch, mixer.d_inner, length)
    assert scanned["B"].shape == scanned["C"].shape == (batch, 4, length)
    # y (all ones) through out_proj, read transposed: each output is the sum of out_proj's row
    expected = mixer.out_proj.weight.sum(-1).expand(batch, length, -1)
    if bias:
        expected = expected + mixer.out_proj.bias
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("name", ["caduceus", "mamba", "hyena"])
def test_a_backbone_built_under_a_device_has_every_tensor_there(name):
    """The constants a backbone computes on the CPU (``meta_build.computed_on_cpu``: A_log, the
    dt bias, Hyena's positions) are copied to the device it is built on, as its other weights."""
    from genodiff.backbones import build

    with torch.device("meta"):
        model = build(name=name, d_model=16, n_layer=1, vocab_size=16)
    devices = {t.device.type for t in [*model.parameters(), *model.buffers()]}
    assert devices == {"meta"}

"""HyenaDNA backbone: size, checkpoint names, causality, the FFT long convolution."""

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

import genodiff.backbones.hyena  # noqa: F401  (registers "hyena")
from genodiff.backbones.hyena import HyenaDNA, fftconv
from genodiff.registry import get

CONFIG = "configs/model/hyena.yaml"


def tiny_1k(**kwargs) -> HyenaDNA:
    cfg = OmegaConf.to_container(OmegaConf.load(CONFIG))
    cfg.pop("name")
    torch.manual_seed(0)
    return HyenaDNA(**{"vocab_size": 12, **cfg, **kwargs})  # the DNA tokenizer's 12 ids


def small(**kwargs) -> HyenaDNA:
    torch.manual_seed(0)
    layer = {"l_max": 64, "filter_order": 16}
    return HyenaDNA(d_model=16, n_layer=2, vocab_size=12, d_inner=32, layer=layer, **kwargs).eval()


def ids(L=40, batch=2, seed=1):
    return torch.randint(7, 12, (batch, L), generator=torch.Generator().manual_seed(seed))


def test_parameter_count_matches_paper():
    model = tiny_1k()
    # parameters() lists each tensor once: the shared Sin frequency and the tied head count once
    assert sum(p.numel() for p in model.parameters()) == 436_096
    assert model.vocab_size == 16


def test_state_dict_keys_match_checkpoint_names():
    keys = set(tiny_1k().state_dict())
    mixer = "backbone.layers.1.mixer."
    expected = {
        "backbone.embeddings.word_embeddings.weight",
        "backbone.ln_f.weight",
        "backbone.ln_f.bias",
        *(
            f"backbone.layers.1.{m}.{p}"
            for m in ("norm1", "norm2", "mlp.fc1", "mlp.fc2")
            for p in ("weight", "bias")
        ),
        *(
            f"{mixer}{m}.{p}"
            for m in ("in_proj", "out_proj", "short_filter")
            for p in ("weight", "bias")
        ),
        *(f"{mixer}filter_fn.{n}" for n in ("bias", "pos_emb.z", "pos_emb.t", "modulation.deltas")),
        *(f"{mixer}filter_fn.implicit_filter.{i}.weight" for i in (0, 2, 4, 6)),
        *(f"{mixer}filter_fn.implicit_filter.{i}.bias" for i in (0, 2, 4)),
        *(f"{mixer}filter_fn.implicit_filter.{i}.freq" for i in (1, 3, 5)),
    }
    assert expected <= keys
    assert len([k for k in keys if k.startswith("backbone.layers.1.")]) == len(
        [k for k in expected if k.startswith("backbone.layers.1.")]
    )
    assert not any("lm_head" in k for k in keys)


def test_buffers_and_shared_frequency():
    model = tiny_1k()
    filter_fn = model.backbone.layers[0].mixer.filter_fn
    buffers = dict(filter_fn.named_buffers())
    assert set(buffers) == {"pos_emb.z", "pos_emb.t", "modulation.deltas"}
    assert buffers["pos_emb.z"].shape == (1, 1026, 5)
    sins = [filter_fn.implicit_filter[i] for i in (1, 3, 5)]
    assert sins[0] is sins[1] is sins[2]
    freqs = [n for n, _ in filter_fn.named_parameters() if n.endswith("freq")]
    assert freqs == ["implicit_filter.1.freq"]
    assert torch.all(sins[0].freq == 10.0)
    # trainable positional features when lr_pos_emb != 0, as upstream
    trained = tiny_1k(layer={"l_max": 1026, "lr_pos_emb": 1e-5}).backbone.layers[0].mixer
    assert isinstance(trained.filter_fn.pos_emb.z, torch.nn.Parameter)


def test_checkpoint_with_freq_stored_once_loads():
    model = small()
    state = {k: v + 0.5 if k.endswith(".1.freq") else v for k, v in model.state_dict().items()}
    state = {k: v for k, v in state.items() if not k.endswith((".3.freq", ".5.freq"))}
    other = small()
    other.load_state_dict(state)
    torch.testing.assert_close(
        other.backbone.layers[0].mixer.filter_fn.implicit_filter[5].freq,
        model.backbone.layers[0].mixer.filter_fn.implicit_filter[1].freq + 0.5,
    )


@pytest.mark.parametrize(
    "dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12)], ids=["fp32", "fp64"]
)
def test_fftconv_equals_direct_causal_convolution(dtype, tolerance):
    """In float64 too (as upstream, which transforms in k's dtype), not rounded to float32."""
    torch.manual_seed(0)
    B, D, L = 2, 3, 17
    u, k, bias = (torch.randn(*shape, dtype=dtype) for shape in ((B, D, L), (D, L), (D,)))
    direct = torch.zeros(B, D, L, dtype=dtype)
    for t in range(L):
        for s in range(t + 1):
            direct[..., t] += k[:, s] * u[..., t - s]
    direct += bias[:, None] * u
    out = fftconv(u, k, bias)
    assert out.dtype == dtype
    torch.testing.assert_close(out, direct, rtol=10 * tolerance, atol=tolerance)


def test_operator_matches_explicit_formula():
    """x0 * (k * (x1 v) + bias * x1 v), with the short conv as a left-padded depthwise conv."""
    mixer = small().backbone.layers[0].mixer
    u = torch.randn(2, 20, 16)
    proj = F.pad(mixer.in_proj(u).transpose(1, 2), (2, 0))  # (B, 3d, L + 2)
    uc = F.conv1d(proj, mixer.short_filter.weight, mixer.short_filter.bias, groups=48)
    x0, x1, v = uc.split(16, dim=1)
    k = mixer.filter_fn.filter(20).T  # (d, L)
    x1v = x1 * v
    conv = torch.stack(
        [(k[:, : t + 1].flip(-1) * x1v[..., : t + 1]).sum(-1) for t in range(20)], dim=-1
    )
    y = x0 * (conv + mixer.filter_fn.bias[:, None] * x1v)
    torch.testing.assert_close(mixer(u), mixer.out_proj(y.transpose(1, 2)), rtol=1e-4, atol=1e-5)


def test_forward_contract_and_causality():
    model = small()
    x = ids()
    logits = model(x, sigma=torch.rand(2))
    assert logits.shape == (2, 40, 16) and logits.dtype == torch.float32
    assert model.hidden_states(x).shape == (2, 40, 16)
    changed = x.clone()
    changed[:, 25:] = 17 - changed[:, 25:]  # complement every base after position 24
    torch.testing.assert_close(model(changed)[:, :25], logits[:, :25])
    assert not torch.allclose(model(changed)[:, 25:], logits[:, 25:])
    embeds = model.backbone.embeddings(x)
    torch.testing.assert_close(model(None, inputs_embeds=embeds), logits)


def test_too_long_sequence_is_a_clear_error():
    with pytest.raises(ValueError, match="l_max=64"):
        small()(ids(L=65))


def test_gradients_flow_to_filter_and_registry():
    model = small()
    model(ids()).logsumexp(-1).mean().backward()
    filter_fn = model.backbone.layers[0].mixer.filter_fn
    assert filter_fn.implicit_filter[1].freq.grad is not None
    assert filter_fn.implicit_filter[0].weight.grad.abs().sum() > 0
    assert get("backbone", "hyena") is HyenaDNA


@pytest.mark.parametrize("lr", [None, 3e-4])
def test_an_exported_config_holds_the_filter_lr_only_when_it_is_set(tmp_path, lr):
    # Upstream's configs give layer.lr a number (its train.py puts it in an optimizer group);
    # unset here means the optimizer's, so config.json leaves it out rather than writing null,
    # and reads back as unset.
    import json

    from genodiff.backbones import build
    from genodiff.checkpoints import load_pretrained, save_pretrained

    layer = {"l_max": 34} if lr is None else {"l_max": 34, "lr": lr}
    model = build(name="hyena", d_model=16, n_layer=1, vocab_size=12, layer=layer)
    save_pretrained(model, tmp_path / "x")
    written = json.loads((tmp_path / "x" / "config.json").read_text())["layer"]
    assert written.get("lr", "absent") == ("absent" if lr is None else lr)
    filter_ffn = load_pretrained(tmp_path / "x").backbone.layers[0].mixer.filter_fn
    own = [p._optim for p in filter_ffn.implicit_filter.parameters()]
    assert own and all(o.get("lr") == lr for o in own)

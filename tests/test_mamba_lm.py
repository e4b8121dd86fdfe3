"""The causal Mamba LM: mamba_ssm's checkpoint layout, size, causality and recurrent steps."""

import pytest
import torch

from genodiff.backbones.mamba_lm import MambaLM
from genodiff.registry import get


def small(**kwargs):
    torch.manual_seed(0)
    return MambaLM(**{"d_model": 16, "n_layer": 2, "vocab_size": 12, **kwargs})


def ids(L=24, batch=2, seed=1):
    return torch.randint(7, 12, (batch, L), generator=torch.Generator().manual_seed(seed))


def test_paper_size_parameter_count_and_state_dict_keys():
    model = MambaLM(
        d_model=128, n_layer=4, vocab_size=12, ssm_cfg={"d_state": 16, "d_conv": 4, "expand": 2}
    )
    assert model.vocab_size == 16
    assert sum(p.numel() for p in model.parameters()) == 468_608
    mixer = ["A_log", "D", "in_proj.weight", "conv1d.weight", "conv1d.bias", "x_proj.weight"]
    mixer += ["dt_proj.weight", "dt_proj.bias", "out_proj.weight"]
    expected = {"backbone.embedding.weight", "backbone.norm_f.weight"}
    for i in range(4):
        expected.add(f"backbone.layers.{i}.norm.weight")
        expected.update(f"backbone.layers.{i}.mixer.{name}" for name in mixer)
    assert set(model.state_dict()) == expected


def test_init_matches_mamba_ssm():
    model = MambaLM(d_model=64, n_layer=9, vocab_size=12)
    emb = model.backbone.embedding.weight
    assert abs(emb.std().item() - 0.02) < 2e-3
    out_proj = model.backbone.layers[0].mixer.out_proj.weight  # (64, 128): kaiming / 3
    bound = 1 / 128**0.5 / 3
    assert out_proj.abs().max() <= bound and out_proj.abs().max() > 0.9 * bound
    assert torch.all(model.backbone.layers[0].mixer.dt_proj.bias != 0)


def test_tied_head_shares_storage():
    model = small()
    assert model.lm_head_weight is model.backbone.embedding.weight
    x = ids()
    hidden = model.hidden_states(x)
    torch.testing.assert_close(model(x), hidden @ model.backbone.embedding.weight.t())
    model(x).sum().backward()
    assert model.backbone.embedding.weight.grad[:7].abs().sum() > 0  # only reached via the head
    untied = small(tie_embeddings=False)
    assert "lm_head.weight" in untied.state_dict()


def test_causal():
    model = small()
    x = ids(L=20)
    y = x.clone()
    y[:, 12:] = torch.randint(0, 7, (2, 8))
    out_x, out_y = model(x), model(y)
    torch.testing.assert_close(out_x[:, :12], out_y[:, :12], rtol=0, atol=0)
    assert not torch.allclose(out_x[:, 12:], out_y[:, 12:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_step_reproduces_forward(dtype):
    model = small(d_model=32).to(dtype)
    # Give every parameter a generic value so a wrong state update cannot hide.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = ids(L=16, batch=3)
    with torch.no_grad():
        full = model(x)  # (B, L, V)
        cache = model.allocate_inference_cache(3)
        steps = [model.step(x[:, t] if t % 2 else x[:, t : t + 1], cache) for t in range(16)]
    torch.testing.assert_close(torch.stack(steps, 1), full, rtol=1e-4, atol=1e-4)
    conv_state, ssm_state = cache[0]
    assert conv_state.shape == (3, 64, 4) and ssm_state.shape == (3, 64, 16)
    assert conv_state.dtype == ssm_state.dtype == dtype


def test_registry_and_sigma_ignored():
    assert get("backbone", "mamba") is MambaLM
    model = small()
    x = ids()
    assert model(x).shape == (2, 24, 16) and model(x).dtype == torch.float32
    torch.testing.assert_close(model(x, sigma=torch.rand(2)), model(x))
    embeds = model.backbone.embedding(x)
    torch.testing.assert_close(model(None, inputs_embeds=embeds), model(x))
    with pytest.raises(ValueError):
        small(ssm_cfg={"layer": "Mamba2"})

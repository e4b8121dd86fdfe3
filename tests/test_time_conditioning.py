"""Time-conditioned DNA backbones (``genodiff.backbones.time_embedding``): a declared
capability of Caduceus Ph and PS, off by default with checkpoints and function unchanged."""

import json
from pathlib import Path

import pytest
import torch

import genodiff
from genodiff import cli
from genodiff.backbones.caduceus import Caduceus
from genodiff.config import ConfigError
from genodiff.model import GenerativeModel
from genodiff.tokenizers import DNATokenizer
from tests.dna_objectives import mdlm

ROOT = Path(__file__).resolve().parents[1]
TOK = DNATokenizer()
CMAP = torch.tensor(TOK.complement_map)  # (16,)
# Written by the code before time conditioning existed (commit 352dece): three d8 x 2
# Caduceus models built from torch.manual_seed(0), their state dicts, an input and the logits.
BEFORE = ROOT / "tests" / "data" / "caduceus_before_time_conditioning.pt"
VARIANTS = {
    "ph": {},
    "ps_fused": {"rcps": True, "complement_map": TOK.complement_map},
    "ps_unfused": {"rcps": True, "complement_map": TOK.complement_map, "fused_add_norm": False},
}


def tiny(**kwargs) -> Caduceus:
    return Caduceus(d_model=8, n_layer=2, vocab_size=12, **kwargs)


def randomise_sigma_embedding(model: Caduceus, seed: int = 5) -> None:
    """The output layer starts at zero (the model then ignores sigma): give it weights."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.backbone.sigma_embedding.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_an_old_checkpoint_loads_and_computes_what_it_did(variant):
    before = torch.load(BEFORE)
    model = tiny(**VARIANTS[variant])
    assert not model.capabilities.time_conditioning
    assert list(model.state_dict()) == list(before[variant]["state_dict"])
    model.load_state_dict(before[variant]["state_dict"], strict=True)
    with torch.no_grad():
        logits = model(before["input_ids"], torch.tensor([0.5, 3.0]))  # sigma is ignored
    # bit-identical on the machine that wrote the file; 1e-6 leaves room for another CPU's
    # rounding, and is far below what a conditioning term would change
    torch.testing.assert_close(logits, before[variant]["logits"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_time_conditioning_adds_one_embedding_that_starts_silent(variant):
    torch.manual_seed(0)
    plain = tiny(**VARIANTS[variant])
    torch.manual_seed(0)
    timed = tiny(time_conditioning=True, **VARIANTS[variant])
    assert timed.capabilities.time_conditioning
    extra = set(timed.state_dict()) - set(plain.state_dict())
    assert set(plain.state_dict()) <= set(timed.state_dict())
    assert extra == {
        f"backbone.sigma_embedding.mlp.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")
    }
    timed.load_state_dict(plain.state_dict(), strict=False)
    x = torch.randint(7, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    sigma = torch.tensor([0.0, 1.0, 6.0])
    with torch.no_grad():  # zero output layer: exactly the unconditioned function at first
        torch.testing.assert_close(timed(x, sigma), plain(x), rtol=0, atol=0)
        randomise_sigma_embedding(timed)
        out = timed(x, sigma)
        assert (out - plain(x)).abs().amax(dim=(1, 2)).min() > 1e-3  # sigma now matters
        moved = timed(x, sigma + 1.0)
        assert (moved - out).abs().amax(dim=(1, 2)).min() > 1e-3  # ... for every row
        # no time given means sigma = 0, the clean end; a scalar reaches every row
        torch.testing.assert_close(timed(x), timed(x, torch.zeros(3)), rtol=0, atol=0)
        torch.testing.assert_close(timed(x, torch.tensor(1.0)), timed(x, torch.ones(3)))


@pytest.mark.parametrize("fused_add_norm", [True, False])
def test_caduceus_ps_stays_rc_equivariant_with_sigma(fused_add_norm):
    torch.manual_seed(0)
    model = tiny(
        rcps=True,
        complement_map=TOK.complement_map,
        fused_add_norm=fused_add_norm,
        time_conditioning=True,
        num_classes=2,
    ).double()
    randomise_sigma_embedding(model)
    x = torch.randint(7, 11, (4, 24), generator=torch.Generator().manual_seed(1))
    x[1, 3] = TOK.pad_id
    sigma = torch.tensor([0.1, 0.7, 2.5, 6.9], dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 0])
    x_rc = CMAP[x.flip(-1)]
    with torch.no_grad():
        out, out_rc = model(x, sigma, labels=labels), model(x_rc, sigma, labels=labels)
        torch.testing.assert_close(out_rc, out.flip(1)[..., CMAP], rtol=1e-10, atol=1e-10)
        # and sigma matters (the check above is not vacuous)
        assert (model(x, sigma.flip(0), labels=labels) - out).abs().max() > 1e-3


def test_ph_time_embedding_reaches_hidden_states_in_row_chunks(monkeypatch):
    """A batch too large for one CPU chunk runs in row chunks: each chunk gets its own rows'
    sigma (a wrong slice would give row i another row's time)."""
    torch.manual_seed(0)
    model = tiny(time_conditioning=True)
    randomise_sigma_embedding(model)
    x = torch.randint(7, 11, (5, 12), generator=torch.Generator().manual_seed(1))
    sigma = torch.linspace(0.0, 5.0, 5)
    with torch.no_grad():
        whole = model(x, sigma)
        monkeypatch.setattr("genodiff.backbones.base.cpu_chunk_rows", lambda *a: 2)
        chunked = model(x, sigma)
    torch.testing.assert_close(chunked, whole)


def test_mdlm_with_time_conditioning_needs_and_trains_a_time_conditioned_caduceus():
    config = {
        "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "objective": {"name": "mdlm", "time_conditioning": True},
        "ema": {"decay": 0.0},
    }
    with pytest.raises(ConfigError, match="model.time_conditioning=true"):
        GenerativeModel(config)
    config["model"]["time_conditioning"] = True
    model = GenerativeModel(config)
    assert model.backbone.capabilities.time_conditioning
    objective = mdlm(time_conditioning=True)
    sigma_seen = []
    model.backbone.backbone.sigma_embedding.register_forward_hook(
        lambda module, args, out: sigma_seen.append(args[0].clone())
    )
    x = torch.randint(7, 11, (8, 32), generator=torch.Generator().manual_seed(2))
    optimizer = torch.optim.AdamW(model.backbone.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(3)
    first = model.backbone.backbone.sigma_embedding.mlp[0].weight.detach().clone()
    for _ in range(3):
        nelbo, tokens = objective.loss(model.backbone, x, generator)
        loss = nelbo.sum() / tokens.sum()
        assert torch.isfinite(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # every step gave the network each row's own sigma(t), which reached the embedding ...
    assert len(sigma_seen) == 3 and all(s.shape == (8,) for s in sigma_seen)
    assert all(len(set(s.tolist())) == 8 for s in sigma_seen)  # stratified t: 8 distinct
    # ... and training moved it (the zero output layer first, then the first layer)
    assert not torch.equal(model.backbone.backbone.sigma_embedding.mlp[0].weight, first)


TINY_RUN = [
    "model.d_model=16",
    "model.n_layer=1",
    "model.time_conditioning=true",
    "objective.time_conditioning=true",
    "data.batch_size=8",
    "data.eval_batch_size=16",
    "objective.eval_t_samples=1",
    "trainer.max_steps=3",
    "trainer.val_check_interval=3",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "trainer.enable_progress_bar=false",
    "samples.num_samples=1",
    "samples.length=64",
    "samples.steps=4",
]


def test_a_time_conditioned_mdlm_demo_trains_exports_and_evaluates_the_same(tmp_path, capsys):
    out = tmp_path / "run"
    config = str(ROOT / "configs" / "demo.yaml")
    genodiff.train(config, TINY_RUN, output_dir=out)
    checkpoint = out / "checkpoints" / "last.ckpt"
    export = tmp_path / "export"
    assert cli.main(["export", "--checkpoint", str(checkpoint), "--out", str(export)]) == 0
    assert json.loads((export / "config.json").read_text())["time_conditioning"] is True
    results = []
    for source in (checkpoint, export):
        capsys.readouterr()
        args = ["eval", "--checkpoint", str(source), "--num-windows", "4", "--json"]
        assert cli.main(args) == 0
        results.append(json.loads(capsys.readouterr().out))
    assert results[0]["nelbo"] == pytest.approx(results[1]["nelbo"])

"""Checkpoint folders: save/load round trips, reference layouts, strict errors, export."""

import json

import pytest
import safetensors.torch
import torch

from genodiff import cli
from genodiff.backbones.build import build
from genodiff.checkpoints import export_model, folders, load_pretrained, save_pretrained
from genodiff.checkpoints.folders import CheckpointError
from genodiff.tokenizers import DNATokenizer

from .test_cli import DEMO

CONFIGS = {
    "caduceus_ph": dict(name="caduceus", d_model=16, n_layer=2, vocab_size=12),
    "caduceus_ps": dict(
        name="caduceus",
        d_model=16,
        n_layer=2,
        vocab_size=12,
        rcps=True,
        complement_map=DNATokenizer().complement_map,
    ),
    "mamba": dict(name="mamba", d_model=16, n_layer=2, vocab_size=12),
    "hyena": dict(
        name="hyena", d_model=16, n_layer=2, vocab_size=12, layer={"l_max": 64, "filter_order": 8}
    ),
}
IDS = torch.randint(0, 12, (2, 32), generator=torch.Generator().manual_seed(0))


def assert_same_model(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(a.eval()(IDS), b.eval()(IDS))


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_save_load_round_trip_is_exact(kind, tmp_path):
    model = build(**CONFIGS[kind])
    folder = save_pretrained(model, tmp_path / kind)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert_same_model(model, load_pretrained(folder))


def test_caduceus_folder_uses_reference_names(tmp_path):
    folder = save_pretrained(build(**CONFIGS["caduceus_ps"]), tmp_path / "ps")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "caduceus" and config["vocab_size"] == 16
    assert config["complement_map"]["0"] == 0 and len(config["complement_map"]) == 16
    keys = safetensors.torch.load_file(folder / "model.safetensors").keys()
    assert "caduceus.backbone.embeddings.word_embeddings.embedding.weight" in keys
    assert "lm_head.lm_head.weight" not in keys  # tied, stored once


def test_reference_caduceus_ph_folder_loads(tmp_path):
    model = build(**CONFIGS["caduceus_ph"])
    state = {"caduceus." + k: v.clone() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["caduceus.backbone.embeddings.word_embeddings.weight"]
    config = {
        "model_type": "caduceus",
        "architectures": ["CaduceusForMaskedLM"],
        "d_model": 16,
        "n_layer": 2,
        "vocab_size": 16,
        "ssm_cfg": {"d_state": 16, "d_conv": 4, "expand": 2},
        "rms_norm": True,
        "residual_in_fp32": True,
        "fused_add_norm": True,
        "pad_vocab_size_multiple": 8,
        "bidirectional": True,
        "bidirectional_strategy": "add",
        "bidirectional_weight_tie": True,
        "rcps": False,
        "complement_map": {str(i): c for i, c in enumerate([0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7])},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert_same_model(model, load_pretrained(tmp_path))


def upstream_caduceus_folder(folder, model, reverse_copy=lambda t: t):
    """A folder as upstream's CaduceusForMaskedLM writes it with torch.save (or with
    save_pretrained(safe_serialization=False)): its state_dict lists the weight-tied reverse
    in_proj / out_proj under mamba_rev as well as under mamba_fwd (``reverse_copy`` of them)."""
    state = {"caduceus." + k: v.clone() for k, v in model.state_dict().items()}
    for name in list(state):
        if ".mamba_fwd." in name and name.endswith(("in_proj.weight", "out_proj.weight")):
            state[name.replace(".mamba_fwd.", ".mamba_rev.")] = reverse_copy(state[name])
    config = {"model_type": "caduceus", **model.genodiff_config}
    if model.complement_map is not None:  # JSON keys are strings
        config["complement_map"] = {str(k): v for k, v in model.complement_map.items()}
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(state, folder / "pytorch_model.bin")
    return folder


@pytest.mark.parametrize("kind", ["caduceus_ph", "caduceus_ps"])
def test_upstream_state_dict_with_tied_reverse_projections_loads(kind, tmp_path):
    model = build(**CONFIGS[kind])
    loaded = load_pretrained(upstream_caduceus_folder(tmp_path, model))
    assert_same_model(model, loaded)
    mixer = loaded.backbone.layers[0].mixer
    mixer = getattr(mixer, "submodule", mixer)
    assert mixer.mamba_rev.in_proj is None  # still tied: the forward direction's projections


def test_tied_reverse_projection_holding_other_values_is_refused(tmp_path):
    model = build(**CONFIGS["caduceus_ph"])
    upstream_caduceus_folder(tmp_path, model, reverse_copy=lambda t: t + 1)
    with pytest.raises(CheckpointError, match=r"mamba_rev\.in_proj\.weight holds other values"):
        load_pretrained(tmp_path)


def test_reference_mamba_ssm_folder_with_tied_head_loads(tmp_path):
    model = build(**CONFIGS["mamba"])
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["backbone.embedding.weight"].clone()
    config = {
        "d_model": 16,
        "d_intermediate": 0,
        "n_layer": 2,
        "vocab_size": 12,
        "ssm_cfg": {},
        "attn_layer_idx": [],
        "attn_cfg": {},
        "rms_norm": True,
        "residual_in_fp32": True,
        "fused_add_norm": True,
        "pad_vocab_size_multiple": 8,
        "tie_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert_same_model(model, load_pretrained(tmp_path))


def test_wrong_key_fails_naming_it(tmp_path):
    folder = save_pretrained(build(**CONFIGS["mamba"]), tmp_path / "m")
    state = safetensors.torch.load_file(folder / "model.safetensors")
    state["backbone.norm_final.weight"] = state.pop("backbone.norm_f.weight")
    safetensors.torch.save_file(state, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="norm_final") as err:
        load_pretrained(folder)
    assert "backbone.norm_f.weight" in str(err.value) and "mamba_ssm" in str(err.value)


def test_failed_save_leaves_no_folder(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(folders.safetensors.torch, "save", boom)  # the weights' bytes
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(build(**CONFIGS["hyena"]), tmp_path / "h")
    assert list(tmp_path.iterdir()) == []


def test_export_reproduces_ema_backbone(tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        DEMO,
        "model=caduceus_tiny",
        "data.max_length=128",
        "data.batch_size=4",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "trainer.enable_progress_bar=false",
        "samples.num_samples=0",
        f"output_dir={run}",
    ]
    assert cli.main(args) == 0
    ckpt_path = run / "checkpoints" / "last.ckpt"
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    ema = build(**ckpt["hyper_parameters"]["config"]["model"])
    prefix = "ema.module."
    ema.load_state_dict(
        {k.removeprefix(prefix): v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
    )
    assert_same_model(ema, load_pretrained(export_model(ckpt_path, tmp_path / "ema")))
    raw = load_pretrained(export_model(ckpt_path, tmp_path / "raw", weights="raw"))
    assert not torch.equal(raw(IDS), ema(IDS))


def test_original_hyenadna_lightning_checkpoint_loads(tmp_path):
    # The original HyenaDNA releases: config.json + weights.ckpt (a Lightning checkpoint whose
    # model keys sit under "model.") with the shared Sin frequency stored once.
    model = build(
        name="hyena", d_model=16, n_layer=2, vocab_size=12, d_inner=64, layer={"l_max": 64}
    )
    state = {
        f"model.{k}": v
        for k, v in model.state_dict().items()
        if not k.endswith(("implicit_filter.3.freq", "implicit_filter.5.freq"))
    }
    state["optimizer_only.step"] = torch.tensor(3)  # non-model entries are ignored
    folder = tmp_path / "hyenadna"
    folder.mkdir()
    torch.save({"state_dict": state, "epoch": 1}, folder / "weights.ckpt")
    config = {
        "d_model": 16, "n_layer": 2, "d_inner": 64, "vocab_size": 12, "resid_dropout": 0.0,
        "embed_dropout": 0.1, "residual_in_fp32": False, "pad_vocab_size_multiple": 8,
        "layer": {"_name_": "hyena", "emb_dim": 5, "filter_order": 64, "local_order": 3,
                  "l_max": 64, "modulate": True, "w": 10, "lr": 6e-4, "wd": 0.0,
                  "lr_pos_emb": 0.0},
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    assert_same_model(load_pretrained(folder), model)


def test_transformers_mamba_layout_loads(tmp_path):
    model = build(name="mamba", d_model=16, n_layer=2, vocab_size=16)
    state = {
        ("backbone.embeddings.weight" if k == "backbone.embedding.weight" else k): v
        for k, v in model.state_dict().items()
    }
    folder = tmp_path / "hf_mamba"
    folder.mkdir()
    safetensors.torch.save_file(state, str(folder / "model.safetensors"))
    config = {
        "model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 16,
        "num_hidden_layers": 2, "vocab_size": 16, "state_size": 16, "expand": 2,
        "conv_kernel": 4, "use_bias": False, "use_conv_bias": True, "time_step_rank": "auto",
        "layer_norm_epsilon": 1e-5, "residual_in_fp32": True, "tie_word_embeddings": True,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    assert_same_model(load_pretrained(folder), model)


def test_a_ps_checkpoint_saved_without_complement_map_still_exports(tmp_path):
    # Checkpoints written before complement_map came from the tokenizer saved no such key; their
    # tokenizer (DNA) provides it, and the weights load exactly.
    section = dict(name="caduceus", d_model=16, n_layer=2, vocab_size=12, rcps=True)
    torch.manual_seed(0)
    model = build(**section, complement_map=DNATokenizer().complement_map)
    state = {f"backbone.{k}": t for k, t in model.state_dict().items()}
    state |= {f"ema.module.{k}": t for k, t in model.state_dict().items()}
    state["ema.n_averaged"] = torch.tensor(1)
    config = {"model": section, "objective": {"name": "mdlm"}}
    ckpt = {"state_dict": state, "hyper_parameters": {"config": config}}
    torch.save(ckpt, tmp_path / "old.ckpt")
    loaded = load_pretrained(export_model(tmp_path / "old.ckpt", tmp_path / "export"))
    assert_same_model(model, loaded)
    # A=7 <-> T=10, C=8 <-> G=9; specials, N and the padding ids 12..15 map to themselves
    expected = [0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11, 12, 13, 14, 15]
    assert loaded.lm_head.complement_map.tolist() == expected

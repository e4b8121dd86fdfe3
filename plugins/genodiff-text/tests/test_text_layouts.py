"""Checkpoint folders of the text models (layouts ``mdlm`` and ``mdlm_ar``), read and written
by genodiff's core through the plugin's entry points, and ``genodiff_text.convert`` on upstream
MDLM Lightning checkpoints built by hand here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch
from genodiff_text.convert import (
    ConversionError,
    convert_checkpoint,
    main,
    upstream_parameter_order,
)
from genodiff_text.models.ar import ARTransformer
from genodiff_text.models.dit import DIT
from omegaconf import OmegaConf

from genodiff import backbones
from genodiff.checkpoints import (
    UnsafePickleError,
    export_model,
    load_pretrained,
    save_pretrained,
)
from genodiff.checkpoints.folders import detect_layout, registered_layouts

DIT_CONFIG = {"vocab_size": 11, "hidden_dim": 32, "cond_dim": 16, "n_blocks": 2, "n_heads": 2}
AR_CONFIG = {"vocab_size": 11, "hidden_dim": 32, "n_blocks": 2, "n_heads": 2, "mask_index": 10}
IDS = torch.tensor([[1, 5, 3, 10, 0, 7], [4, 4, 9, 1, 6, 8]])
SIGMA = torch.tensor([0.2, 1.5])


def randomised(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random non-zero weights (upstream zero-initialises adaLN and the output layer)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model.eval()


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ----------------------------------------------------------------------------- folders


def test_dit_round_trip_in_the_mdlm_layout(tmp_path):
    model = randomised(backbones.build("dit", **DIT_CONFIG))
    folder = save_pretrained(model, tmp_path / "dit")
    config = json.loads((folder / "config.json").read_text())
    assert config == {
        "model_type": "mdlm",
        **DIT_CONFIG,
        "model_length": 1024,
        "dropout": 0.1,
        "time_conditioning": True,
    }
    stored = safetensors.torch.load_file(str(folder / "model.safetensors"))
    assert set(stored) == {f"backbone.{k}" for k in model.state_dict()}
    loaded = load_pretrained(folder)
    assert type(loaded) is DIT and same_state(loaded, model)
    assert torch.equal(loaded(IDS, SIGMA), model(IDS, SIGMA))


def test_ar_round_trip_in_the_mdlm_ar_layout(tmp_path):
    model = randomised(backbones.build("ar_transformer", **AR_CONFIG))
    folder = save_pretrained(model, tmp_path / "ar")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "mdlm_ar" and config["time_conditioning"] is False
    assert config["mask_index"] == 10 and "cond_dim" not in config
    stored = safetensors.torch.load_file(str(folder / "model.safetensors"))
    assert set(stored) == {f"backbone.{k}" for k in model.state_dict()}
    loaded = load_pretrained(folder)
    assert type(loaded) is ARTransformer and loaded.mask_index == 10 and same_state(loaded, model)
    assert torch.equal(loaded(IDS), model(IDS))


def test_a_hand_written_mdlm_folder_loads(tmp_path):
    # As kuleshov-group/mdlm-owt: the MDLM config fields (and some transformers bookkeeping),
    # weights "backbone.<names>".
    config = {
        "architectures": ["MDLM"],
        "model_type": "mdlm",
        "vocab_size": 11,
        "model_length": 64,
        "hidden_dim": 32,
        "cond_dim": 16,
        "n_blocks": 2,
        "n_heads": 2,
        "dropout": 0.1,
        "time_conditioning": False,
        "return_dict": False,
        "torch_dtype": "float32",
    }
    source = randomised(DIT(**DIT_CONFIG))
    tensors = {"backbone." + name: t.contiguous() for name, t in source.state_dict().items()}
    tmp_path.joinpath("config.json").write_text(json.dumps(config))
    safetensors.torch.save_file(tensors, str(tmp_path / "model.safetensors"))

    name, layout = detect_layout(config)
    assert (name, layout.name) == ("dit", "mdlm")
    loaded = load_pretrained(tmp_path)
    assert type(loaded) is DIT and loaded.model_length == 64
    assert not loaded.capabilities.time_conditioning  # time_conditioning: false is honoured
    assert torch.equal(loaded(IDS, SIGMA), source(IDS))  # sigma ignored: conditions on 0
    assert detect_layout({**config, "model_type": "mdlm_ar"})[0] == "ar_transformer"


BUILTIN_CONFIGS = [
    {"model_type": "caduceus", "d_model": 16, "n_layer": 2},
    {"d_model": 16, "n_layer": 2, "ssm_cfg": {}},  # mamba_ssm
    {"model_type": "mamba", "hidden_size": 16},
    {"d_model": 16, "n_layer": 2, "d_inner": 64, "layer": {"_name_": "hyena"}},
]


def test_layouts_do_not_overlap_with_the_builtin_ones():
    ours = {layout.name: layout for _, layout in registered_layouts()}
    for config in BUILTIN_CONFIGS:
        assert not ours["mdlm"].matches(config) and not ours["mdlm_ar"].matches(config)
        assert detect_layout(config)[0] not in ("dit", "ar_transformer")
    for model_type, backbone in (("mdlm", "dit"), ("mdlm_ar", "ar_transformer")):
        config = {"model_type": model_type, **DIT_CONFIG}
        matching = [n for n, layout in registered_layouts() if layout.matches(config)]
        assert matching == [backbone]


# A genodiff training run's DiT: the run's tokenizer (DNA, the default: 12 ids) sets its vocabulary.
TRAINED_DIT = {**DIT_CONFIG, "vocab_size": 12}


def training_checkpoint(path, objective: dict, seed: int = 0) -> tuple:
    """A .ckpt as ``genodiff train`` saves one of a DiT run (its trained and averaged weights,
    the EMA's count, its config); returns the (trained, averaged) DiTs."""
    time_conditioning = objective.get("time_conditioning", True)
    trained = randomised(DIT(**TRAINED_DIT, time_conditioning=time_conditioning), seed=seed)
    ema = randomised(DIT(**TRAINED_DIT, time_conditioning=time_conditioning), seed=seed + 1)
    state = {f"backbone.{k}": t for k, t in trained.state_dict().items()}
    state |= {f"ema.module.{k}": t for k, t in ema.state_dict().items()}
    state["ema.n_averaged"] = torch.tensor(1)
    config = {"model": {"name": "dit", **TRAINED_DIT}, "objective": objective}
    torch.save({"state_dict": state, "hyper_parameters": {"config": config}}, path)
    return trained, ema


def test_export_of_a_genodiff_training_checkpoint(tmp_path):
    model, ema = training_checkpoint(tmp_path / "last.ckpt", {"name": "mdlm"})
    assert same_state(load_pretrained(export_model(tmp_path / "last.ckpt", tmp_path / "e")), ema)
    raw = export_model(tmp_path / "last.ckpt", tmp_path / "r", weights="raw")
    assert same_state(load_pretrained(raw), model)


@pytest.mark.parametrize("conditioned", [False, True])
def test_export_says_whether_the_run_conditioned_on_time(tmp_path, conditioned):
    # The DiT's constructor default is time_conditioning=True; a run whose objective never
    # gave it the time (MDLM on LM1B) exports what it did, and the folder behaves the same.
    objective = {"name": "mdlm", "time_conditioning": conditioned}
    _, model = training_checkpoint(tmp_path / "last.ckpt", objective)
    folder = export_model(tmp_path / "last.ckpt", tmp_path / "e")
    assert json.loads((folder / "config.json").read_text())["time_conditioning"] is conditioned
    loaded = load_pretrained(folder)
    with torch.no_grad():
        sigma = SIGMA if conditioned else None
        torch.testing.assert_close(loaded(IDS, sigma), model(IDS, sigma))


# ----------------------------------------------------------------------------- upstream .ckpt


def upstream_order(n_blocks: int, dit: bool) -> list[str]:
    """upstream's backbone.parameters() order, from its module definitions: DIT registers
    vocab_embed, sigma_map, rotary_emb, blocks, output_layer; DDiTBlock norm1, attn_qkv,
    attn_out, dropout1, norm2, mlp, dropout2, adaLN_modulation; DDitFinalLayer norm_final,
    linear, adaLN_modulation. The AR model has no sigma_map or adaLN_modulation."""
    names = ["vocab_embed.embedding"]
    if dit:
        names += ["sigma_map.mlp.0.weight", "sigma_map.mlp.0.bias"]
        names += ["sigma_map.mlp.2.weight", "sigma_map.mlp.2.bias"]
    for i in range(n_blocks):
        names += [
            f"blocks.{i}.norm1.weight",
            f"blocks.{i}.attn_qkv.weight",
            f"blocks.{i}.attn_out.weight",
            f"blocks.{i}.norm2.weight",
            f"blocks.{i}.mlp.0.weight",
            f"blocks.{i}.mlp.0.bias",
            f"blocks.{i}.mlp.2.weight",
            f"blocks.{i}.mlp.2.bias",
        ]
        if dit:
            names += [f"blocks.{i}.adaLN_modulation.weight", f"blocks.{i}.adaLN_modulation.bias"]
    names += ["output_layer.norm_final.weight", "output_layer.linear.weight"]
    names += ["output_layer.linear.bias"]
    if dit:
        names += ["output_layer.adaLN_modulation.weight", "output_layer.adaLN_modulation.bias"]
    return names


def test_the_ema_order_is_upstreams_and_our_parameter_order():
    for dit, model in ((True, DIT(**DIT_CONFIG)), (False, ARTransformer(**AR_CONFIG))):
        ours = [name for name, _ in model.named_parameters()]
        assert upstream_parameter_order(2, conditioned=dit) == upstream_order(2, dit) == ours


def upstream_ckpt(path, dit: bool, tokenizer=None, n_heads: int | None = 2, with_ema: bool = True):
    """An MDLM Lightning checkpoint as upstream writes it: raw weights under backbone.* (and
    the noise schedule's), the EMA's shadow_params in parameters() order plus one noise
    parameter (``with_ema``; else no EMA), the Hydra config and the tokenizer. Returns (raw,
    ema) by name."""
    torch.manual_seed(3)
    shapes = (DIT(**DIT_CONFIG) if dit else ARTransformer(**AR_CONFIG)).state_dict()
    raw = {name: torch.randn(shapes[name].shape) for name in upstream_order(2, dit)}
    ema = {name: t + 1.0 for name, t in raw.items()}  # distinct from raw
    state = {f"backbone.{k}": t for k, t in raw.items()}
    state["backbone.rotary_emb.inv_freq"] = shapes["rotary_emb.inv_freq"]
    state["noise.sigmas"] = torch.zeros(4)
    model = {"name": "small", "type": "ddit", "hidden_size": 32, "cond_dim": 16, "length": 64}
    model |= {"n_blocks": 2, "dropout": 0.0, "scale_by_sigma": True}
    if n_heads is not None:
        model["n_heads"] = n_heads
    config = {"backbone": "dit" if dit else "ar", "time_conditioning": True, "model": model}
    ckpt = {
        "state_dict": state,
        "ema": {
            "decay": 0.9999,
            "num_updates": 10,
            "shadow_params": [ema[n] for n in upstream_order(2, dit)] + [torch.zeros(2)],
        }
        if with_ema
        else None,
        "hyper_parameters": {"config": OmegaConf.create(config), "tokenizer": tokenizer},
    }
    torch.save(ckpt, path)
    return raw, ema


def loaded_params(folder) -> dict[str, torch.Tensor]:
    return dict(load_pretrained(folder).named_parameters())


def test_convert_an_upstream_dit_checkpoint_raw_and_ema(tmp_path):
    raw, ema = upstream_ckpt(tmp_path / "dit.ckpt", dit=True)
    for weights, expected in (("raw", raw), ("ema", ema)):
        folder = convert_checkpoint(tmp_path / "dit.ckpt", tmp_path / weights, weights=weights)
        params = loaded_params(folder)
        assert params.keys() == expected.keys()
        assert all(torch.equal(params[k], expected[k]) for k in expected), weights
    config = json.loads((tmp_path / "ema" / "config.json").read_text())
    assert config == {
        "model_type": "mdlm",
        **DIT_CONFIG,
        "model_length": 64,
        "dropout": 0.0,
        "time_conditioning": True,
    }


def test_convert_an_upstream_ar_checkpoint_from_the_command_line(tmp_path, capsys):
    # upstream pickles its tokenizer object: a class outside the allow-list, so the file is
    # refused in one line naming it and the flag, and converted with --stub-unknown-classes only
    tokenizer = SimpleNamespace(mask_token_id=7, vocab_size=11)
    raw, ema = upstream_ckpt(tmp_path / "ar.ckpt", dit=False, tokenizer=tokenizer)
    with pytest.raises(SystemExit) as exit_code:
        main([str(tmp_path / "ar.ckpt"), str(tmp_path / "out")])
    assert exit_code.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(tmp_path / "ar.ckpt") in err and "types.SimpleNamespace" in err
    assert "--stub-unknown-classes reads them as inert placeholders" in err
    assert not (tmp_path / "out").exists()
    main([str(tmp_path / "ar.ckpt"), str(tmp_path / "out"), "--stub-unknown-classes"])  # EMA
    assert "wrote" in capsys.readouterr().out
    params = loaded_params(tmp_path / "out")
    assert all(torch.equal(params[k], ema[k]) for k in ema)
    assert load_pretrained(tmp_path / "out").mask_index == 7
    main(
        [str(tmp_path / "ar.ckpt"), str(tmp_path / "raw"), "--weights", "raw", "--mask-index", "3"]
        + ["--stub-unknown-classes"]
    )
    params = loaded_params(tmp_path / "raw")
    assert all(torch.equal(params[k], raw[k]) for k in raw)
    assert load_pretrained(tmp_path / "raw").mask_index == 3


def test_convert_reads_the_sizes_from_the_weights_and_refuses_what_it_cannot_know(tmp_path):
    upstream_ckpt(tmp_path / "dit.ckpt", dit=True, n_heads=None)  # heads from inv_freq
    folder = convert_checkpoint(tmp_path / "dit.ckpt", tmp_path / "out", overrides={"dropout": 0.2})
    config = json.loads((folder / "config.json").read_text())
    assert (config["n_heads"], config["dropout"]) == (2, 0.2)
    upstream_ckpt(tmp_path / "dit.ckpt", dit=True, n_heads=4)  # disagrees with the weights
    with pytest.raises(ConversionError, match="n_heads"):
        convert_checkpoint(tmp_path / "dit.ckpt", tmp_path / "out2")
    with pytest.raises(ConversionError, match="DIT takes no mask_index"):
        convert_checkpoint(tmp_path / "dit.ckpt", tmp_path / "out2", overrides={"mask_index": 1})
    upstream_ckpt(tmp_path / "ar.ckpt", dit=False, tokenizer=None)
    with pytest.raises(ConversionError, match="mask"):
        convert_checkpoint(tmp_path / "ar.ckpt", tmp_path / "out3")


class RunsACommand:
    """Unpickling it runs ``command`` in a shell, as a malicious checkpoint's payload does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_convert_runs_no_code_a_checkpoint_holds(tmp_path, capsys):
    marker = tmp_path / "pwned"
    upstream_ckpt(tmp_path / "evil.ckpt", dit=True, tokenizer=RunsACommand(f"touch {marker}"))
    system = f"{os.system.__module__}.{os.system.__name__}"
    with pytest.raises(UnsafePickleError) as err:
        convert_checkpoint(tmp_path / "evil.ckpt", tmp_path / "out")
    assert system in str(err.value) and "stub_unknown_classes=True" in str(err.value)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "evil.ckpt"), str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and system in err and "--stub-unknown-classes" in err
    assert not marker.exists() and not (tmp_path / "out").exists()
    # placeholders never stand in for os.system: still refused, in one line, nothing run
    with pytest.raises(SystemExit):
        main([str(tmp_path / "evil.ckpt"), str(tmp_path / "out"), "--stub-unknown-classes"])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "refused even with placeholders" in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_convert_refuses_a_torch_file_without_a_state_dict(tmp_path, capsys):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.ckpt")
    with pytest.raises(ConversionError, match="holds no state_dict"):
        convert_checkpoint(tmp_path / "other.ckpt", tmp_path / "out")
    with pytest.raises(SystemExit) as exit_code:
        main([str(tmp_path / "other.ckpt"), str(tmp_path / "out")])
    assert exit_code.value.code == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"python -m genodiff_text.convert: error: {tmp_path / 'other.ckpt'} holds no "
        "state_dict: not a Lightning checkpoint"
    )


@pytest.mark.parametrize("name, config", [("dit", DIT_CONFIG), ("ar_transformer", AR_CONFIG)])
def test_the_memory_check_counts_the_weights_without_torch_s_compiler(name, config):
    """genodiff's memory check builds the backbone on the meta device
    (``genodiff.model.backbone_size``): in a fresh interpreter it counts what a build in memory
    holds, and imports no ``torch._dynamo`` (about 1.5 s of every load) on the way."""
    real = backbones.build(name=name, **config)
    parameters = sum(p.numel() for p in real.parameters())
    weights = sum(t.numel() * t.element_size() for t in [*real.parameters(), *real.buffers()])
    code = (
        "import json, sys\n"
        "from genodiff.model import backbone_size\n"
        "size = backbone_size(json.loads(sys.argv[1]))\n"
        "print(json.dumps([size, 'torch._dynamo' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps({"name": name, **config})],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    size, compiler = json.loads(done.stdout.splitlines()[-1])
    assert size == [parameters, weights]
    assert compiler is False


def test_convert_of_a_missing_file_or_a_folder_is_a_one_line_error(tmp_path, capsys):
    for given, says in ((tmp_path / "none.ckpt", "not found"), (tmp_path, "is a folder")):
        with pytest.raises(SystemExit) as exit_code:  # was a FileNotFoundError traceback
            main([str(given), str(tmp_path / "out")])
        assert exit_code.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("python -m genodiff_text.convert: error:") and "\n" not in err
        assert f"{given} {says}" in err
    assert not (tmp_path / "out").exists()


def test_convert_of_a_checkpoint_without_an_ema_names_the_flag_that_converts_it(tmp_path, capsys):
    # Was "convert with weights='raw'", the Python spelling alone, on the command line.
    upstream_ckpt(tmp_path / "dit.ckpt", dit=True, with_ema=False)
    with pytest.raises(SystemExit) as exit_code:
        main([str(tmp_path / "dit.ckpt"), str(tmp_path / "out")])
    assert exit_code.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("holds no EMA; convert with weights='raw' (--weights raw)")
    )
    main([str(tmp_path / "dit.ckpt"), str(tmp_path / "out"), "--weights", "raw"])
    assert "wrote" in capsys.readouterr().out

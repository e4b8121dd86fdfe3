"""The text configs compose and validate (from any folder: the plugin ships them), hold the
paper's recipe, and text_demo trains."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from genodiff_text.resources import CONFIGS, CORPUS
from omegaconf import OmegaConf

from genodiff.checkpoints import read_checkpoint_file
from genodiff.config import ConfigError, load_config
from genodiff.resources import resource

REPO = Path(__file__).resolve().parents[3]
CORE_CONFIGS = resource("configs")
TEXT_CONFIGS = ["lm1b", "lm1b_ar", "lm1b_sedd", "text_demo", "text_demo_ar"]
PLUGIN_NAMES = {
    "data": {"text"},
    "model": {"dit", "ar_transformer"},
    "tokenizer": {"hf", "trained"},
}

# A text_demo run of a few seconds (tiny vocabulary, model and data); MDLM adds its own keys.
TINY_TEXT = [
    "trainer.max_steps=3",
    "trainer.val_check_interval=3",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "data.max_lines=400",
    "data.max_length=24",
    "data.batch_size=8",
    "data.eval_batch_size=16",
    "tokenizer.vocab_size=200",
    "model.hidden_dim=32",
    "model.n_blocks=1",
    "model.n_heads=2",
    "samples.length=24",
    "samples.steps=4",
]
MDLM_TINY = ["model.cond_dim=16", "objective.eval_t_samples=1"]


def _load(name, overrides=None):
    return load_config(CONFIGS / f"{name}.yaml", overrides or [])


PLUGIN_GROUP_FILES = {
    "model": {"dit_small", "dit_tiny", "ar_transformer_small", "ar_transformer_tiny"},
    "data": {"lm1b", "text_demo"},
    "objective": {
        "mdlm_text",
        "sedd_text",
        "d3pm_text",
        "mdlm_text_upstream",
        "sedd_text_upstream",
    },
}


def _uses_plugin(folder: Path, name: str) -> bool:
    """Whether folder/NAME.yaml (or a config it extends) sets a tokenizer or picks a text
    model / data file, read from the YAML files without composing them."""
    raw = OmegaConf.to_container(OmegaConf.load(folder / f"{name}.yaml"))
    if "tokenizer" in raw:
        return True
    for entry in raw.get("defaults", []):
        if isinstance(entry, str) and entry != "_self_":
            if _uses_plugin(folder, entry):
                return True
        elif isinstance(entry, dict):
            for key, value in entry.items():
                group = key.removeprefix("override ").strip()
                if value in PLUGIN_GROUP_FILES.get(group, ()):
                    return True
    return False


def test_every_config_that_uses_the_plugin_is_covered_and_shipped_by_it():
    for group, names in PLUGIN_GROUP_FILES.items():
        assert {p.stem for p in (CONFIGS / group).glob("*.yaml")} == names
        for name in names:
            section = OmegaConf.load(CONFIGS / group / f"{name}.yaml")
            assert section.get("name") in PLUGIN_NAMES.get(group, ()) or "defaults" in section
    assert {p.stem for p in CONFIGS.glob("*.yaml")} == set(TEXT_CONFIGS)
    assert all(_uses_plugin(CONFIGS, name) for name in TEXT_CONFIGS)
    # the core ships no text config
    assert not any(_uses_plugin(CORE_CONFIGS, p.stem) for p in CORE_CONFIGS.glob("*.yaml"))
    for group, names in PLUGIN_GROUP_FILES.items():
        assert not {p.stem for p in (CORE_CONFIGS / group).glob("*.yaml")} & names


@pytest.mark.parametrize("spelling", ["text_demo", "configs/text_demo.yaml"])
def test_text_demo_composes_from_another_folder(tmp_path, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)  # no configs/ here: the plugin's entry point finds them
    cfg = load_config(spelling)
    assert (cfg.name, cfg.model.name, cfg.data.name) == ("text_demo", "dit", "text")
    # the core's objective/ and trainer/ groups, composed with the plugin's model/ and data/
    assert cfg.objective.name == "mdlm" and cfg.trainer.accelerator == "cpu"
    assert cfg.model.hidden_dim == 128 and cfg.data.max_length == 64


def test_text_demo_reads_the_corpus_the_plugin_ships():
    from genodiff.data.build import build_datamodule

    datamodule = build_datamodule(dict(load_config("text_demo").data))
    assert datamodule.path == CORPUS and CORPUS.is_relative_to(CONFIGS.parent)
    datamodule.check_files()
    assert datamodule._line_count == 17_642  # corpus/README.md


@pytest.mark.parametrize("name", TEXT_CONFIGS)
def test_text_configs_compose_and_validate(name):
    cfg = _load(name)
    assert cfg.data.name == "text"
    assert cfg.tokenizer.name in ("hf", "trained")
    assert cfg.model.name in ("dit", "ar_transformer")
    # ids and the vocabulary come from the tokenizer, never from the config
    assert "vocab_size" not in cfg.model
    for key in ("mask_id", "pad_id", "bos_id", "sample_ids"):
        assert cfg.objective.get(key) is None
    assert cfg.model.model_length == cfg.data.max_length


def test_lm1b_is_the_papers_recipe():
    cfg = _load("lm1b")
    assert OmegaConf.to_container(cfg.tokenizer) == {
        "name": "hf",
        "pretrained": "bert-base-uncased",
    }
    assert (cfg.data.source, cfg.data.max_length, cfg.data.wrap, cfg.data.detokenize) == (
        "lm1b", 128, False, True,
    )  # fmt: skip
    assert cfg.data.batch_size * cfg.trainer.accumulate_grad_batches == 512
    m = cfg.model
    assert (m.name, m.hidden_dim, m.cond_dim, m.n_blocks, m.n_heads, m.dropout) == (
        "dit", 768, 128, 12, 12, 0.1,
    )  # fmt: skip
    o = cfg.optim
    assert (o.lr, list(o.betas), o.eps, o.weight_decay) == (3e-4, [0.9, 0.999], 1e-8, 0.0)
    assert o.min_lr_ratio == 1.0  # constant after warm-up
    assert round(o.warmup_fraction * cfg.trainer.max_steps) == 2500
    assert cfg.trainer.max_steps == 1_000_000 and cfg.trainer.gradient_clip_val == 1.0
    assert cfg.ema.decay == 0.9999 and cfg.trainer.precision is None  # bf16 on GPU
    assert cfg.objective.name == "mdlm" and cfg.objective.time_conditioning is False


def test_lm1b_says_the_token_positions_it_trains_on():
    """Was: "512 x 128 x 1M = 65B token slots, ~33B real tokens": 65.5B, and nothing made
    half of them real (the paper's 33B is 512 x 128 x ~500K steps)."""
    cfg = _load("lm1b")
    sentences = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches
    positions = cfg.trainer.max_steps * sentences * cfg.data.max_length
    assert positions == 65_536_000_000
    header = (CONFIGS / "lm1b.yaml").read_text(encoding="utf-8")
    assert f"= {positions / 1e9:.1f}B token positions, [PAD] included" in header
    assert "real tokens" not in header


def test_lm1b_baselines_share_the_recipe():
    base, ar, sedd = _load("lm1b"), _load("lm1b_ar"), _load("lm1b_sedd")
    assert ar.objective.name == "ar" and ar.model.name == "ar_transformer"
    assert (ar.model.hidden_dim, ar.model.n_blocks, ar.model.n_heads) == (768, 12, 12)
    assert ar.model.mask_index is None
    assert sedd.objective.name == "sedd" and sedd.model.name == "dit"
    assert sedd.objective.mask_id is None and sedd.objective.pad_id is None
    assert sedd.objective.time_conditioning is True
    for cfg in (ar, sedd):
        assert cfg.optim == base.optim and cfg.data == base.data
        assert cfg.tokenizer == base.tokenizer and cfg.trainer == base.trainer


@pytest.mark.parametrize(
    ("name", "padding"), [("lm1b", "upstream"), ("lm1b_sedd", "upstream"), ("text_demo", "bound")]
)
def test_padded_text_names_its_pad_convention(name, padding):
    # wrap: false pads each sentence. The demo scores [PAD] (a bound, the length included); the
    # paper's LM1B recipe keeps upstream MDLM's convention (corrupted, never scored) for numbers
    # comparable with the paper; the core's DNA objectives never corrupt [PAD] (N).
    cfg = _load(name)
    assert cfg.data.wrap is False and cfg.objective.padding == padding
    assert _load(name, ["objective.padding=bound"]).objective.padding == "bound"
    core = {
        name: load_config(resource("configs/demo.yaml"), [f"objective={name}"])
        for name in ("mdlm", "sedd", "d3pm")
    }
    assert all(c.objective.padding == "given" for c in core.values())
    d3pm = _load("text_demo", ["objective=d3pm_text"])
    assert d3pm.objective.name == "d3pm" and d3pm.objective.padding == "bound"
    with pytest.raises(ConfigError, match="objective.padding: expected one of 'given', 'bound'"):
        _load("text_demo", ["objective.padding=yes"])


def test_text_demo_is_small_and_trains_its_own_tokenizer():
    cfg = _load("text_demo")
    assert cfg.tokenizer.name == "trained" and cfg.tokenizer.kind == "wordpiece"
    assert cfg.data.source == "file" and cfg.data.path is None  # the bundled corpus
    assert cfg.trainer.accelerator == "cpu"
    assert cfg.model.hidden_dim <= 256


def test_sedd_with_dna_ids_is_refused_for_text():
    # The DNA ids objective/sedd.yaml may list must not reach a text tokenizer unnoticed.
    from genodiff_text.tokenizers import TrainedTokenizer

    from genodiff.config import with_tokenizer_fields
    from genodiff.objectives.sedd import SEDD

    tok = TrainedTokenizer(vocab_size=64).train(["the cat sat on the mat"] * 4)
    with pytest.raises(ConfigError, match="disagrees"):
        with_tokenizer_fields("objective", SEDD, {"mask_id": 3, "pad_id": 4}, tok)
    filled = with_tokenizer_fields("objective", SEDD, {"mask_id": None, "pad_id": None}, tok)
    assert (filled["mask_id"], filled["pad_id"]) == (tok.mask_id, tok.pad_id)


def test_text_demo_trains_end_to_end_and_eval_matches_the_baselines(tmp_path, capsys):
    pytest.importorskip("genodiff_text.models.dit")
    from genodiff.cli import main

    out = tmp_path / "run"
    overrides = [
        *TINY_TEXT,
        *MDLM_TINY,
        "samples.num_samples=2",
        "samples.batch_size=2",
        f"output_dir={out}",
    ]
    assert main(["train", str(CONFIGS / "text_demo.yaml"), *overrides]) == 0
    samples = (out / "samples.txt").read_text()
    assert samples.strip() and "[SEP]" not in samples  # a sample ends at its first [SEP]
    saved = json.loads((out / "tokenizer.json").read_text())
    assert saved["name"] == "trained" and "tokenizer_json" in saved["state"]
    checkpoint = next((out / "checkpoints").glob("*.ckpt"))
    ckpt = read_checkpoint_file(checkpoint)
    assert ckpt["hyper_parameters"]["config"]["model"]["vocab_size"] <= 200

    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(checkpoint), "--json", "--num-windows", "10"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(printed)
    assert result["windows"] == 10 and result["length"] == 24
    assert math.isfinite(result["perplexity"])
    # objective.padding=bound: every token scored, [PAD] included; a bound on the padded text
    assert result["tokens"] == 10 * 24 and result["likelihood"] == "bound"
    (tmp_path / "eval.json").write_text(printed)

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import text_baselines
    finally:
        sys.path.remove(str(REPO / "bench"))
    capsys.readouterr()
    argv = ["--checkpoint", str(checkpoint), "--num-windows", "10", "--json"]
    text_baselines.main([*argv, "--eval", str(tmp_path / "eval.json")])
    report = json.loads(capsys.readouterr().out)
    assert report["windows_sha256"] == result["windows_sha256"]  # the very same tokens
    assert report["tokens"] == result["tokens"] and report["padding"] == "bound"
    assert report["run"]["nelbo"] == result["nelbo"]
    assert report["bigram_add_one"]["perplexity"] < report["unigram_add_one"]["perplexity"]

    # A prefix word the tokenizer maps to [UNK] is named, never dropped from the samples.
    sample = ["sample", "--checkpoint", str(checkpoint), "--num-samples", "1", "--steps", "4"]
    written = tmp_path / "prefixed.txt"
    capsys.readouterr()
    assert main([*sample, "--prefix", "zxqvbnm qwxyz", "--out", str(written)]) == 2
    err = capsys.readouterr().err
    assert "does not know 'zxqvbnm'" in err and not written.exists()

    # The Python API on the text run: score is `eval --file --per-window` line by line, and
    # generate is what `genodiff sample` writes.
    import genodiff

    model = genodiff.load(checkpoint, device="cpu")
    lines = ["the cat sat on the mat .", "a dog ran to the park .", "we like books ."]
    text_file = tmp_path / "lines.txt"
    text_file.write_text("".join(line + "\n" for line in lines))
    capsys.readouterr()
    argv = ["eval", "--checkpoint", str(checkpoint), "--file", str(text_file), "--seed", "4"]
    assert main([*argv, "--json", "--per-window", "--no-progress"]) == 0
    windows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["per_window"]
    scores = model.score(lines, seed=4)
    assert scores == pytest.approx([w["nelbo"] / w["tokens"] for w in windows], rel=1e-9)
    drawn = model.generate(2, steps=4, seed=1, batch_size=2)
    out_file = tmp_path / "drawn.txt"
    assert main([*sample[:-4], "--num-samples", "2", "--steps", "4", "--seed", "1",
                 "--batch-size", "2", "--out", str(out_file)]) == 0  # fmt: skip
    assert drawn.save(tmp_path / "api.txt").read_text() == out_file.read_text()

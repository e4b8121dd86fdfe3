"""The core is domain-neutral: a toy domain (its tokenizer, data module and sample format),
registered only through entry points (as a plugin would be), trains, samples and evaluates with
the same commands; ids and sizes come from the tokenizer; capabilities are declared; checkpoint
layouts are open; plugins ship configs found from any folder."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
import torch

import genodiff
from genodiff import cli, registry
from genodiff.backbones import Capabilities, build, capabilities_of
from genodiff.backbones.layout import CheckpointLayout
from genodiff.checkpoints import load_pretrained, save_pretrained
from genodiff.checkpoints.folders import CheckpointError, detect_layout
from genodiff.config import ConfigError, load_config, with_tokenizer_fields
from genodiff.evaluate import window_digest
from genodiff.objectives import AR, MDLM, SEDD
from genodiff.sample_files import read_samples, write_samples
from genodiff.sample_formats import SamplingRun
from genodiff.samplers.request import SampleRequest
from genodiff.tokenizers import (
    DNATokenizer,
    build_tokenizer,
    load_tokenizer,
    tokenizer_from_record,
    tokenizer_record,
)
from genodiff.tokenizers.base import id_dtype
from tests import doc_commands
from tests.test_cli import DEMO, TINY

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = [
    "the cat sat on the mat.",
    "a dog ran to the park.",
    "the sun is hot today.",
    "we like to read books.",
]


def plugins_doc_source(marker: str) -> str:
    """The code block of docs/plugins.md (the README's page on plugins) that starts with
    ``marker``, as printed there."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    start = text.index(marker)
    return text[start : text.index("```", start)]


# The domain example of docs/plugins.md (tokenizer, data module, sample format), loaded as the
# plugin module ``my_domain.chars`` that its entry points name.
chars = types.ModuleType("my_domain.chars")
exec(plugins_doc_source("# my_domain/chars.py"), chars.__dict__)
ALPHABET, CharTokenizer = chars.ALPHABET, chars.CharTokenizer


def entry_points_of(block: str) -> dict[str, list[EntryPoint]]:
    """The entry points a pyproject.toml block of the page registers, by group: each
    ``[project.entry-points."GROUP"]`` header and its ``name = "module:object"`` lines."""
    found: dict[str, list[EntryPoint]] = {}
    group = ""
    for line in filter(str.strip, block.splitlines()):
        header = re.fullmatch(r'\[project\.entry-points\."(.+)"\]', line)
        if header:
            group = header[1]
            continue
        name, target = re.fullmatch(r'(\w+) = "(.+)"', line).groups()
        found.setdefault(group, []).append(EntryPoint(name, target, group))
    return found


PLUGIN = entry_points_of(plugins_doc_source('[project.entry-points."genodiff.tokenizers"]'))


@pytest.fixture(scope="module")
def toy_plugin():
    """Register the toy tokenizer and data module under the entry points the page's
    pyproject.toml lists (no core import of them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "my_domain.chars", chars)
        patch.setattr(registry, "entry_points", lambda group: PLUGIN.get(group, []))
        yield
        for kind in ("tokenizer", "data", "domain"):  # forget the toy classes once done
            for entry in PLUGIN[registry.ENTRY_POINT_GROUPS[kind]]:
                registry._REGISTRIES[kind].pop(entry.name, None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 10) + "\n")
    return path


def write_text_config(folder: Path, corpus: Path, out: Path) -> Path:
    """An experiment file alone in its folder: the core's config groups are found anyway."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "toy_text.yaml"
    config.write_text(
        f"""defaults:
  - model: caduceus_tiny
  - objective: mdlm
  - trainer: cpu
  - _self_
name: toy_text
output_dir: {out}
tokenizer: {{name: chars}}
data: {{name: lines, path: {corpus}, max_length: 32, batch_size: 4}}
objective: {{eval_t_samples: 2}}
samples: {{num_samples: 2, length: 32, steps: 8}}
trainer: {{max_steps: 4, val_check_interval: 2, limit_val_batches: 2, limit_test_batches: 2,
          enable_progress_bar: false}}
"""
    )
    return config


@pytest.fixture(scope="module")
def text_run(toy_plugin, corpus, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("text_run")
    config = write_text_config(root / "configs", corpus, root / "run")
    genodiff.train(str(config))
    return root / "run"


def test_a_toy_domain_trains_samples_and_evaluates_through_the_core(text_run, corpus, capsys):
    ckpt = text_run / "checkpoints" / "last.ckpt"
    # The run saved the tokenizer; the vocabulary came from it (28 characters + 4 specials).
    assert json.loads((text_run / "tokenizer.json").read_text())["name"] == "chars"
    config = json.loads(json.dumps(torch.load(ckpt, weights_only=True)["hyper_parameters"]))
    assert config["config"]["model"]["vocab_size"] == 32
    assert config["config"]["objective"]["mask_id"] == 1
    # The domain's own sample file: name<TAB>text, read back through the same format.
    lines = (text_run / "samples.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["sample_0_seed0", "sample_1_seed0"]
    samples = read_samples(text_run / "samples.tsv")
    assert samples == [line.split("\t")[1] for line in lines]
    assert all(len(s) > 0 and set(s) <= set(ALPHABET) for s in samples)

    out = text_run / "s.jsonl"
    assert cli.main(["sample", "--checkpoint", str(ckpt), "--out", str(out), "--num-samples",
                     "3", "--steps", "8", "--prefix", "the "]) == 0  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(r["text"].startswith("the ") for r in rows)
    assert rows[0]["sampler"] == "ancestral" and rows[0]["checkpoint"] == str(ckpt)
    assert rows[0]["constraint"] == "prefix=5tokens"  # [BOS] t h e ' '

    template = text_run / "template.txt"
    template.write_text("\nthe [MASK][MASK][MASK] sat.\n")
    infill = text_run / "i.txt"
    args = ["sample", "--checkpoint", str(ckpt), "--out", str(infill), "--infill", str(template)]
    assert cli.main([*args, "--steps", "4"]) == 0
    for line in infill.read_text().splitlines():
        assert line.startswith("the ") and line.endswith(" sat.") and len(line) == 12

    capsys.readouterr()
    scores = []
    for seed in ("0", "1"):
        argv = ["eval", "--checkpoint", str(ckpt), "--file", str(corpus), "--json"]
        assert cli.main([*argv, "--seed", seed, "--num-windows", "5"]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[0]["windows"] == 5 and scores[0]["length"] == 32
    assert scores[0]["windows_sha256"] == scores[1]["windows_sha256"]
    assert scores[0]["nelbo"] > 0
    assert scores[0]["source"] == str(corpus.resolve())


@pytest.mark.parametrize("alias", ["--fasta", "--text"])
def test_eval_file_aliases_score_the_same_windows(text_run, corpus, capsys, alias):
    ckpt = str(text_run / "checkpoints" / "last.ckpt")
    runs = []
    for option in ("--file", alias):
        capsys.readouterr()
        argv = ["eval", "--checkpoint", ckpt, option, str(corpus), "--json", "--num-windows", "3"]
        assert cli.main(argv) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0] == runs[1] and runs[0]["source"] == str(corpus.resolve())
    assert runs[0]["tokens"] == sum(len(line) + 2 for line in SENTENCES[:3])  # [BOS] line [EOS]


def test_eval_help_names_the_aliases(capsys):
    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--file FILE, --fasta FILE, --text FILE" in help_text
    assert "--fasta and --text are aliases of --file" in help_text


def test_a_run_that_leaves_the_window_to_its_data_module_samples_and_scores_at_it(
    toy_plugin, corpus, tmp_path, capsys
):
    """The page's experiment as printed names no max_length (`data: {name: lines, path:
    my.txt}`): the run trains on the data module's default window, and `genodiff sample` and
    `eval` default to that window. Was: they took 1024 tokens (no data.max_length saved)."""
    window = chars.LineData(str(corpus)).max_length  # the class's own default
    config = tmp_path / "chars.yaml"
    config.write_text(
        "defaults: [{model: caduceus_tiny}, {objective: mdlm}, {trainer: cpu}, _self_]\n"
        f"name: chars\ntokenizer: {{name: chars}}\ndata: {{name: lines, path: {corpus}}}\n"
    )
    trainer = ["trainer.max_steps=2", "trainer.val_check_interval=2",
               "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false"]  # fmt: skip
    run = genodiff.train(str(config), [*trainer, "evaluate_test=false"], output_dir=tmp_path / "r")
    ckpt = str(run / "checkpoints" / "last.ckpt")
    out = tmp_path / "s.jsonl"
    capsys.readouterr()
    assert cli.main(["sample", "--checkpoint", ckpt, "--out", str(out), "--steps", "2"]) == 0
    assert f"samples of {window} tokens" in capsys.readouterr().out
    capsys.readouterr()
    argv = ["eval", "--checkpoint", ckpt, "--file", str(corpus), "--num-windows", "2", "--json"]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["length"] == window


def test_domain_mismatches_are_clear_errors(text_run, corpus, capsys):
    ckpt = str(text_run / "checkpoints" / "last.ckpt")
    assert cli.main(["eval", "--checkpoint", ckpt, "--file", str(text_run / "none.txt")]) == 2
    missing = f"data file {text_run / 'none.txt'} not found (--file)"
    assert capsys.readouterr().err.strip().endswith(missing)
    out = text_run / "x.fa"
    assert cli.main(["sample", "--checkpoint", ckpt, "--out", str(out), "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "FASTA holds dna samples, these are chars samples" in err and not out.exists()
    # A DNA checkpoint does not write the toy domain's format.
    with pytest.raises(ValueError, match="name<TAB>text holds chars samples, these are dna"):
        write_samples(torch.tensor([[7, 8]]), text_run / "d.tsv", SAMPLING_RUN, DNATokenizer())
    args = ["sample", "--checkpoint", ckpt, "--out", str(text_run / "y.csv"), "--steps", "2"]
    assert cli.main(args) == 2
    assert "unknown output format '.csv'" in capsys.readouterr().err
    # A DNA tokenizer cannot drive the toy data module.
    config = text_run.parent / "configs" / "toy_text.yaml"
    assert cli.main(["train", str(config), "tokenizer.name=dna", f"output_dir={text_run}2"]) == 2
    assert "reads chars but the tokenizer 'dna' is for dna" in capsys.readouterr().err


def test_time_conditioning_on_a_backbone_that_ignores_sigma_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", DEMO, *TINY, "objective.time_conditioning=true", f"output_dir={out}"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "objective.time_conditioning=true, but the Caduceus backbone is not" in err
    assert not out.exists()  # refused before anything was written


def test_builtin_backbones_declare_their_capabilities():
    ph = build("caduceus", d_model=8, n_layer=1, vocab_size=12)
    cmap = DNATokenizer().complement_map
    ps = build("caduceus", d_model=8, n_layer=1, vocab_size=12, rcps=True, complement_map=cmap)
    mamba = build("mamba", d_model=8, n_layer=1, vocab_size=12)
    hyena = build("hyena", d_model=8, n_layer=1, vocab_size=12, layer={"l_max": 16})
    assert ph.capabilities == Capabilities(vocab_size=16, hidden_size=8)  # 12 padded to 16
    assert ps.capabilities == Capabilities(vocab_size=16, hidden_size=16, rc_equivariant=True)
    assert mamba.capabilities == Capabilities(
        vocab_size=16, hidden_size=8, causal=True, recurrent_step=True
    )
    assert hyena.capabilities == Capabilities(
        vocab_size=16, hidden_size=8, causal=True, max_length=16, max_length_key="layer.l_max"
    )  # reads at most its filter length, layer.l_max
    with pytest.raises(
        TypeError, match=r"Linear declares no capabilities: .*Capabilities\(vocab_size=V"
    ):
        capabilities_of(torch.nn.Linear(2, 2))  # nothing declared
    # The AR objective trusts the declaration: a bidirectional model is refused.
    with pytest.raises(ValueError, match="does not declare itself causal"):
        AR(bos_id=2, pad_id=4, sample_ids=(7, 8, 9, 10)).loss(ph, torch.full((1, 4), 7))


def test_ids_and_vocabulary_come_from_the_tokenizer():
    dna = DNATokenizer()
    filled = with_tokenizer_fields("objective", MDLM, {"name": "mdlm"}, dna)
    assert filled == {"name": "mdlm", "mask_id": 3, "pad_id": 4, "sample_ids": [7, 8, 9, 10]}
    same = with_tokenizer_fields("objective", MDLM, {"mask_id": 3, "sample_ids": None}, dna)
    assert same["mask_id"] == 3 and same["sample_ids"] == [7, 8, 9, 10]
    with pytest.raises(ConfigError, match=r"objective.mask_id=5 disagrees .* \(mask_id = 3\)"):
        with_tokenizer_fields("objective", MDLM, {"mask_id": 5}, dna)
    model_cls = registry.get("backbone", "caduceus")
    # A=7 <-> T=10, C=8 <-> G=9, every other id (specials, N, vocabulary padding) itself
    dna_complement = [0, 1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 11, 12, 13, 14, 15]
    assert with_tokenizer_fields("model", model_cls, {}, dna) == {
        "vocab_size": 12,
        "complement_map": dna_complement,
    }
    with pytest.raises(ConfigError, match="model.complement_map=.* disagrees with the dna"):
        with_tokenizer_fields("model", model_cls, {"complement_map": list(range(16))}, dna)
    assert with_tokenizer_fields("model", model_cls, {"vocab_size": 16}, dna)["vocab_size"] == 16
    with pytest.raises(ConfigError, match="vocab_size=8 is smaller than the dna tokenizer's 12"):
        with_tokenizer_fields("model", model_cls, {"vocab_size": 8}, dna)


class Uniform(torch.nn.Module):
    """Equal logits over a 16-column vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, sigma=None):
        return torch.zeros(*input_ids.shape, 16) + 0 * self.dummy


@pytest.mark.parametrize(
    "objective", [MDLM(3, 4, sample_ids=[7, 10]), SEDD(3, 4, sample_ids=[7, 10])]
)
def test_samplers_draw_only_the_tokenizer_sample_ids(objective):
    request = SampleRequest(num_samples=20, length=16, steps=8)
    out = objective.sample(Uniform(), request, torch.Generator().manual_seed(0))
    assert set(out.unique().tolist()) == {7, 10}  # uniform model: both drawn, nothing else
    free = MDLM(3, 4).sample(Uniform(), request, torch.Generator().manual_seed(0))
    assert len(set(free.unique().tolist()) - {7, 10}) > 5  # without sample_ids: any non-mask id
    assert 3 not in free.unique().tolist()


def test_tokenizer_registry_records_and_folders(tmp_path, toy_plugin):
    assert isinstance(build_tokenizer(None), DNATokenizer)
    toy = build_tokenizer({"name": "chars", "lowercase": False})
    record = tokenizer_record(toy)
    assert record == {"name": "chars", "state": {"lowercase": False}}
    again = tokenizer_from_record(json.loads(json.dumps(record)))
    assert isinstance(again, CharTokenizer) and again.lowercase is False
    toy.save(tmp_path)
    assert isinstance(load_tokenizer(tmp_path), CharTokenizer)
    assert load_tokenizer(tmp_path / "nothing") is None
    with pytest.raises(KeyError, match="install it"):
        tokenizer_from_record({"name": "no_such_tokenizer", "state": {}})


def test_a_broken_plugin_names_itself_and_does_not_break_builtins(monkeypatch):
    broken = EntryPoint("broken", "no_such_module:Thing", "genodiff.backbones")
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    assert registry.get("backbone", "caduceus").__name__ == "Caduceus"  # not imported
    with pytest.raises(ImportError, match="backbone plugin 'broken' .* failed to load"):
        registry.get("backbone", "broken")


def test_window_digest_keeps_large_ids_apart():
    # int8 bytes would make ids 300 and 44 (300 mod 256) the same data; int32 keeps them apart.
    a = [{"input_ids": torch.tensor([5, 300, 29_000])}]
    b = [{"input_ids": torch.tensor([5, 44, 29_000])}]
    assert window_digest(a, [0], ["w"]) != window_digest(b, [0], ["w"])
    assert id_dtype(12) == np.uint8 and id_dtype(30_522) == np.uint16
    assert id_dtype(70_000) == np.uint32


SAMPLING_RUN = SamplingRun(checkpoint="c.ckpt", sampler="cached", steps=8, seed=5)


def test_sample_writers(tmp_path):
    samples = torch.tensor([[7, 8, 9, 10, 4], [10, 10, 3, 7, 7]])
    run = SAMPLING_RUN
    dna = DNATokenizer()
    fasta = write_samples(samples, tmp_path / "s.fa", run, dna).read_text().split("\n")
    assert fasta[:2] == [f">sample_0_seed5 {run.describe()}", "ACGTN"] and fasta[3] == "TTNAA"
    txt = write_samples(samples, tmp_path / "s.txt", run, dna).read_text()
    assert txt == "ACGTN\nTTNAA\n"
    rows = [json.loads(x) for x in write_samples(samples, tmp_path / "s.jsonl", run, dna).open()]
    assert rows[1] == {"id": "sample_1_seed5", "text": "TTNAA", "checkpoint": "c.ckpt",
                       "sampler": "cached", "steps": 8, "seed": 5, "temperature": 1.0,
                       "top_p": 1.0, "block": None, "stride": None, "constraint": None,
                       "draws": "per-sequence-v1"}  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.fa", "s.jsonl", "s.txt"]


class TinyPluginModel(torch.nn.Module):
    """A plugin backbone with its own folder layout: config.json {"model_type": "tiny"}."""

    def __init__(self, vocab_size: int, width: int = 4) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab_size, width)
        self.capabilities = Capabilities(vocab_size=vocab_size, hidden_size=width)

    def forward(self, input_ids, sigma=None, inputs_embeds=None):
        return self.table(input_ids) @ self.table.weight.T


TinyPluginModel.checkpoint_layouts = (
    CheckpointLayout(
        name="tiny",
        matches=lambda c: c.get("model_type") == "tiny",
        read_config=lambda c: {"vocab_size": c["vocab"], "width": c["width"]},
        write_config=lambda m, cfg: {
            "model_type": "tiny",
            "vocab": cfg["vocab_size"],
            "width": cfg["width"],
        },  # fmt: skip
        to_genodiff=lambda name: name.removeprefix("model."),
        to_reference=lambda name: "model." + name,
    ),
)


def test_plugin_backbones_bring_their_own_checkpoint_layout(monkeypatch, tmp_path):
    entry = EntryPoint("tiny", "tests.test_domain_neutral_core:TinyPluginModel", "g")
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [entry] if group == "genodiff.backbones" else []
    )
    model = build("tiny", vocab_size=10, width=3)
    folder = save_pretrained(model, tmp_path / "tiny")
    config = json.loads((folder / "config.json").read_text())
    assert config == {"model_type": "tiny", "vocab": 10, "width": 3}
    with open(folder / "model.safetensors", "rb") as handle:
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    assert "model.table.weight" in header  # stored under the reference name
    loaded = load_pretrained(folder)
    assert isinstance(loaded, TinyPluginModel)
    assert torch.equal(loaded.table.weight, model.table.weight)
    assert detect_layout(config)[0] == "tiny"
    with pytest.raises(CheckpointError, match="matches no known layout .*tiny"):
        detect_layout({"model_type": "unknown"})


def test_the_documented_backbone_plugin_trains_on_dna(tmp_path, monkeypatch):
    """The page's backbone plugin, registered under the entry point its pyproject.toml lists,
    and its two shell lines run as printed (test sizes given last) in a repository-shaped
    folder where the quick start's run is already (outputs/demo). Was: the printed command
    trained into outputs/demo, which was refused (it holds that run)."""
    module = types.ModuleType("my_plugin.model")
    exec(plugins_doc_source("# my_plugin/model.py"), module.__dict__)
    monkeypatch.setitem(sys.modules, "my_plugin.model", module)
    registration = plugins_doc_source('[project.entry-points."genodiff.backbones"]')
    (entry,) = entry_points_of(registration)["genodiff.backbones"]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [entry] if group == "genodiff.backbones" else []
    )
    monkeypatch.delitem(registry._REGISTRIES["backbone"], entry.name, raising=False)
    shutil.copytree(ROOT / "configs", tmp_path / "configs")  # a checkout: configs/, data/
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "outputs" / "demo" / "checkpoints").mkdir(parents=True)
    (tmp_path / "outputs" / "demo" / "checkpoints" / "last.ckpt").touch()  # the quick start's
    monkeypatch.chdir(tmp_path)

    install, train = doc_commands.commands(plugins_doc_source("pip install -e my_plugin"))
    (writing,) = [part for part in install.split("&&") if part.strip().startswith("printf")]
    printf, text, redirect, model_file = shlex.split(writing)
    assert (printf, redirect) == ("printf", ">")
    Path(model_file).write_text(text.replace("\\n", "\n"))  # printf's \n
    tiny = [o for o in TINY if not o.startswith("model=")] + ["model.d_model=16"]
    doc_commands.run([train], lambda words: tiny)

    (run,) = [p.parent.parent for p in Path("outputs").glob("*/checkpoints/last.ckpt")
              if p.parts[1] != "demo"]  # fmt: skip
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["config"]["model"] == {
        "name": "bigru",
        "d_model": 16,
        "vocab_size": 12,
    }
    assert any(k.startswith("backbone.rnn.") for k in ckpt["state_dict"])


PLUGIN_CONFIG_FOLDER = None  # set by the test below: what the configs entry point names


def test_plugin_configs_are_found_from_any_folder(tmp_path, monkeypatch):
    folder = tmp_path / "plugin" / "configs"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "caduceus_plugin.yaml").write_text(
        "name: caduceus\nd_model: 24\nn_layer: 1\n"
    )
    (folder / "plugin_demo.yaml").write_text(
        "defaults: [{model: caduceus_plugin}, {objective: mdlm}, {data: demo}, {trainer: cpu},"
        " _self_]\nname: plugin_demo\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PLUGIN_CONFIG_FOLDER", str(folder))
    entry = EntryPoint("toy", f"{__name__}:PLUGIN_CONFIG_FOLDER", "genodiff.configs")
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [entry] if group == "genodiff.configs" else []
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for name in ("plugin_demo", "configs/plugin_demo.yaml"):
        # the plugin's experiment, its model group and the core's objective/data/trainer groups
        cfg = load_config(name)
        assert (cfg.name, cfg.model.d_model, cfg.objective.name) == ("plugin_demo", 24, "mdlm")
        assert cfg.trainer.accelerator == "cpu" and cfg.data.name == "fasta"
    # a core experiment picks the plugin's group
    assert load_config("demo", ["model=caduceus_plugin"]).model.d_model == 24
    with pytest.raises(
        ConfigError, match="model=caduceus_nowhere: no such option.*caduceus_plugin"
    ):
        load_config("demo", ["model=caduceus_nowhere"])  # the options listed include the plugin's


def test_a_broken_configs_entry_names_itself_and_leaves_the_core_configs_working(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sys.modules[__name__], "PLUGIN_CONFIG_FOLDER", str(tmp_path / "none"))
    entries = [
        EntryPoint("broken", f"{__name__}:PLUGIN_CONFIG_FOLDER", "genodiff.configs"),
        EntryPoint("gone", "genodiff_no_such_plugin:CONFIGS", "genodiff.configs"),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: entries)
    with pytest.warns(UserWarning) as caught:
        assert load_config("demo").name == "demo"
    messages = " ".join(str(w.message) for w in caught)
    assert "configs plugin 'broken'" in messages and "not a folder" in messages
    assert "configs plugin 'gone'" in messages and "failed to load" in messages


def test_the_core_sample_files_name_no_domains_format():
    """FASTA is the DNA domain's (genodiff/domains/fasta.py): the core's sample-file modules
    reach a domain's formats only through ``Domain.sample_formats`` and ``SampleFormat``'s
    fields, never by name."""
    import ast

    for module in ("sample_formats.py", "sample_files.py"):
        tree = ast.parse((ROOT / "genodiff" / module).read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not used & {"FASTA", "fasta_template", "header_label", "LABEL_WORD"}, module


TRACED_TEST = """
from importlib.metadata import EntryPoint

from genodiff import registry


def test_looks_up_a_plugin(monkeypatch):
    entry = EntryPoint("fake", "genodiff_text.fake:Domain", "genodiff.domains")
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry])
    assert registry._entry_points("domain") == [entry]


def test_looks_up_nothing():
    assert registry.get("backbone", "caduceus").__name__ == "Caduceus"
"""


def test_the_plugin_lookup_trace_names_the_tests_that_look_a_plugin_up(tmp_path):
    # tests/trace_plugin_lookups.py, which drew conftest.py's INSTALLED_PLUGINS_MODULES
    (tmp_path / "test_traced.py").write_text(TRACED_TEST)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.trace_plugin_lookups"]
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider", "test_traced.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    lines = (tmp_path / "plugin_lookups.txt").read_text().splitlines()
    assert lines == ["test_traced.py::test_looks_up_a_plugin\tentry points: domain"]


def test_every_module_marked_as_depending_on_installed_plugins_exists():
    # conftest.py marks by file name: a renamed module would leave CI's plugin pass
    # silently
    from conftest import INSTALLED_PLUGINS_MODULES

    modules = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert not INSTALLED_PLUGINS_MODULES - modules, INSTALLED_PLUGINS_MODULES - modules

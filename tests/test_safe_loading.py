"""No code in a checkpoint runs when genodiff loads it: every torch file is read by
``genodiff.checkpoints.io.read_checkpoint_file`` with ``weights_only`` and a named allow-list.

The files here hold a real payload, an object whose unpickling runs a shell command
(``os.system``) that creates a marker file (a plain ``torch.load`` without ``weights_only``
creates it). Every loader
refuses them in one line naming the file, the global and the opt-in, and the marker never
appears: a HyenaDNA-style folder (``load_pretrained``, ``init_backbones``, ``init_from=``), a Hub
id, a .ckpt given to each loader. A HyenaDNA Lightning checkpoint whose hyper-parameters are its
Hydra config (OmegaConf containers) loads by default; a file that needs another class loads
with ``stub_unknown_classes=True`` only, that class read as an inert placeholder; with it, the
payload stays inert too."""

from __future__ import annotations

import argparse
import ast
import json
import os
import pickle
from pathlib import Path

import lightning as L
import pytest
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from genodiff import cli
from genodiff.backbones import build
from genodiff.checkpoints import (
    CheckpointError,
    UnsafePickleError,
    export_model,
    init_backbones,
    inspect_checkpoint,
    load_model,
    load_pretrained,
    open_checkpoint,
    read_checkpoint_file,
)
from genodiff.checkpoints.io import DamagedFileError, Placeholder, loadable_checkpoint
from genodiff.checkpoints.lightning_io import AtomicCheckpointIO
from genodiff.checkpoints.run_folder import check_resume, resume_checkpoint
from genodiff.classifiers import load_classifier
from genodiff.finetuning.trained import load_finetuned_classifier
from tests import test_hub
from tests.test_cli import DEMO, TINY
from tests.test_hub import write_hub_cache
from tests.test_trusted_weights import invert_bytes, tensor_data_offset

offline_cache = test_hub.offline_cache  # a Hub cache of the test's own, HF_HUB_OFFLINE=1

SYSTEM = f"{os.system.__module__}.{os.system.__name__}"  # how a pickle names os.system
HYENA = dict(name="hyena", d_model=16, n_layer=2, vocab_size=12, d_inner=64, layer={"l_max": 64})
# The config.json of HyenaDNA's releases, for the model above.
HYENADNA_CONFIG = {
    "d_model": 16, "n_layer": 2, "d_inner": 64, "vocab_size": 12, "resid_dropout": 0.0,
    "embed_dropout": 0.1, "residual_in_fp32": False, "pad_vocab_size_multiple": 8,
    "layer": {"_name_": "hyena", "emb_dim": 5, "filter_order": 64, "local_order": 3,
              "l_max": 64, "modulate": True, "w": 10, "lr": 6e-4, "wd": 0.0, "lr_pos_emb": 0.0},
}  # fmt: skip


class RunsACommand:
    """Unpickling it runs ``command`` in a shell, as a malicious checkpoint's payload does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture
def payload(tmp_path) -> tuple[RunsACommand, Path]:
    """A payload that creates a marker file, and the marker (absent)."""
    marker = tmp_path / "pwned"
    return RunsACommand(f"touch {marker}"), marker


def hyena(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return build(**HYENA).eval()


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def hyenadna_folder(folder: Path, model: nn.Module, weights_file: str, **extra) -> Path:
    """config.json + the weights of ``model`` as a HyenaDNA release stores them: a Lightning
    checkpoint ``weights.ckpt`` (keys under ``model.``), or ``pytorch_model.bin`` (the tensors
    by name); ``extra`` entries beside them."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(HYENADNA_CONFIG))
    state = model.state_dict()
    if weights_file == "weights.ckpt":
        content = {"state_dict": {f"model.{k}": t for k, t in state.items()}, "epoch": 1, **extra}
    else:
        content = {**state, **extra}
    torch.save(content, folder / weights_file)
    return folder


def assert_refused(
    err: pytest.ExceptionInfo, path: Path, opt_in: str = "stub_unknown_classes=True"
) -> None:
    message = str(err.value)
    assert "\n" not in message, message
    assert str(path) in message and SYSTEM in message, message
    assert "nothing was run" in message, message
    assert f"{opt_in} reads them as inert placeholders" in message, message


def malicious_ckpt(path: Path, payload: RunsACommand) -> Path:
    """A torch file shaped like a genodiff training checkpoint, with the payload among the
    callback states."""
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "state_dict": {"backbone.w": torch.zeros(3)},
        "hyper_parameters": {"config": {}},
        "callbacks": {"ModelCheckpoint": payload},
        "global_step": 1,
    }
    torch.save(content, path)
    return path


# ----------------------------------------------------------------------------- the reader


def test_the_payload_runs_when_unpickled(payload):
    command, marker = payload
    pickle.loads(pickle.dumps(command))  # plain pickle, not genodiff: the payload is real
    assert marker.exists()  # so the refusals below matter


class EvaluatesCode:
    """Unpickling it evaluates Python source (builtins.eval: a module torch does not block)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self):
        return (eval, (self.source,))


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_placeholders_keep_a_payload_inert_and_the_weights(tmp_path, zip_format):
    marker = tmp_path / "pwned"
    evil = EvaluatesCode(f"open({str(marker)!r}, 'w').close()")
    path = tmp_path / "evil.ckpt"
    content = {"state_dict": {"backbone.w": torch.arange(3.0)}, "callbacks": {"cb": evil}}
    torch.save(content, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(UnsafePickleError, match=r"needs builtins\.eval to be unpickled"):
        read_checkpoint_file(path)
    read = read_checkpoint_file(path, stub_unknown_classes=True)
    assert not marker.exists()
    assert torch.equal(read["state_dict"]["backbone.w"], torch.arange(3.0))
    stub = read["callbacks"]["cb"]
    assert isinstance(stub, Placeholder) and stub.qualified_name == "builtins.eval"
    assert stub.args == (evil.source,)  # what the call would have been given
    pickle.loads(pickle.dumps(evil))  # plain pickle: the payload is real
    assert marker.exists()


class NamedList(list):
    """A list subclass: the weights_only unpickler fills real lists only."""


def test_what_placeholders_cannot_stand_for_is_one_clear_error(tmp_path):
    path = tmp_path / "odd.ckpt"
    torch.save({"w": torch.zeros(2), "x": NamedList([1, 2])}, path)
    with pytest.raises(ValueError) as err:
        read_checkpoint_file(path, stub_unknown_classes=True)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert "placeholders for tests.test_safe_loading.NamedList" in message
    assert "Can only extend lists" in message


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_os_system_is_refused_even_with_placeholders(tmp_path, payload, zip_format):
    command, marker = payload
    path = tmp_path / "evil.ckpt"
    torch.save({"cb": command}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(ValueError, match=rf"{path}.*names {SYSTEM}.*refused even with placeh"):
        read_checkpoint_file(path, stub_unknown_classes=True)
    assert not marker.exists()


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_the_reader_refuses_the_payload_in_one_line(tmp_path, payload, zip_format):
    command, marker = payload
    path = tmp_path / "evil.ckpt"
    torch.save({"hyper_parameters": command}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(UnsafePickleError) as err:
        read_checkpoint_file(path)
    assert_refused(err, path)
    assert not marker.exists()
    assert loadable_checkpoint(path) is None  # so a fine-tuning fold does not resume it


# ----------------------------------------------------------------------------- folders


@pytest.mark.parametrize("weights_file", ["weights.ckpt", "pytorch_model.bin"])
def test_a_folder_whose_weights_run_a_command_is_refused(tmp_path, payload, weights_file):
    command, marker = payload
    folder = hyenadna_folder(tmp_path / "hyenadna", hyena(), weights_file, payload=command)
    for load in (load_pretrained, lambda f: init_backbones([hyena(1)], f)):
        with pytest.raises(UnsafePickleError) as err:
            load(folder)
        assert_refused(err, folder / weights_file)
    assert not marker.exists()


def test_init_from_such_a_folder_stops_train_in_one_line(tmp_path, payload, capsys):
    command, marker = payload
    folder = hyenadna_folder(tmp_path / "hyenadna", hyena(), "weights.ckpt", payload=command)
    out = tmp_path / "run"
    args = ["train", DEMO, *TINY, "trainer.max_steps=1", f"init_from={folder}"]
    assert cli.main([*args, f"output_dir={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(folder / "weights.ckpt") in err and SYSTEM in err, err
    assert not marker.exists()
    assert not (out / "checkpoints").exists()


def test_hub_ids_of_such_files_are_refused(tmp_path, payload, offline_cache):
    command, marker = payload
    folder = hyenadna_folder(tmp_path / "hyenadna", hyena(), "weights.ckpt", payload=command)
    run = tmp_path / "run"
    malicious_ckpt(run / "last.ckpt", command)
    write_hub_cache(offline_cache, "test-org/hyenadna", {"main": folder})
    write_hub_cache(offline_cache, "test-org/run", {"main": run})
    for load in (load_pretrained, lambda ref: init_backbones([hyena(1)], ref)):
        with pytest.raises(UnsafePickleError) as err:
            load("test-org/hyenadna")
        assert_refused(err, Path("weights.ckpt"))  # in the Hub cache's snapshot folder
    for load in (load_model, load_classifier, load_finetuned_classifier):
        with pytest.raises(UnsafePickleError) as err:
            load("test-org/run")
        assert_refused(err, Path("last.ckpt"))
    assert not marker.exists()


# ----------------------------------------------------------------------------- .ckpt files


# The loaders of each kind of checkpoint take a run's folder as well as the file.
FOLDER_LOADERS = {
    "load_model": load_model,
    "load_classifier": load_classifier,
    "load_finetuned_classifier": load_finetuned_classifier,
    "open_checkpoint": open_checkpoint,
}
FILE_LOADERS = {
    "inspect_checkpoint": inspect_checkpoint,
    "export_model": lambda path: export_model(path, path.parent / "exported"),
}


@pytest.mark.parametrize("loader", sorted(FOLDER_LOADERS.keys() | FILE_LOADERS.keys()))
def test_every_loader_refuses_a_ckpt_that_runs_a_command(tmp_path, payload, loader):
    command, marker = payload
    path = malicious_ckpt(tmp_path / "run" / "checkpoints" / "last.ckpt", command)
    load = FOLDER_LOADERS.get(loader) or FILE_LOADERS[loader]
    references = [path, tmp_path / "run"] if loader in FOLDER_LOADERS else [path]
    for reference in references:
        with pytest.raises(UnsafePickleError) as err:
            load(reference)
        assert_refused(err, path)
    assert not marker.exists()
    assert not (path.parent / "exported").exists()


def test_genodiff_info_refuses_it_in_one_line(tmp_path, payload, capsys):
    command, marker = payload
    path = malicious_ckpt(tmp_path / "evil.ckpt", command)
    assert cli.main(["info", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("genodiff info: error:") and "\n" not in err
    assert str(path) in err and SYSTEM in err
    # the opt-in a user can run: the library's keyword, not a flag no command has
    assert "no command reads such a file; from Python, genodiff.checkpoints." in err
    assert "load_pretrained(FOLDER, stub_unknown_classes=True)" in err
    assert not marker.exists()


def test_a_resume_reads_through_the_crc_check(tmp_path):
    model = {"name": "caduceus", "d_model": 16, "n_layer": 2}  # a complete section, as trained
    config = {"model": model, "trainer": {"max_steps": 10}}
    path = tmp_path / "last.ckpt"
    content = {
        "state_dict": {"w": torch.arange(4096, dtype=torch.float32)},
        "hyper_parameters": {"config": config},
        "global_step": 3,
    }
    torch.save(content, path)
    resumed = resume_checkpoint(str(path), tmp_path)
    assert check_resume(config, resumed) == []  # intact: nothing changed, steps left
    invert_bytes(path, tensor_data_offset(path) + 128)  # a tensor's bytes, changed on disk
    assert torch.load(path, weights_only=True)["global_step"] == 3  # torch does not notice
    with pytest.raises(ValueError, match=rf"damaged .*{path} is damaged: its bytes changed"):
        resume_checkpoint(str(path), tmp_path)


# ----------------------------------------------------------------------------- allowed files


class HyenaDNAModule(L.LightningModule):
    """As HyenaDNA's training module: the model under ``model``, its Hydra config saved as the
    hyper-parameters (Lightning stores the OmegaConf container itself, and its type)."""

    def __init__(self, config: DictConfig) -> None:
        super().__init__()
        self.save_hyperparameters(config)
        self.model = hyena()


def test_a_hyenadna_lightning_checkpoint_with_its_omegaconf_config_loads_by_default(tmp_path):
    config = OmegaConf.create(
        {
            "model": {"_name_": "lm", "d_model": 16, "n_layer": 2, "layer": {"l_max": 64}},
            "train": {"seed": 2222, "interval": "step", "monitor": "val/loss"},
            "optimizer": {"_name_": "adamw", "lr": 6e-4, "betas": [0.9, 0.999]},
            "loader": {"batch_size": 32, "drop_last": True, "length": None},
        }
    )
    module = HyenaDNAModule(config)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.strategy.connect(module)
    folder = tmp_path / "hyenadna"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(HYENADNA_CONFIG))
    weights = folder / "weights.ckpt"
    trainer.save_checkpoint(weights)
    # The file needs OmegaConf's classes, which torch alone refuses ...
    needed = torch.serialization.get_unsafe_globals_in_checkpoint(weights)
    assert "omegaconf.dictconfig.DictConfig" in needed and "typing.Any" in needed
    with pytest.raises(pickle.UnpicklingError):
        torch.load(weights, weights_only=True)
    # ... and the allow-list admits, so it loads with the default (safe) setting.
    assert read_checkpoint_file(weights)["hyper_parameters"] == config
    assert same_weights(load_pretrained(folder), module.model)
    target = hyena(seed=1)
    assert not same_weights(target, module.model)
    init_backbones([target], folder)
    assert same_weights(target, module.model)


def test_a_file_that_needs_another_class_loads_only_with_placeholders(tmp_path):
    # Lightning 1.x runs often stored argparse hyper-parameters: harmless, not allow-listed.
    model = hyena()
    hyper = argparse.Namespace(lr=6e-4, d_model=16)
    folder = hyenadna_folder(tmp_path / "hyenadna", model, "weights.ckpt", hyper_parameters=hyper)
    with pytest.raises(UnsafePickleError) as err:
        load_pretrained(folder)
    message = str(err.value)
    assert "argparse.Namespace" in message and str(folder / "weights.ckpt") in message
    assert "stub_unknown_classes=True" in message and "\n" not in message
    assert same_weights(load_pretrained(folder, stub_unknown_classes=True), model)
    target = hyena(seed=1)
    with pytest.raises(UnsafePickleError):
        init_backbones([target], folder)
    init_backbones([target], folder, stub_unknown_classes=True)
    assert same_weights(target, model)
    # the Namespace is read as data: its fields kept, argparse's code not run
    hyper = read_checkpoint_file(folder / "weights.ckpt", stub_unknown_classes=True)
    hyper = hyper["hyper_parameters"]
    assert hyper.qualified_name == "argparse.Namespace"
    assert hyper.state == {"lr": 6e-4, "d_model": 16}


def test_a_weights_ckpt_without_a_state_dict_is_one_clear_error(tmp_path):
    folder = tmp_path / "hyenadna"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(HYENADNA_CONFIG))
    torch.save({"model": hyena().state_dict()}, folder / "weights.ckpt")  # not Lightning's
    with pytest.raises(CheckpointError) as err:
        load_pretrained(folder)
    assert str(err.value) == (
        f"{folder / 'weights.ckpt'} holds no state_dict: it is not a Lightning checkpoint"
    )


# ----------------------------------------------------------------------------- Lightning's reads


class Line(L.LightningModule):
    """The smallest module Lightning trains: one linear layer on zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)

    def training_step(self, batch: torch.Tensor, index: int) -> torch.Tensor:
        return self.layer(batch).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(torch.zeros(4, 2), batch_size=2)


def line_trainer(folder: Path, max_steps: int) -> L.Trainer:
    """A Trainer with the CheckpointIO genodiff gives its own (genodiff.training.trainer)."""
    return L.Trainer(
        default_root_dir=folder,
        max_steps=max_steps,
        plugins=[AtomicCheckpointIO()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def test_lightnings_resume_refuses_a_payload_even_with_weights_only_forced_off(
    tmp_path, payload, monkeypatch
):
    command, marker = payload
    path = tmp_path / "evil.ckpt"
    trainer = line_trainer(tmp_path, 1)
    trainer.fit(Line())
    trainer.save_checkpoint(path)
    content = torch.load(path, weights_only=True)
    torch.save({**content, "callbacks": {"ModelCheckpoint": command}}, path)
    # torch.load without weights_only=True, as Lightning's own read calls it, would run it
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(UnsafePickleError) as err:
        line_trainer(tmp_path, 2).fit(Line(), ckpt_path=path)
    assert_refused(err, path)
    assert not marker.exists()


def test_lightnings_resume_checks_the_crc(tmp_path):
    path = tmp_path / "last.ckpt"
    trainer = line_trainer(tmp_path, 1)
    trainer.fit(Line())
    trainer.save_checkpoint(path)
    resumed = line_trainer(tmp_path, 2)
    resumed.fit(Line(), ckpt_path=path)  # intact: resumed
    assert resumed.global_step == 2
    invert_bytes(path, tensor_data_offset(path), count=4)  # a weight, changed on disk
    assert torch.load(path, weights_only=True)["global_step"] == 1  # torch does not notice
    with pytest.raises(DamagedFileError, match=rf"{path} is damaged"):
        line_trainer(tmp_path, 2).fit(Line(), ckpt_path=path)


def test_a_handed_over_checkpoint_is_read_by_lightning_once(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    trainer = line_trainer(tmp_path, 1)
    trainer.fit(Line())
    trainer.save_checkpoint(path)
    checks = loadable_checkpoint(path)  # what genodiff's checks read
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a[0]) or real_load(*a, **k))
    resumed = line_trainer(tmp_path, 2)
    resumed.strategy.checkpoint_io.hand_over(path, checks)
    resumed.fit(Line(), ckpt_path=path)
    assert loads == [] and resumed.global_step == 2  # resumed from what was handed over
    line_trainer(tmp_path, 2).fit(Line(), ckpt_path=path)  # nothing handed over: read
    assert [Path(p) for p in loads] == [path]


def test_a_resumed_genodiff_run_reads_its_checkpoint_once(tmp_path, monkeypatch):
    out = tmp_path / "run"
    quiet = [*TINY, "samples.num_samples=0", "evaluate_test=false", f"output_dir={out}"]
    assert cli.main(["train", DEMO, *quiet, "trainer.max_steps=2"]) == 0
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a[0]) or real_load(*a, **k))
    assert cli.main(["train", DEMO, *quiet, "trainer.max_steps=4", "ckpt_path=last"]) == 0
    # the checks (resume_checkpoint, check_resume) and Lightning's restore share one read
    assert [Path(p) for p in loads] == [(out / "checkpoints" / "last.ckpt").resolve()]
    assert read_checkpoint_file(out / "checkpoints" / "last.ckpt")["global_step"] == 4


def test_a_resume_from_a_file_the_reader_refuses_is_one_line(tmp_path, payload, capsys):
    command, marker = payload
    path = malicious_ckpt(tmp_path / "evil.ckpt", command)
    out = tmp_path / "run"
    args = ["train", DEMO, *TINY, f"output_dir={out}", f"ckpt_path={path}"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("genodiff train: error:") and "\n" not in err, err
    assert str(path) in err and SYSTEM in err and "nothing was run" in err
    assert not marker.exists() and not out.exists()


# Where the one reader lives: no other module of genodiff or its plugins calls torch.load.
READER = Path(__file__).resolve().parents[1] / "genodiff" / "checkpoints" / "io.py"


def torch_load_calls(path: Path) -> list[int]:
    """The lines of ``path`` that call ``torch.load`` (the attribute, however imported) or a
    ``load`` imported from torch."""
    return [node.lineno for node in torch_load_nodes(path)]


def torch_load_nodes(path: Path) -> list[ast.Call]:
    """The calls of ``torch_load_calls``, as syntax nodes."""
    tree = ast.parse(path.read_text(), str(path))
    from_torch = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.serialization")
        for alias in node.names
        if alias.name == "load"
    }
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        if isinstance(called, ast.Attribute) and called.attr == "load":
            if ast.unparse(called.value) in ("torch", "torch.serialization"):
                calls.append(node)
        elif isinstance(called, ast.Name) and called.id in from_torch:
            calls.append(node)
    return calls


def test_torch_load_is_called_by_the_one_reader_only():
    root = READER.parents[2]
    sources = [*root.glob("genodiff/**/*.py"), *root.glob("plugins/*/src/**/*.py")]
    assert READER in sources and len(sources) > 50
    callers = {str(p.relative_to(root)): torch_load_calls(p) for p in sources}
    assert {path: lines for path, lines in callers.items() if lines} == {
        "genodiff/checkpoints/io.py": torch_load_calls(READER)
    }
    assert len(torch_load_calls(READER)) == 1


def unpickles_code(call: ast.Call) -> bool:
    """Whether a ``torch.load`` call turns ``weights_only`` off (a file could run code)."""
    return any(
        k.arg == "weights_only" and not (isinstance(k.value, ast.Constant) and k.value.value)
        for k in call.keywords
    )


def test_no_file_of_the_repository_loads_with_weights_only_off():
    # Tests and bench scripts too: a file a test damages is read through the allow-listed
    # reader (read_checkpoint_file), never with weights_only=False.
    root = READER.parents[2]
    folders = ("genodiff", "plugins", "tests", "bench", "notebooks")
    sources = [p for folder in folders for p in (root / folder).glob("**/*.py")]
    assert len(sources) > 300
    found = [
        f"{p.relative_to(root)}:{call.lineno}"
        for p in sources
        for call in torch_load_nodes(p)
        if unpickles_code(call)
    ]
    assert found == []


def test_the_ast_search_finds_each_spelling_of_torch_load(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import torch\nfrom torch import load as read\n"
        "torch.load('a')\nread('b')\ntorch.serialization.load('c')\nnp.load('d')\n"
    )
    assert torch_load_calls(source) == [3, 4, 5]
    source.write_text(
        "import torch\ntorch.load('a', weights_only=False)\ntorch.load('b', weights_only=flag)\n"
        "torch.load('c', weights_only=True)\ntorch.load('d')\n"
    )
    assert [c.lineno for c in torch_load_nodes(source) if unpickles_code(c)] == [2, 3]

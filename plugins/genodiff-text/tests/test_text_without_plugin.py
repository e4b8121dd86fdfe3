"""What a user sees who runs a text experiment or loads a text model where this plugin is not
installed: a one-line error that says to install it, never that the (intact) file is
inconsistent, nor only "pass a path such as configs/demo.yaml"."""

from importlib.metadata import EntryPoints

import pytest
from genodiff_text.resources import CONFIGS
from test_text_configs import MDLM_TINY, TINY_TEXT

from genodiff import registry
from genodiff.cli import main
from genodiff.pipeline import load

INSTALL = "pip install -e plugins/genodiff-text"


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A text checkpoint and the folder exported from it, made with the plugin installed."""
    out = tmp_path_factory.mktemp("text")
    args = ["train", str(CONFIGS / "text_demo.yaml"), *TINY_TEXT, *MDLM_TINY]
    assert main([*args, "samples.num_samples=0", "evaluate_test=false", f"output_dir={out}"]) == 0
    checkpoint = out / "checkpoints" / "last.ckpt"
    folder = load(checkpoint).save_pretrained(out / "exported")
    return checkpoint, folder


def _not_the_plugins(entries) -> EntryPoints:
    return EntryPoints(e for e in entries if not e.value.startswith("genodiff_text"))


@pytest.fixture
def without_plugin(monkeypatch):
    """genodiff as it is where genodiff-text is not installed: none of its entry points, none of
    its classes registered."""
    everything = registry.entry_points
    monkeypatch.setattr(
        registry, "entry_points", lambda group: _not_the_plugins(everything(group=group))
    )
    for kind, classes in registry._REGISTRIES.items():
        builtin = {name: cls for name, cls in classes.items() if registry._is_builtin(cls)}
        monkeypatch.setitem(registry._REGISTRIES, kind, builtin)


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"genodiff {command}: error:"), err
    return err


def test_a_text_experiment_without_the_plugin_says_to_install_it(without_plugin, capsys):
    for config in ("configs/text_demo.yaml", "text_demo"):
        assert main(["train", config]) == 2
        err = one_line_error(capsys, "train")
        assert "not found" in err and INSTALL in err  # was: only "pass a path such as ..."


@pytest.mark.parametrize("command", ["sample", "eval", "info"])
@pytest.mark.parametrize("saved", ["checkpoint", "exported"])
def test_a_text_model_without_the_plugin_says_to_install_it(
    text_run, without_plugin, capsys, tmp_path, command, saved
):
    path = str(text_run[0] if saved == "checkpoint" else text_run[1])
    out = str(tmp_path / "s.txt")
    args = {
        "sample": ["sample", "--checkpoint", path, "--num-samples", "1", "--out", out],
        "eval": ["eval", "--checkpoint", path, "--num-windows", "1"],
        "info": ["info", path],
    }[command]
    assert main(args) == 2
    err = one_line_error(capsys, command)
    assert INSTALL in err, err
    assert "inconsistent" not in err and "wrote it" not in err and "export the" not in err
    if saved == "checkpoint" or command != "info":  # info reads the exported config.json
        assert "'dit'" in err

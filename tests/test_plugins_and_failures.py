"""Entry-point plugins, the `genodiff data hg38` command, and a NaN loss stopping cleanly."""

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch
from torch import nn

from genodiff import cli, registry
from genodiff.backbones.caduceus import Caduceus
from genodiff.training.module import GenerativeTrainingModule
from tests.test_cli import DEMO, TINY
from tests.test_hg38_download import BED, FASTA, gd_server, urls  # noqa: F401 (fixture)


class PluginBackbone(nn.Module):
    """Stands in for a third-party backbone registered through the entry-point group."""

    def __init__(self, vocab: int = 16) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(vocab))

    def forward(self, input_ids, sigma=None):
        return self.logits.expand(*input_ids.shape, -1)


def test_entry_point_backbone_is_found(monkeypatch):
    entry = EntryPoint(
        name="plugin_test_backbone",
        value="tests.test_plugins_and_failures:PluginBackbone",
        group="genodiff.backbones",
    )

    def fake_entry_points(group):
        return [entry] if group == "genodiff.backbones" else []

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert registry.get("backbone", "plugin_test_backbone") is PluginBackbone
    assert registry.get("backbone", "caduceus") is Caduceus
    with pytest.raises(KeyError, match="known backbones: .*caduceus"):
        registry.get("backbone", "no_such_backbone")


def test_data_hg38_command_downloads_into_dest(gd_server, tmp_path, capsys):  # noqa: F811
    u = urls(gd_server)
    dest = tmp_path / "hg38"
    args = ["data", "hg38", "--dest", str(dest), "--fasta-url", u["fasta_url"]]
    assert cli.main([*args, "--bed-url", u["bed_url"]]) == 0
    assert (dest / "hg38.ml.fa").read_bytes() == FASTA
    assert (dest / "human-sequences.bed").read_bytes() == BED
    assert (dest / "hg38.ml.fa.fai").is_file()
    assert "hg38.ml.fa" in capsys.readouterr().out


def test_nan_loss_stops_with_a_clear_error_and_keeps_good_checkpoints(
    tmp_path, monkeypatch, capsys
):
    original = Caduceus.forward
    calls = {"train": 0}

    def nan_after_three_training_steps(self, input_ids, sigma=None, inputs_embeds=None):
        logits = original(self, input_ids, sigma, inputs_embeds)
        if torch.is_grad_enabled():
            calls["train"] += 1
            if calls["train"] > 3:
                return logits * float("nan")
        return logits

    monkeypatch.setattr(Caduceus, "forward", nan_after_three_training_steps)
    overrides = [o for o in TINY if not o.startswith("trainer.max_steps")]
    code = cli.main(["train", DEMO, *overrides, "trainer.max_steps=6", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "training loss is nan at step 3" in err and "ckpt_path=last" in err
    # The checkpoint from the validation at step 2 is intact and finite.
    ckpt = Path(tmp_path) / "checkpoints" / "last.ckpt"
    GenerativeTrainingModule.load_from_checkpoint(ckpt, map_location="cpu")
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert state["global_step"] == 2
    weights = [v for v in state["state_dict"].values() if v.is_floating_point()]
    assert all(torch.isfinite(v).all() for v in weights)

"""Weights that cannot be trusted are refused, never scored or sampled: non-finite weights or
network outputs (a diverged run, bytes overwritten), and a file whose bytes changed after it
was written (the zip archive's CRCs of a .ckpt, the digest recorded in model.safetensors)."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from genodiff import cli
from genodiff.checkpoints import load_model
from genodiff.errors import InputValueError
from tests import test_sample_cli

checkpoint = test_sample_cli.checkpoint  # a tiny trained run, once for this module


def one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"genodiff {command}: error:"), err
    assert "\n" not in err, err
    assert "NaN" not in captured.out and "Infinity" not in captured.out, captured.out
    return err


def largest_weight(state: dict[str, torch.Tensor]) -> str:
    """The name of the largest floating-point tensor of the EMA weights (what eval/sample use)."""
    floats = [k for k, t in state.items() if k.startswith("ema.") and t.is_floating_point()]
    return max(floats, key=lambda k: state[k].numel())


def with_weight(source: str, target: Path, value: float) -> str:
    """A copy of the checkpoint ``source`` whose largest EMA tensor holds ``value`` once."""
    ckpt = torch.load(source, map_location="cpu", weights_only=True)
    name = largest_weight(ckpt["state_dict"])
    ckpt["state_dict"][name].view(-1)[3] = value
    torch.save(ckpt, target)
    return name


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("command", ["eval", "sample"])
def test_non_finite_weights_are_refused_naming_file_and_tensor(
    checkpoint, tmp_path, capsys, value, command
):
    bad = tmp_path / "diverged.ckpt"
    name = with_weight(checkpoint, bad, value)
    out = tmp_path / "s.fa"
    if command == "eval":
        args = ["eval", "--checkpoint", str(bad), "--num-windows", "2", "--json"]
    else:
        args = ["sample", "--checkpoint", str(bad), "--length", "16", "--steps", "4"]
        args += ["--num-samples", "2", "--out", str(out)]
    assert cli.main(args) == 2
    err = one_line_error(capsys, command)
    assert str(bad) in err and name in err and "not finite" in err
    assert not out.exists()


def test_load_model_checks_the_weights_it_returns(checkpoint, tmp_path):
    bad = tmp_path / "diverged.ckpt"
    name = with_weight(checkpoint, bad, float("nan"))
    with pytest.raises(InputValueError, match=name):
        load_model(bad)
    load_model(checkpoint)  # the intact file loads


@pytest.fixture
def nan_network(monkeypatch):
    """Every network loaded from now on returns NaN logits (finite weights)."""

    def loading_nan_network(reference, map_location="cpu"):
        model = load_model(reference, map_location)
        model.eval_backbone.register_forward_hook(lambda m, i, out: out * float("nan"))
        return model

    import genodiff.checkpoints
    import genodiff.pipeline

    monkeypatch.setattr(genodiff.checkpoints, "load_model", loading_nan_network)  # eval
    monkeypatch.setattr(genodiff.pipeline, "load_model", loading_nan_network)  # sample


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting"])
def test_non_finite_network_output_stops_sampling(
    checkpoint, tmp_path, capsys, nan_network, sampler
):
    out = tmp_path / "s.fa"
    args = ["sample", "--checkpoint", checkpoint, "--length", "16"]
    args += ["--steps", "4"] if sampler != "first-hitting" else []  # it takes none (refused)
    assert cli.main([*args, "--sampler", sampler, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert checkpoint in err and "not finite" in err
    assert list(tmp_path.iterdir()) == []


def test_non_finite_network_output_stops_eval(checkpoint, capsys, nan_network):
    args = ["eval", "--checkpoint", checkpoint, "--num-windows", "2", "--json"]
    assert cli.main(args) == 2
    err = one_line_error(capsys, "eval")
    assert checkpoint in err and "not finite" in err


# ------------------------------------------------------------- bytes changed after writing


def invert_bytes(path: Path, start: int, count: int = 64) -> None:
    data = bytearray(path.read_bytes())
    data[start : start + count] = bytes(b ^ 0xFF for b in data[start : start + count])
    path.write_bytes(bytes(data))


def tensor_data_offset(path: Path) -> int:
    """Where the bytes of the largest tensor of a torch zip file start."""
    with zipfile.ZipFile(path) as archive:
        member = max(
            (i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size
        )
    with open(path, "rb") as handle:
        handle.seek(member.header_offset)
        header = handle.read(30)  # the local file header: name and extra lengths at 26, 28
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return member.header_offset + 30 + name_length + extra_length


def test_a_ckpt_with_changed_bytes_is_damaged(checkpoint, tmp_path, capsys):
    damaged = tmp_path / "damaged.ckpt"
    damaged.write_bytes(Path(checkpoint).read_bytes())
    invert_bytes(damaged, tensor_data_offset(damaged) + 128)
    for command in (["eval", "--num-windows", "2"], ["info"]):
        target = ["--checkpoint", str(damaged)] if command[0] == "eval" else [str(damaged)]
        assert cli.main([command[0], *target, *command[1:]]) == 2
        err = one_line_error(capsys, command[0])
        assert str(damaged) in err and "damaged" in err and "another checkpoint" in err


def test_an_exported_folder_with_changed_weights_is_damaged(checkpoint, tmp_path, capsys):
    folder = tmp_path / "export"
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(folder)]) == 0
    assert cli.main(["eval", "--checkpoint", str(folder), "--num-windows", "2"]) == 0
    weights = folder / "model.safetensors"
    header = struct.unpack("<Q", weights.read_bytes()[:8])[0]
    invert_bytes(weights, 8 + header + 256)
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", str(folder), "--num-windows", "2"]) == 2
    err = one_line_error(capsys, "eval")
    assert str(weights) in err and "damaged" in err


def test_a_folder_without_a_recorded_digest_still_loads(checkpoint, tmp_path):
    import safetensors.torch

    folder = tmp_path / "export"
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(folder)]) == 0
    weights = folder / "model.safetensors"
    tensors = safetensors.torch.load_file(str(weights))
    safetensors.torch.save_file(tensors, str(weights), metadata={"format": "pt"})  # as upstream
    model = load_model(folder)
    assert all(torch.isfinite(t).all() for t in model.state_dict().values())


def test_eval_json_is_valid_json(checkpoint, capsys):
    assert cli.main(["eval", "--checkpoint", checkpoint, "--num-windows", "2", "--json"]) == 0
    json.loads(capsys.readouterr().out.strip().splitlines()[-1], parse_constant=pytest.fail)

"""Hostile input that used to end in a traceback, an absurd value accepted, or an unclear message:
each is now one line on stderr (exit status 2) that says what is wrong, and destroys nothing."""

from __future__ import annotations

import errno
import io
import json
import os
import random
import shutil
from pathlib import Path

import pytest
import safetensors.torch
import torch

from genodiff import atomic_files, cli
from genodiff.backbones import build
from genodiff.checkpoints.folders import load_pretrained
from genodiff.data.build import build_datamodule
from genodiff.data.genome import Genome
from genodiff.tokenizers import build_tokenizer
from tests.test_bad_input_cli import one_line_error
from tests.test_cli import DEMO, TINY
from tests.test_genome_data import random_dna, write_fasta
from tests.test_sample_cli import checkpoint  # noqa: F401 (a module-scoped fixture)

QUICK = [o for o in TINY if not o.startswith("trainer.max_steps")]
SAMPLE = ["--num-samples", "1", "--length", "8", "--steps", "2"]


@pytest.fixture
def exported(checkpoint, tmp_path) -> Path:  # noqa: F811
    folder = tmp_path / "exported"
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(folder)]) == 0
    return folder


def edit_json(path: Path, edit) -> None:
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))


# ------------------------------------------------------------------ tracebacks


class FillingDisk(io.FileIO):
    """A file on a disk with ``room`` bytes free: a write past it fails with ENOSPC, as the
    kernel's does."""

    room = 4096

    def write(self, data) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def test_a_full_disk_at_checkpoint_write_keeps_the_previous_checkpoint(
    checkpoint,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    run = tmp_path / "run"
    shutil.copytree(Path(checkpoint).parents[1], run)
    last = run / "checkpoints" / "last.ckpt"
    before = last.read_bytes()

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        if str(file).endswith(".tmp") and ".ckpt." in str(file):
            return io.BufferedWriter(FillingDisk(file, "wb"))
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(atomic_files, "open", open_on_a_full_disk, raising=False)
    resume = [*QUICK, "trainer.max_steps=6", "samples.num_samples=0", "evaluate_test=false"]
    assert cli.main(["train", DEMO, *resume, f"output_dir={run}", "ckpt_path=last"]) == 2
    *announced, err = capsys.readouterr().err.strip().splitlines()
    assert [line.startswith("genodiff: resuming ") for line in announced] == [True]
    assert err.startswith("genodiff train: error:")  # the error itself: one line, last
    assert "no space left on device" in err and "checkpoints" in err
    assert "needed" in err and "free" in err
    assert last.read_bytes() == before
    assert not [p for p in run.rglob("*.tmp")]


def test_the_disk_full_error_names_the_file_and_the_space_it_needed(tmp_path, monkeypatch):
    from genodiff.checkpoints.lightning_io import AtomicCheckpointIO

    target = tmp_path / "last.ckpt"
    target.write_bytes(b"previous")
    full = lambda f, *a, **k: io.BufferedWriter(FillingDisk(f, "wb"))  # noqa: E731
    monkeypatch.setattr(atomic_files, "open", full, raising=False)
    state = {"w": torch.zeros(3 * 2**20)}  # 12 MiB of float32
    with pytest.raises(OSError) as raised:
        AtomicCheckpointIO().save_checkpoint(state, target)
    assert raised.value.errno == errno.ENOSPC
    assert cli.is_user_error(raised.value)
    message = str(raised.value)
    assert str(target) in message and "12.0 MiB" in message and "[Errno" not in message
    assert target.read_bytes() == b"previous"


@pytest.mark.parametrize("command", ["sample", "eval", "info"])
def test_an_export_folder_whose_record_names_another_objective(exported, capsys, command):
    # SEDD takes no num_steps: the record's objective section was written for MDLM.
    edit_json(exported / "genodiff.json", lambda r: r["config"]["objective"].update(name="sedd"))
    out = exported.parent / "s.fa"
    args = {
        "sample": ["sample", "--checkpoint", str(exported), *SAMPLE, "--out", str(out)],
        "eval": ["eval", "--checkpoint", str(exported), "--num-windows", "1"],
        "info": ["info", str(exported)],
    }[command]
    assert cli.main(args) == 2  # was TypeError: SEDD: got an unexpected keyword argument
    err = one_line_error(capsys, command)
    assert "genodiff.json" in err and "inconsistent" in err
    assert "objective.num_steps" in err and "sedd" in err
    assert not out.exists()


@pytest.mark.parametrize("name", ["config.json", "genodiff.json"])
def test_a_malformed_json_file_in_an_export_folder_is_named(exported, capsys, name):
    (exported / name).write_text('{"d_model": 64,')
    for args, command in (
        (["info", str(exported)], "info"),
        (["sample", "--checkpoint", str(exported), *SAMPLE, "--out", "x.fa"], "sample"),
    ):
        assert cli.main(args) == 2  # was json.decoder.JSONDecodeError
        err = one_line_error(capsys, command)
        assert str(exported / name) in err and "JSON" in err


@pytest.mark.parametrize("devices", ["0", "[]", "-2"])
def test_a_trainer_without_devices_is_refused_before_anything_is_written(tmp_path, capsys, devices):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *TINY, f"trainer.devices={devices}", f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")  # was Lightning's MisconfigurationException
    assert "trainer.devices" in err
    assert not out.exists()


def test_a_model_that_cannot_fit_in_memory_is_refused_before_it_is_built(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *TINY, "model.d_model=100000", f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")  # was a 160 GB allocation
    assert "model.d_model" in err and "parameters" in err and "GiB" in err
    assert not out.exists()


def test_the_memory_a_model_needs_is_its_parameters_times_the_copies_kept(monkeypatch):
    from genodiff import model as model_module

    config = {"name": "caduceus", "d_model": 32, "n_layer": 2, "vocab_size": 16}
    real = build(**config)
    weights = sum(t.numel() * t.element_size() for t in real.state_dict().values())
    monkeypatch.setattr(model_module, "memory_limit", lambda: weights * 2 - 1)
    model_module.check_backbone_fits(config, copies=1)  # one copy fits
    with pytest.raises(ValueError, match=f"{weights * 2:,} bytes"):
        model_module.check_backbone_fits(config, copies=2)


SMALL_BACKBONES = {
    "caduceus": {"name": "caduceus", "d_model": 24, "n_layer": 2},
    "caduceus-ps": {
        "name": "caduceus",
        "d_model": 24,
        "n_layer": 2,
        "rcps": True,
        "complement_map": build_tokenizer({"name": "dna"}).complement_map,
    },
    "mamba": {"name": "mamba", "d_model": 24, "n_layer": 2},
    "hyena": {"name": "hyena", "d_model": 24, "n_layer": 2},
}


@pytest.mark.parametrize("backbone", SMALL_BACKBONES)
def test_the_meta_count_of_a_backbone_is_that_of_the_backbone_built(backbone):
    """``backbone_size`` builds on the meta device with its in-place calls skipped; a build in
    memory, counted tensor by tensor, is the reference."""
    from genodiff.model import backbone_size

    config = {**SMALL_BACKBONES[backbone], "vocab_size": 16}
    real = build(**config)
    parameters = sum(p.numel() for p in real.parameters())
    weights = sum(t.numel() * t.element_size() for t in [*real.parameters(), *real.buffers()])
    assert backbone_size(config) == (parameters, weights)


# ------------------------------------------------------------------ absurd values


def test_a_batch_larger_than_the_training_split_is_refused(tmp_path, capsys):
    data = build_datamodule({"name": "fasta", **demo_data(), "max_length": 128, "batch_size": 4})
    data.attach_tokenizer(build_tokenizer({"name": "dna"}))
    windows = len(data.dataset_of("train"))
    out = tmp_path / "run"
    too_many = f"data.batch_size={windows + 1}"
    assert cli.main(["train", DEMO, *TINY, too_many, f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")  # was one full batch per step, silently
    assert f"{windows} windows" in err and "data.batch_size" in err
    assert not out.exists()  # refused before the first write


def demo_data() -> dict:
    from genodiff.config import load_config

    cfg = load_config(DEMO, ["data.max_length=128"])
    return {k: v for k, v in cfg.data.items() if k in ("fasta", "split_fractions")}


@pytest.fixture
def fastas(tmp_path) -> tuple[str, str]:
    samples = write_fasta(tmp_path / "s.fa", {f"s{i}": random_dna(64, i) for i in range(6)})
    reference = write_fasta(tmp_path / "r.fa", {f"r{i}": random_dna(2000, 9 + i) for i in range(3)})
    return str(samples), str(reference)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        (["--window", "0"], "--window"),  # was recorded as 0 and treated as the default
        (["--window", "-5"], "--window"),
        (["--identity-threshold", "5"], "--identity-threshold"),  # identity is at most 1
        (["--identity-threshold", "0"], "--identity-threshold"),
        (["--identity-threshold", "nan"], "--identity-threshold"),
        (["--folds", "1"], "--folds"),  # blamed the sample counts
        (["--folds", "0"], "--folds"),
        (["--max-reference", "1"], "--max-reference"),
        (["--max-reference", "0"], "--max-reference"),
    ],
)
def test_evaluate_samples_numbers_out_of_range(fastas, tmp_path, capsys, options, option):
    samples, reference = fastas
    out = tmp_path / "report"
    args = ["evaluate-samples", samples, "--reference", reference, "--train", reference]
    assert cli.main([*args, *options, "--out", str(out)]) == 2
    err = one_line_error(capsys, "evaluate-samples")
    assert err.endswith(f"({option})") and "sequences" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "options", [["--batch-size", "0"], ["--batch-size", "-1"], ["--max-length", "0"]]
)
def test_gen_ppl_numbers_out_of_range(fastas, capsys, options):
    samples, _ = fastas
    assert cli.main(["gen-ppl", samples, "--checkpoint", "missing.ckpt", *options]) == 2
    assert one_line_error(capsys, "gen-ppl").endswith(f"({options[0]})")


# ------------------------------------------------------------------ unclear messages


def test_a_fasta_with_cr_line_endings_is_named_as_such(checkpoint, tmp_path, capsys):  # noqa: F811
    fasta = write_fasta(tmp_path / "cr.fa", {"chrA": random_dna(500, 1)}, newline="\r")
    with pytest.raises(ValueError, match="CR"):
        Genome(fasta)
    assert cli.main(["eval", "--checkpoint", checkpoint, "--file", str(fasta)]) == 2
    err = one_line_error(capsys, "eval")  # was "every record is empty"
    assert "line endings" in err and "tr '\\r' '\\n'" in err and "empty" not in err


def test_a_fasta_with_crlf_line_endings_still_reads(tmp_path):
    sequence = random_dna(500, 1)
    fasta = write_fasta(tmp_path / "crlf.fa", {"chrA": sequence}, newline="\r\n")
    assert Genome(fasta).fetch("chrA", 0, 500) == sequence


def a_folder_and_a_fifo(tmp_path: Path) -> list[tuple[Path, str]]:
    """A folder and a FIFO named as FASTA files, each with what an error should call it."""
    folder = tmp_path / "folder.fa"
    folder.mkdir()
    fifo = tmp_path / "pipe.fa"
    os.mkfifo(fifo)
    return [(folder, "is a folder"), (fifo, "is not a regular file")]


def test_eval_file_that_is_a_folder_or_a_fifo(checkpoint, tmp_path, capsys):  # noqa: F811
    for path, words in a_folder_and_a_fifo(tmp_path):
        assert cli.main(["eval", "--checkpoint", checkpoint, "--file", str(path)]) == 2
        err = one_line_error(capsys, "eval")  # was "not found"
        assert words in err and "not found" not in err and err.endswith("(--file)")


@pytest.mark.parametrize(
    ("args", "what", "option"),
    [
        (["sample", "--checkpoint", "CKPT", "--steps", "2", "--infill", "PATH", "--out", "OUT"],
         "infill file", "--infill"),
        (["gen-ppl", "PATH", "--checkpoint", "missing.ckpt"], "sample file", None),
        (["gen-ppl", "SAMPLES", "--checkpoint", "missing.ckpt", "--reference", "PATH"],
         "reference", "--reference"),
    ],
)  # fmt: skip
def test_inputs_that_are_folders_or_fifos(checkpoint, fastas, tmp_path, capsys, args, what, option):  # noqa: F811
    out = tmp_path / "out.fa"
    for path, words in a_folder_and_a_fifo(tmp_path):
        given = {"CKPT": checkpoint, "SAMPLES": fastas[0], "PATH": str(path), "OUT": str(out)}
        assert cli.main([given.get(arg, arg) for arg in args]) == 2
        err = one_line_error(capsys, args[0])  # was "not found"; the reference a "sample file"
        assert f"{what} {path} {words}" in err and "not found" not in err
        assert err.endswith(f"({option})") if option else not err.endswith(")")
        assert not out.exists()


@pytest.mark.parametrize(
    "args", [["info", "PATH"], ["sample", "--checkpoint", "PATH", "--out", "OUT"]]
)
def test_a_checkpoint_that_is_a_fifo_or_a_device(tmp_path, capsys, args):
    fifo = tmp_path / "pipe.ckpt"
    os.mkfifo(fifo)
    for path in (fifo, Path(os.devnull)):
        given = {"PATH": str(path), "OUT": str(tmp_path / "s.fa")}
        assert cli.main([given.get(arg, arg) for arg in args]) == 2
        err = one_line_error(capsys, args[0])  # was "holds no genodiff.json ... and no *.ckpt"
        assert f"checkpoint {path} is not a regular file" in err and "genodiff.json" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["pipe.ckpt"]


def test_eval_of_a_fasta_of_mostly_n_says_why_it_has_no_window(checkpoint, tmp_path, capsys):  # noqa: F811
    ambiguous = "".join(random.Random(3).choice("NRYSWKMBDHV") for _ in range(2000))
    fasta = write_fasta(tmp_path / "ambiguous.fa", {"chrA": ambiguous})
    args = ["eval", "--checkpoint", checkpoint, "--file", str(fasta), "--length", "128"]
    assert cli.main(args) == 2
    err = one_line_error(capsys, "eval")  # was "pass a smaller length" alone: no length helps
    assert "no 128-bp window" in err and "more than half N or ambiguity codes is skipped" in err


@pytest.mark.parametrize(
    "override", ["hydra.run.dir=/tmp/elsewhere", "+hydra.run.dir=x", "hydra.x=1"]
)
def test_hydra_keys_are_not_genodiff_keys(tmp_path, capsys, override):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *TINY, override, f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")  # was Hydra's "Either remove + prefix" (or accepted)
    assert "hydra" in err and "output_dir=" in err and "+ prefix" not in err
    assert not out.exists()


def test_export_onto_a_file_or_from_an_export_folder(checkpoint, exported, tmp_path, capsys):  # noqa: F811
    a_file = tmp_path / "taken"
    a_file.write_text("keep me")
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(a_file)]) == 2
    err = one_line_error(capsys, "export")  # was [Errno 17] File exists
    assert "[Errno" not in err and "is a file" in err and "--out" in err
    assert a_file.read_text() == "keep me"
    again = tmp_path / "again"
    assert cli.main(["export", "--checkpoint", str(exported), "--out", str(again)]) == 2
    err = one_line_error(capsys, "export")  # was [Errno 21] Is a directory
    assert "[Errno" not in err and "already" in err and "genodiff export" in err
    assert not again.exists()


def test_evaluate_samples_out_onto_a_file(fastas, tmp_path, capsys):
    samples, reference = fastas
    a_file = tmp_path / "taken"
    a_file.write_text("keep me")
    args = ["evaluate-samples", samples, "--reference", reference, "--out", str(a_file)]
    assert cli.main(args) == 2
    err = one_line_error(capsys, "evaluate-samples")  # was [Errno 17] File exists
    assert "[Errno" not in err and "is a file" in err and err.endswith("(--out)")
    assert a_file.read_text() == "keep me"


def test_long_key_listings_are_kept_short(exported, monkeypatch, capsys):
    weights = safetensors.torch.load_file(str(exported / "model.safetensors"))
    renamed = {f"renamed.{name}": tensor for name, tensor in weights.items()}
    safetensors.torch.save_file(renamed, str(exported / "model.safetensors"))
    out = exported.parent / "s.fa"
    assert cli.main(["sample", "--checkpoint", str(exported), *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert f"and {len(weights) - 5} more" in err and len(err) < 1500
    monkeypatch.setenv("GENODIFF_DEBUG", "1")  # every key
    with pytest.raises(ValueError) as raised:
        load_pretrained(exported)
    assert all(f"renamed.{name}" in str(raised.value) for name in weights)


def test_shape_mismatches_are_one_short_line(exported, capsys):
    edit_json(exported / "config.json", lambda c: c.update(d_model=c["d_model"] * 2))
    out = exported.parent / "s.fa"
    assert cli.main(["sample", "--checkpoint", str(exported), *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")  # was torch's message, one line per tensor
    assert "shape" in err and "more" in err and len(err) < 1500


def test_a_plus_on_a_key_the_config_sets_is_explained(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", DEMO, *TINY, "+model.d_model=32", f"output_dir={out}"]) == 2
    err = one_line_error(capsys, "train")  # was Hydra's "Either remove + prefix ... Or add ++"
    assert "model.d_model=VALUE without a leading +" in err and "++" not in err
    assert not out.exists()


def test_an_in_place_reshape_in_a_constructor_is_counted():
    """A meta build skips the in-place calls that set values, not those that change a shape."""
    from torch import nn

    from genodiff.backbones.meta_build import SkipInPlaceOnMeta

    class Reshaped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.empty(12))
            nn.init.normal_(self.table)
            self.table.resize_(3, 8)  # (3, 8): 24 numbers

    with torch.device("meta"), SkipInPlaceOnMeta():
        module = Reshaped()
    assert module.table.shape == (3, 8)

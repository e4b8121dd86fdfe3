"""The remainder of a newcomer's hostile-input suite (issue 30, item 9): each case is one line
on stderr that says what to do (exit status 2), or the correct result, and nothing is lost."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from genodiff import cli
from genodiff.checkpoints import (
    export_model,
    load_model,
    load_pretrained,
    read_checkpoint_file,
)
from genodiff.errors import InputValueError, UserInputError
from genodiff.generate import Constraint
from genodiff.model import GenerativeModel
from genodiff.pipeline import Model
from genodiff.tokenizers import DNATokenizer
from tests.test_bad_input_cli import one_line_error
from tests.test_hub import training_checkpoint
from tests.test_sample_cli import checkpoint  # noqa: F401 (a module-scoped fixture)

ROOT = Path(__file__).resolve().parents[1]
GENOME = str(ROOT / "data" / "chr22_20-21Mb.fa.gz")
SAMPLE = ["--num-samples", "2", "--length", "16", "--steps", "2"]


def run_limited(args: list[str], max_file_bytes: int) -> subprocess.CompletedProcess:
    """``genodiff ARGS`` in a process that may write no file larger than ``max_file_bytes``
    (``ulimit -f``): a write past it fails with EFBIG, as a full disk fails with ENOSPC."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "genodiff.cli", *args]
    return subprocess.run(
        command, preexec_fn=limit, env=env, capture_output=True, text=True, timeout=300
    )


# ------------------------------------------------------------------ tracebacks


def test_sample_past_the_file_size_limit_is_one_line_and_writes_nothing(
    checkpoint,  # noqa: F811
    tmp_path,
):
    out = tmp_path / "many.fa"
    args = ["sample", "--checkpoint", checkpoint, "--num-samples", "64", "--length", "64"]
    done = run_limited([*args, "--steps", "2", "--out", str(out)], max_file_bytes=1024)
    assert done.returncode == 2, done.stderr[-2000:]  # was OSError 27 with a traceback
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith("genodiff sample: error: file size limit") and "ulimit -f" in err
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary one


def test_export_past_the_file_size_limit_is_one_line_and_writes_nothing(
    checkpoint,  # noqa: F811
    tmp_path,
):
    out = tmp_path / "exported"
    args = ["export", "--checkpoint", checkpoint, "--out", str(out)]
    done = run_limited(args, max_file_bytes=4096)  # below the tiny model's weights
    assert done.returncode == 2, done.stderr[-2000:]  # was a SafetensorError traceback
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith("genodiff export: error: file size limit")
    assert f"{out / 'model.safetensors'}" in err and "no model.safetensors written" in err
    assert not out.exists()  # the folder it created is removed again


def test_a_full_disk_while_a_folder_is_exported_names_the_file(tmp_path, monkeypatch):
    from genodiff.backbones import build
    from genodiff.checkpoints.folders import save_pretrained

    def disk_full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", disk_full)  # how the weights' file is written
    folder = tmp_path / "exported"
    with pytest.raises(OSError) as raised:  # was safetensors' own error, with a traceback
        save_pretrained(build(name="caduceus", d_model=16, n_layer=1, vocab_size=12), folder)
    assert raised.value.errno == errno.ENOSPC and cli.is_user_error(raised.value)
    message = str(raised.value)
    assert message.startswith(f"no space left on device writing {folder / 'model.safetensors'}")
    assert "no model.safetensors written" in message and "[Errno" not in message
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ silent-wrong


def test_per_window_without_json_is_refused(checkpoint, capsys):  # noqa: F811
    assert cli.main(["eval", "--checkpoint", checkpoint, "--per-window"]) == 2
    assert "add --json" in one_line_error(capsys, "eval")


def test_steps_for_a_sampler_that_takes_none_are_refused(checkpoint, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "s.fa"
    args = ["sample", "--checkpoint", checkpoint, "--num-samples", "2", "--length", "16"]
    args += ["--sampler", "first-hitting", "--out", str(out)]
    assert cli.main([*args, "--steps", "2"]) == 2
    err = one_line_error(capsys, "sample")
    assert "first-hitting sampler" in err and "takes no number of steps" in err
    assert err.endswith("(--steps)") and not out.exists()
    assert cli.main(args) == 0  # without steps it draws


def test_steps_for_an_ar_model_are_refused():
    config = {
        "model": {"name": "mamba", "d_model": 16, "n_layer": 1},
        "objective": {"name": "ar"},
        "data": {"name": "fasta", "max_length": 16},
        "ema": {"decay": 0},
    }
    model = Model(GenerativeModel(config, DNATokenizer()), "in memory")
    with pytest.raises(ValueError, match="ancestral sampler of this ar model takes no") as raised:
        model.generate(1, 8, steps=4)
    assert raised.value.parameter == "steps"
    assert len(model.generate(1, 8)[0]) == 8


def test_a_classifier_form_without_a_classifier_is_refused(checkpoint, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "s.fa"
    args = ["sample", "--checkpoint", checkpoint, *SAMPLE, "--label", "human"]
    assert cli.main([*args, "--classifier-form", "exact", "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert "give a classifier" in err and err.endswith("(--classifier-form)")
    assert not out.exists()


# ------------------------------------------------------------------ absurd accepted


@pytest.mark.parametrize("command", ["sample", "eval", "evaluate-samples"])
def test_a_negative_seed_is_refused(checkpoint, tmp_path, capsys, command):  # noqa: F811
    samples = tmp_path / "samples.fa"
    samples.write_text(">a\nACGTACGTAC\n>b\nGGGCCCATAT\n")
    args = {
        "sample": ["sample", "--checkpoint", checkpoint, *SAMPLE, "--out", str(tmp_path / "s.fa")],
        "eval": ["eval", "--checkpoint", checkpoint, "--num-windows", "1"],
        "evaluate-samples": ["evaluate-samples", str(samples), "--reference", GENOME],
    }[command]
    assert cli.main([*args, "--seed", "-1"]) == 2  # was accepted (or a numpy traceback)
    err = one_line_error(capsys, command)
    assert "seed must be >= 0, got -1" in err and err.endswith("(--seed)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples.fa"]


def test_a_mask_token_in_a_prefix_is_refused():
    class MaskingTokenizer(DNATokenizer):
        """Reads ``?`` as the mask token, as a text vocabulary reads ``[MASK]``."""

        def encode_prefix(self, text: str) -> list[int]:
            return [self.mask_id if c == "?" else self.token_to_id[c] for c in text]

    tokenizer = MaskingTokenizer()
    assert Constraint.from_prefix("ACG", 8, tokenizer).given.tolist() == [True] * 3 + [False] * 5
    with pytest.raises(ValueError, match=r"the prefix holds the mask token \[MASK\]") as raised:
        Constraint.from_prefix("AC?G", 8, tokenizer)  # was: position 2 silently generated
    assert raised.value.parameter == "prefix"


def test_samples_shorter_than_the_longest_k_mer_are_refused(tmp_path, capsys):
    samples = tmp_path / "mixed.fa"
    samples.write_text(">a\n" + "ACGT" * 20 + "\n>b\n" + "GATTACA" * 10 + "\n>c\nA\n")
    out = tmp_path / "report"
    assert cli.main(["evaluate-samples", str(samples), "--reference", GENOME, "--out", str(out)])
    err = one_line_error(capsys, "evaluate-samples")
    assert "sample(s) 3 (1 bp) are shorter than 6 bp" in err and not out.exists()


def test_samples_of_mixed_lengths_are_scored_with_a_warning(tmp_path):
    from genodiff.metrics import evaluate_samples

    rng = torch.Generator().manual_seed(0)
    bases = lambda n: "".join("ACGT"[i] for i in torch.randint(0, 4, (n,), generator=rng))  # noqa: E731
    reference = [bases(4000)]
    same = evaluate_samples([bases(60) for _ in range(4)], reference, "ACGT").metrics
    assert not any("differ in length" in w for w in same["warnings"])
    mixed = evaluate_samples([bases(n) for n in (50, 60, 300, 50)], reference, "ACGT").metrics
    (warning,) = [w for w in mixed["warnings"] if "differ in length" in w]
    assert "(50-300 bp)" in warning and "windows of 55 bp" in warning  # the median


# ------------------------------------------------------------------ messages naming the wrong thing


def test_a_missing_reference_is_called_a_reference(tmp_path, capsys):
    samples = tmp_path / "samples.fa"
    samples.write_text(">a\nACGTACGTAC\n>b\nGGGCCCATAT\n")
    missing = tmp_path / "real.fa"
    assert cli.main(["evaluate-samples", str(samples), "--reference", str(missing)]) == 2
    err = one_line_error(capsys, "evaluate-samples")
    assert f"reference {missing} not found" in err and "sample file" not in err
    assert err.endswith("(--reference)")


def test_a_binary_training_file_is_called_a_training_file(tmp_path, capsys):
    samples = tmp_path / "samples.fa"
    samples.write_text(">a\nACGTACGTAC\n>b\nGGGCCCATAT\n")
    train = tmp_path / "train.dat"
    train.write_bytes(os.urandom(256))
    args = ["evaluate-samples", str(samples), "--reference", GENOME, "--train", str(train)]
    assert cli.main(args) == 2
    err = one_line_error(capsys, "evaluate-samples")
    assert err.startswith(f"genodiff evaluate-samples: error: training file {train}:")
    assert err.endswith("(--train)")


def read_only_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write in: a chmod 555 one, or for root (whom permissions
    do not stop) /sys, which refuses new files to everyone."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder if not os.access(folder, os.W_OK) else Path("/sys")


def test_a_read_only_output_is_refused_before_sampling(
    checkpoint,  # noqa: F811
    tmp_path,
    capsys,
    monkeypatch,
):
    from genodiff import generate

    drawn = []
    real_draw = generate.draw_samples
    monkeypatch.setattr(
        generate, "draw_samples", lambda *a, **k: drawn.append(1) or real_draw(*a, **k)
    )
    out = read_only_folder(tmp_path) / "samples.fa"
    assert cli.main(["sample", "--checkpoint", checkpoint, *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert f"cannot write {out} ({out.parent}:" in err and err.endswith("(--out)")
    assert ".tmp" not in err and drawn == []  # found before any sampling


def test_a_read_only_report_folder_is_refused_before_the_metrics(tmp_path, capsys):
    samples = tmp_path / "samples.fa"
    samples.write_text(">a\nACGTACGTAC\n>b\nGGGCCCATAT\n")
    out = read_only_folder(tmp_path) / "report"
    args = ["evaluate-samples", str(samples), "--reference", GENOME, "--out", str(out)]
    assert cli.main(args) == 2
    assert f"cannot write {out / 'metrics.json'}" in one_line_error(capsys, "evaluate-samples")


def test_eval_of_a_file_says_which_index_files_it_wrote_beside_it(
    checkpoint,  # noqa: F811
    tmp_path,
    capsys,
):
    fasta = tmp_path / "mine.fa"
    fasta.write_text(">r\n" + "ACGTTGCA" * 40 + "\n")
    args = ["eval", "--checkpoint", checkpoint, "--file", str(fasta), "--num-windows", "1"]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"indexed {fasta} for random access: wrote mine.fa.fai beside it" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.fa", "mine.fa.fai"]
    assert cli.main(args) == 0  # the index is reused: nothing new is said
    assert "indexed" not in capsys.readouterr().err


# ------------------------------------------------------------------ cases the suite found fixed


def test_a_checkpoint_missing_one_weight_is_one_line(checkpoint, tmp_path, capsys):  # noqa: F811
    content = read_checkpoint_file(checkpoint)
    deleted = sorted(content["state_dict"])[3]
    del content["state_dict"][deleted]
    damaged = tmp_path / "missing.ckpt"
    torch.save(content, damaged)
    out = tmp_path / "s.fa"
    assert cli.main(["sample", "--checkpoint", str(damaged), *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")  # not load_state_dict's RuntimeError
    assert f"missing keys (1): {deleted}" in err and not out.exists()


def test_an_export_whose_record_names_another_width_is_one_line(checkpoint, tmp_path, capsys):  # noqa: F811
    folder = tmp_path / "exported"
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(folder)]) == 0
    record = json.loads((folder / "genodiff.json").read_text())
    record["config"]["model"]["d_model"] *= 2
    (folder / "genodiff.json").write_text(json.dumps(record))
    out = tmp_path / "s.fa"
    assert cli.main(["sample", "--checkpoint", str(folder), *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")  # not a size-mismatch RuntimeError
    assert "tensors of another shape" in err and not out.exists()


def test_an_export_of_weights_that_are_all_nan_writes_nothing(checkpoint, tmp_path, capsys):  # noqa: F811
    content = read_checkpoint_file(checkpoint)
    for name, tensor in content["state_dict"].items():
        if tensor.is_floating_point():
            content["state_dict"][name] = torch.full_like(tensor, float("nan"))
    diverged = tmp_path / "nan.ckpt"
    torch.save(content, diverged)
    folder = tmp_path / "exported"
    assert cli.main(["export", "--checkpoint", str(diverged), "--out", str(folder)]) == 2
    assert "not finite" in one_line_error(capsys, "export") and not folder.exists()


def test_a_classifier_into_a_run_folder_is_not_told_to_resume(checkpoint, capsys):  # noqa: F811
    run = str(Path(checkpoint).parents[1])  # the folder of a genodiff train run
    config = str(ROOT / "configs" / "classifier_demo.yaml")
    args = ["classifier", config, f"generator={checkpoint}", f"output_dir={run}"]
    assert cli.main([*args, "trainer.enable_progress_bar=false"]) == 2
    err = one_line_error(capsys, "classifier")
    assert "already holds a run" in err and "ckpt_path" not in err  # it cannot resume
    assert "choose another output_dir" in err


# ------------------------------------------------------------------ nothing in a file is trusted


def hostile_checkpoint(path: Path, edit) -> Path:
    """A training checkpoint (``tests.test_hub.training_checkpoint``) whose content ``edit``
    changed, written back as a torch file."""
    training_checkpoint(path, seed=0)
    content = read_checkpoint_file(path)
    edit(content, content["hyper_parameters"]["config"])
    torch.save(content, path)
    return path


def shared_lists(depth: int, width: int) -> list:
    """``width`` references to one list, nested ``depth`` times: a few hundred pickled bytes,
    ``width ** depth`` leaves when walked."""
    tree: list = []
    for _ in range(depth):
        tree = [tree] * width
    return tree


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    """``genodiff ARGS`` in a process of its own, stopped after a generous time: what hangs
    fails instead of stopping the suite."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "genodiff.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    ("depth", "width", "command", "refusal"),
    [
        (60, 2, "info", "is nested more than 32 containers deep"),  # 2**60 leaves
        (20, 8, "export", "is not a tree of at most 100,000 values"),  # 8**20, 20 deep
    ],
)
def test_a_config_of_shared_lists_is_refused_in_one_line(tmp_path, depth, width, command, refusal):
    def edit(content, config):
        config["data"]["extra"] = shared_lists(depth, width)

    path = hostile_checkpoint(tmp_path / "shared.ckpt", edit)
    assert path.stat().st_size < 2_000_000  # the tree is small on disk
    out = tmp_path / "exported"
    args = {"info": ["info", str(path)], "export": ["export", "--checkpoint", str(path)]}[command]
    done = run_cli([*args, *(["--out", str(out)] if command == "export" else [])])
    assert done.returncode == 2, done.stderr[-2000:]  # was: a hang
    err = done.stderr.strip()
    assert err.startswith(f"genodiff {command}: error: {path}: hyper_parameters.config.data.extra")
    assert refusal in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["info", "eval", "export", "sample"])
def test_an_interpolation_in_a_stored_config_is_refused_not_resolved(
    tmp_path, capsys, monkeypatch, command
):
    home = str(tmp_path / "the-home-folder")
    monkeypatch.setenv("HOME", home)

    def edit(content, config):  # the data section as an OmegaConf container, as Hydra has it
        config["data"] = OmegaConf.create({**config["data"], "fasta": "${oc.env:HOME}"})

    path = str(hostile_checkpoint(tmp_path / "interpolated.ckpt", edit))
    out = tmp_path / "out"
    args = {
        "info": ["info", path],
        "eval": ["eval", "--checkpoint", path, "--num-windows", "1"],  # was: read $HOME as FASTA
        "export": ["export", "--checkpoint", path, "--out", str(out)],  # was: a TypeError
        "sample": ["sample", "--checkpoint", path, *SAMPLE, "--out", str(out)],
    }[command]
    assert cli.main(args) == 2
    err = one_line_error(capsys, command)
    assert f"{path}: hyper_parameters.config.data.fasta holds '${{oc.env:HOME}}'" in err
    assert "OmegaConf would resolve" in err and home not in err
    assert not out.exists()
    with pytest.raises(InputValueError, match=r"data\.fasta holds '\$\{oc\.env:HOME\}'"):
        load_model(path)


def test_a_plain_omegaconf_container_in_a_stored_config_loads_as_plain_values(tmp_path):
    def edit(content, config):
        config["data"] = OmegaConf.create(config["data"])

    path = hostile_checkpoint(tmp_path / "omegaconf.ckpt", edit)
    expected = read_checkpoint_file(path)["hyper_parameters"]["config"]["data"]  # allow-listed
    data = load_model(path).config["data"]
    assert type(data) is dict and data == OmegaConf.to_container(expected)


@pytest.mark.parametrize("command", ["export", "sample", "eval", "info"])
def test_an_unknown_objective_in_a_ckpt_is_one_line(tmp_path, capsys, command):
    def edit(content, config):
        config["objective"]["name"] = "edited"

    path = str(hostile_checkpoint(tmp_path / "edited.ckpt", edit))
    out = tmp_path / "out"
    args = {
        "export": ["export", "--checkpoint", path, "--out", str(out)],  # was: written anyway
        "sample": ["sample", "--checkpoint", path, *SAMPLE, "--out", str(out)],
        "eval": ["eval", "--checkpoint", path, "--num-windows", "1"],
        "info": ["info", path],  # was: printed as the run's objective
    }[command]
    assert cli.main(args) == 2
    err = one_line_error(capsys, command)
    assert "unknown objective 'edited'" in err and "known objectives: " in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["info", "sample", "load_pretrained"])
def test_a_config_json_field_of_another_type_is_one_line(tmp_path, capsys, command):
    training_checkpoint(tmp_path / "last.ckpt", seed=0)
    folder = export_model(tmp_path / "last.ckpt", tmp_path / "exported")
    config = json.loads((folder / "config.json").read_text())
    config["n_layer"] = "two"
    (folder / "config.json").write_text(json.dumps(config))
    refusal = f"{folder / 'config.json'} is inconsistent"
    if command == "load_pretrained":  # was: TypeError, deep in the backbone's constructor
        with pytest.raises(InputValueError, match=refusal) as raised:
            load_pretrained(folder)
        err = str(raised.value)
    else:
        out = tmp_path / "s.fa"
        args = ["sample", "--checkpoint", str(folder), *SAMPLE, "--out", str(out)]
        assert cli.main(args if command == "sample" else ["info", str(folder)]) == 2
        err = one_line_error(capsys, command)
        assert refusal in err and not out.exists()
    assert "model.n_layer: expected an integer, got 'two'" in err


@pytest.mark.parametrize("edit", ["interpolation", "nested"])
def test_an_exported_folders_json_is_a_bounded_plain_tree(tmp_path, capsys, edit):
    training_checkpoint(tmp_path / "last.ckpt", seed=0)
    folder = export_model(tmp_path / "last.ckpt", tmp_path / "exported")
    record_path = folder / "genodiff.json"
    if edit == "interpolation":
        record = json.loads(record_path.read_text())
        record["config"]["model"]["d_model"] = "${oc.env:GENODIFF_WIDTH}"
        record_path.write_text(json.dumps(record))
        refusal = f"{record_path}: config.model.d_model holds '${{oc.env:GENODIFF_WIDTH}}'"
    else:  # deeper than Python's JSON parser goes
        record_path.write_text('{"config": ' + "[" * 100_000 + "]" * 100_000 + "}")
        refusal = f"{record_path}: the record is nested more than 32 containers deep"
    assert cli.main(["info", str(folder)]) == 2
    assert refusal in one_line_error(capsys, "info")


def test_an_integer_tensor_among_the_weights_is_one_line(checkpoint, tmp_path, capsys):  # noqa: F811
    """A model.safetensors rewritten by another tool (no digest in its metadata) that holds a
    weight as int32: refused, not cast to float and sampled from."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "exported"
    assert cli.main(["export", "--checkpoint", checkpoint, "--out", str(folder)]) == 0
    weights = load_file(folder / "model.safetensors")
    name = sorted(n for n, t in weights.items() if t.is_floating_point())[0]
    weights[name] = (weights[name] * 100).to(torch.int32)
    save_file(weights, folder / "model.safetensors")  # no metadata: no digest to check
    capsys.readouterr()
    out = tmp_path / "s.fa"
    assert cli.main(["sample", "--checkpoint", str(folder), *SAMPLE, "--out", str(out)]) == 2
    err = one_line_error(capsys, "sample")
    assert "tensors of another kind of number (1): " in err and not out.exists()
    assert name.split(".", 1)[1] + " torch.int32 where the model has torch.float32" in err


# A run's data section edited in its record (what ``score``, ``windows`` and ``eval`` build):
# the edit of the run's config, and the refusal. Each was a TypeError or an AttributeError.
DATA_EDITS = {
    "another module": ({"name": "hg38"}, "unknown config key 'data.split_fractions'"),
    "no module": ({"name": "edited"}, "unknown data module 'edited'; known data modules: "),
    "an unknown key": ({"extra_key": 3}, "unknown config key 'data.extra_key'"),
    "not a section": (None, "config.data is a list, not a section of keys"),
}


def refusal_of(edit: str) -> str:
    """How the file is refused: a module nothing installed provides may be a plugin's, not an
    edit, so the file is not called inconsistent then."""
    if edit == "no module":
        return "was made with the data module 'edited' (config.data.name), which nothing"
    return "is inconsistent"


def edited_data(config: dict, edit: str) -> None:
    change = DATA_EDITS[edit][0]
    if change is None:
        config["data"] = [1, 2]
    else:
        config["data"].update(change)


@pytest.mark.parametrize("edit", list(DATA_EDITS))
@pytest.mark.parametrize("command", ["info", "sample", "eval"])
def test_an_edited_data_section_of_an_export_is_one_line(tmp_path, capsys, edit, command):
    training_checkpoint(tmp_path / "last.ckpt", seed=0)
    folder = export_model(tmp_path / "last.ckpt", tmp_path / "exported")
    record_path = folder / "genodiff.json"
    record = json.loads(record_path.read_text())
    edited_data(record["config"], edit)  # was: TypeError from the data module's constructor
    record_path.write_text(json.dumps(record))
    out = tmp_path / "s.fa"
    args = {
        "info": ["info", str(folder)],
        "sample": ["sample", "--checkpoint", str(folder), *SAMPLE, "--out", str(out)],
        "eval": ["eval", "--checkpoint", str(folder), "--num-windows", "1"],
    }[command]
    assert cli.main(args) == 2
    err = one_line_error(capsys, command)
    assert f"{record_path} {refusal_of(edit)}" in err and DATA_EDITS[edit][1] in err
    assert not out.exists()


@pytest.mark.parametrize("edit", list(DATA_EDITS))
def test_an_edited_data_section_of_a_ckpt_is_one_line(tmp_path, edit):
    path = hostile_checkpoint(tmp_path / "edited.ckpt", lambda _, c: edited_data(c, edit))
    with pytest.raises(UserInputError, match=re.escape(refusal_of(edit))) as raised:
        load_model(path)
    assert str(path) in str(raised.value) and DATA_EDITS[edit][1] in str(raised.value)


def test_samples_saved_over_a_file_are_refused_unless_overwrite(checkpoint, tmp_path):  # noqa: F811
    model = Model(load_model(checkpoint), checkpoint)
    samples = model.generate(2, length=16, steps=2)
    path = tmp_path / "mine.fa"
    path.write_text(">mine\nACGT\n")
    with pytest.raises(FileExistsError, match="mine.fa exists: choose another file, or overwrite"):
        samples.save(path)
    assert path.read_text() == ">mine\nACGT\n"  # was: replaced without asking
    samples.save(path, overwrite=True)
    assert [line for line in path.read_text().splitlines() if not line.startswith(">")] == list(
        samples
    )


@pytest.mark.parametrize(
    ("call", "refusal"),
    [
        (lambda m: m.generate(2.5, length=16, steps=2), "num_samples must be an integer, got 2.5"),
        (lambda m: m.generate("2", length=16, steps=2), "num_samples must be an integer, got '2'"),
        (lambda m: m.score(["ACGTACGT"], seed=-1), "seed must be >= 0, got -1"),  # was: numpy's
        (lambda m: m.score(["ACGTACGT"], seed=0.5), "seed must be an integer, got 0.5"),
        (lambda m: m.score(["ACGTACGT"], t_samples=0), "t_samples must be an integer >= 1"),
        (lambda m: m.score(["ACGTACGT"], batch_size=0), "batch_size must be >= 1, got 0"),
        (lambda m: m.score(None), "sequences must be a list of str, got NoneType"),
        (lambda m: m.score([b"ACGT"]), "sequences must be str, one of them is a bytes"),
        (lambda m: m.score(["ACGT", 7]), "sequences must be str, one of them is a int: 7"),
        (lambda m: m.generate(2, length=16, steps=2, generator=5), "generator must be a torch"),
        (lambda m: m.generate(2, length=16, steps=2, progress="yes"), "progress must be True"),
    ],
)
def test_library_arguments_of_the_wrong_kind_are_one_line(checkpoint, call, refusal):  # noqa: F811
    model = Model(load_model(checkpoint), checkpoint)
    with pytest.raises(InputValueError, match=refusal.replace("(", r"\(")):
        call(model)


@pytest.mark.parametrize("setting", ["devices", "num_nodes"])
def test_zero_processes_to_generate_to_a_file_are_refused(checkpoint, tmp_path, setting):  # noqa: F811
    model = Model(load_model(checkpoint), checkpoint)
    out = tmp_path / "s.fa"
    with pytest.raises(InputValueError, match=f"{setting}=0"):  # was: devices 0 read as 1
        model.generate_to_file(out, 2, length=16, steps=2, **{setting: 0})
    assert not out.exists()

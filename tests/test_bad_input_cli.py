"""Hostile input to the commands: every one exits 2 with one line on stderr that names what is
wrong, writes nothing and destroys nothing."""

from __future__ import annotations

import gzip
import itertools
import os
import shutil
from pathlib import Path

import pytest
import torch

from genodiff import cli
from genodiff.data import genome as genome_mod
from genodiff.data.genome import Genome, bgzip_fasta
from genodiff.generate import memory_needed
from genodiff.samplers.request import SampleRequest
from genodiff.samplers.time_grid import time_grid
from tests import test_sample_cli
from tests.test_cli import DEMO, TINY
from tests.test_genome_data import random_dna, write_fasta
from tests.test_sample_cli import sample

checkpoint = test_sample_cli.checkpoint  # its tiny trained run, once for this module too

GB_DEMO = str(Path(DEMO).with_name("genomic_benchmarks_demo.yaml"))


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"genodiff {command}: error:"), err
    assert "\n" not in err, err
    return err


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ------------------------------------------------------------- items 1-3: numbers out of range


@pytest.mark.parametrize(
    ("options", "option"),
    [
        (["--length", "0"], "--length"),  # was silently the training window (1,024)
        (["--length", "-3"], "--length"),
        (["--temperature", "nan"], "--temperature"),  # was N-only output, exit 0
        (["--temperature", "inf"], "--temperature"),
        (["--temperature", "-1"], "--temperature"),
        (["--batch-size", "0"], "--batch-size"),  # was "range() arg 3 must not be zero"
        (["--batch-size", "-1"], "--batch-size"),  # was "torch.cat(): expected a non-empty list"
        (["--num-samples", "0"], "--num-samples"),
        (["--num-samples", "-2"], "--num-samples"),
        (["--steps", "0"], "--steps"),
        (["--steps", "-2"], "--steps"),
    ],
)
def test_sample_numbers_out_of_range(checkpoint, tmp_path, capsys, options, option):
    out = tmp_path / "s.fa"
    assert sample(checkpoint, out, "--length", "8", *options) == 2
    assert option in one_line_error(capsys, "sample")
    assert list(tmp_path.iterdir()) == []  # no output, no .part


@pytest.mark.parametrize("length", ["0", "-3"])
def test_eval_length_below_one(checkpoint, capsys, length):
    assert cli.main(["eval", "--checkpoint", checkpoint, "--length", length]) == 2
    err = one_line_error(capsys, "eval")
    assert err.endswith(f"length must be >= 1 bp, got {length} (--length)")


# ------------------------------------------------------------- item 4: the step grid, memory


@pytest.mark.parametrize(("start", "end"), [(1.0, 1e-5), (1.0, 0.0), (1.0, 1e-3)])
@pytest.mark.parametrize("steps", [1, 2, 7, 100, 1024, 4097])
def test_time_grid_is_the_linspace_formula(start, end, steps):
    pairs = list(time_grid(start, end, steps))
    assert len(pairs) == steps
    assert all(t.dtype == torch.float64 and t.dim() == 0 for pair in pairs for t in pair)
    times = [pairs[0][0].item(), *(s.item() for _, s in pairs)]
    assert all(pairs[i][1].item() == pairs[i + 1][0].item() for i in range(steps - 1))
    delta, half = (end - start) / steps, (steps + 1) // 2
    formula = [
        start + delta * i if i < half else end - delta * (steps - i) for i in range(steps + 1)
    ]
    assert times == formula  # bit for bit
    assert times[0] == start and times[-1] == end
    # torch.linspace, which the samplers used to materialise: equal up to its last-bit rounding
    linspace = torch.linspace(start, end, steps + 1, dtype=torch.float64)
    torch.testing.assert_close(
        torch.tensor(times, dtype=torch.float64), linspace, rtol=0, atol=1e-15
    )


def test_time_grid_of_a_huge_step_count_is_lazy():
    # torch.linspace of 10**15 + 1 float64 values would need 8 PB; the grid computes each step.
    steps = 10**15
    grid = time_grid(1.0, 1e-5, steps)
    first = [(t.item(), s.item()) for t, s in itertools.islice(grid, 3)]
    delta = (1e-5 - 1.0) / steps
    assert first == [(1.0 + delta * i, 1.0 + delta * (i + 1)) for i in range(3)]


def test_samplers_do_not_materialise_the_grid(checkpoint, tmp_path, monkeypatch):
    def linspace(*args, **kwargs):
        raise AssertionError("a sampler materialised its time grid")

    monkeypatch.setattr(torch, "linspace", linspace)
    for sampler in ("ancestral", "cached"):
        out = tmp_path / f"{sampler}.fa"
        assert sample(checkpoint, out, "--length", "12", "--sampler", sampler) == 0
        assert out.is_file()


def test_memory_estimate_is_batch_x_length_x_vocab_float32_plus_ids():
    request = SampleRequest(num_samples=10, length=1000)
    assert memory_needed(request, batch_size=4, vocab_size=16) == (4 * 1000 * (16 * 4 + 8), 80000)
    assert memory_needed(request, batch_size=64, vocab_size=16)[0] == 10 * 1000 * 72


def test_a_length_that_cannot_fit_is_refused_up_front(checkpoint, tmp_path, capsys):
    out = tmp_path / "s.fa"
    assert sample(checkpoint, out, "--length", str(10**12)) == 2  # was a raw allocator error
    err = one_line_error(capsys, "sample")
    assert "needs at least" in err and "TiB" in err and "--length" in err
    assert sample(checkpoint, out, "--length", str(10**12), "--prefix", "ACGT") == 2
    assert "needs at least" in one_line_error(capsys, "sample")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- item 5: --out


def test_out_never_overwrites_the_checkpoint_or_the_template(checkpoint, tmp_path, capsys):
    model = tmp_path / "model.jsonl"  # a checkpoint whose name is a sample format
    shutil.copy(checkpoint, model)
    template = tmp_path / "in.fa"
    template.write_text(">t\nACGTnnnnACGT\n")
    before = files_in(tmp_path)
    base = ["sample", "--num-samples", "1", "--steps", "2"]
    assert cli.main([*base, "--checkpoint", str(model), "--length", "8", "--out", str(model)]) == 2
    assert "is the checkpoint this command reads" in one_line_error(capsys, "sample")
    infill = ["--infill", str(template)]
    assert cli.main([*base, "--checkpoint", checkpoint, *infill, "--out", str(template)]) == 2
    assert "is the --infill template this command reads" in one_line_error(capsys, "sample")
    link = tmp_path / "link.fa"  # another name of the template
    link.symlink_to(template)
    assert cli.main([*base, "--checkpoint", checkpoint, *infill, "--out", str(link)]) == 2
    assert "--infill template" in one_line_error(capsys, "sample")
    link.unlink()
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("name", ["samples.fa", "samples"])
def test_out_folder_is_an_error_without_a_part_file(checkpoint, tmp_path, capsys, name):
    folder = tmp_path / name
    folder.mkdir()
    assert sample(checkpoint, folder, "--length", "8") == 2  # was "[Errno 21]" + samples.fa.part
    err = one_line_error(capsys, "sample")  # without a suffix, was "unknown output format"
    assert f"{folder} is a folder; name a file in it, e.g. {folder / 'samples.fa'}" in err
    assert err.endswith("(--out)")
    assert [p.name for p in tmp_path.rglob("*")] == [name]


# ------------------------------------------------------------- item 6: gzip --infill


@pytest.mark.parametrize("packing", ["gzip", "bgzf"])
def test_compressed_infill_template_is_read(checkpoint, tmp_path, packing):
    plain = tmp_path / "plain.fa"
    plain.write_text(">t\nACGTACnnnnGG\nCCNNNNTT\n")
    template = tmp_path / "in.fa.gz"
    if packing == "gzip":
        template.write_bytes(gzip.compress(plain.read_bytes()))
    else:
        bgzip_fasta(plain, template)
    out = tmp_path / "i.fa"
    assert sample(checkpoint, out, "--infill", str(template)) == 0  # was a utf-8 decode error
    records = out.read_text().split(">")[1:]
    assert len(records) == 2
    for record in records:
        seq = "".join(record.splitlines()[1:])
        assert len(seq) == 20 and (seq[:6], seq[10:14], seq[18:]) == ("ACGTAC", "GGCC", "TT")


def test_truncated_gzip_infill_template(checkpoint, tmp_path, capsys):
    template = tmp_path / "in.fa.gz"
    template.write_bytes(gzip.compress((">t\n" + "ACGTN" * 400 + "\n").encode())[:40])
    assert sample(checkpoint, tmp_path / "i.fa", "--infill", str(template)) == 2
    err = one_line_error(capsys, "sample")
    assert "in.fa.gz" in err and "truncated or corrupt BGZF/gzip file" in err
    assert not (tmp_path / "i.fa").exists()


# ------------------------------------------------------------- item 7: --device


DEVICES = ["bogus", "cuda:x"] + ([] if torch.cuda.is_available() else ["cuda", "cuda:1"])


@pytest.mark.parametrize("device", DEVICES)
def test_unusable_device(checkpoint, tmp_path, capsys, device):
    out = tmp_path / "s.fa"
    assert sample(checkpoint, out, "--length", "8", "--device", device) == 2  # was a traceback
    err = one_line_error(capsys, "sample").replace("'", "")
    assert f"device {device}" in err and err.endswith("(--device)")
    assert not out.exists()
    assert cli.main(["eval", "--checkpoint", checkpoint, "--device", device]) == 2
    assert "--device" in one_line_error(capsys, "eval")
    samples = tmp_path / "x.fa"
    samples.write_text(">a\nACGTACGT\n")
    assert cli.main(["gen-ppl", str(samples), "--checkpoint", checkpoint, "--device", device]) == 2
    assert "--device" in one_line_error(capsys, "gen-ppl")


# ------------------------------------------------------------- item 8: damaged checkpoints


def damaged_checkpoints(checkpoint: str, folder: Path) -> dict[str, Path]:
    data = Path(checkpoint).read_bytes()
    files = {
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "text": b"hello, not a checkpoint\n",
    }
    folder.mkdir()
    for name, content in files.items():
        (folder / f"{name}.ckpt").write_bytes(content)
    torch.save({"a": 1}, folder / "other.ckpt")  # a torch file, but no genodiff run
    return {p.stem: p for p in folder.iterdir()}


NO_TORCH_FILE = "not a loadable genodiff checkpoint: it is no PyTorch file at all"


def assert_refused(capsys, command: str, path: Path) -> None:
    err = one_line_error(capsys, command)
    assert str(path) in err
    if path.stem == "text":  # no torch file, so neither truncated nor corrupt
        assert NO_TORCH_FILE in err and "truncated" not in err, err
        return
    assert ("not a loadable genodiff checkpoint (truncated or corrupt?" in err) or (
        path.stem == "other" and "not a genodiff training checkpoint" in err
    ), err


@pytest.mark.parametrize("given", ["config.yaml", "samples.fa"])
def test_a_runs_other_file_given_as_its_checkpoint_is_not_called_damaged(tmp_path, capsys, given):
    """Was: "config.yaml is not a loadable genodiff checkpoint (truncated or corrupt? Weights
    only load failed); use another checkpoint, e.g. the run's last.ckpt, or copy it again":
    a newcomer's config or samples file, given to --checkpoint, called a damaged checkpoint."""
    texts = {"config.yaml": "name: demo\nseed: 1\n", "samples.fa": ">sample_0\nACGTACGT\n"}
    path = tmp_path / given
    path.write_text(texts[given])
    out = tmp_path / "out.fa"
    argv = ["sample", "--checkpoint", str(path), "--num-samples", "1", "--out", str(out)]
    assert cli.main(argv) == 2
    err = one_line_error(capsys, "sample")
    assert err.startswith(f"genodiff sample: error: {path} is {NO_TORCH_FILE}"), err
    assert "corrupt" not in err and "copy it again" not in err
    assert "checkpoints/last.ckpt" in err and "run folder" in err  # what to give instead
    assert not out.exists()


def test_info_and_export_refuse_damaged_checkpoints(checkpoint, tmp_path, capsys):
    for path in damaged_checkpoints(checkpoint, tmp_path / "bad").values():
        before = path.read_bytes()
        assert cli.main(["info", str(path)]) == 2
        assert_refused(capsys, "info", path)
        out = tmp_path / f"export_{path.stem}"
        assert cli.main(["export", "--checkpoint", str(path), "--out", str(out)]) == 2
        assert_refused(capsys, "export", path)
        assert not out.exists() and path.read_bytes() == before


def test_train_refuses_a_damaged_ckpt_path(checkpoint, tmp_path, capsys):
    for path in damaged_checkpoints(checkpoint, tmp_path / "bad").values():
        out = tmp_path / f"run_{path.stem}"
        assert cli.main(["train", DEMO, *TINY, f"ckpt_path={path}", f"output_dir={out}"]) == 2
        err = one_line_error(capsys, "train")
        assert f"ckpt_path={path}" in err and "damaged or not a training checkpoint" in err
        assert not out.exists()


def test_sample_eval_gen_ppl_finetune_refuse_damaged_checkpoints(checkpoint, tmp_path, capsys):
    samples = tmp_path / "x.fa"
    samples.write_text(">a\nACGTACGT\n")
    for path in damaged_checkpoints(checkpoint, tmp_path / "bad").values():
        out = tmp_path / "s.fa"
        assert sample(str(path), out, "--length", "8") == 2
        assert_refused(capsys, "sample", path)
        assert not out.exists()
        assert cli.main(["eval", "--checkpoint", str(path)]) == 2
        assert_refused(capsys, "eval", path)
        assert cli.main(["gen-ppl", str(samples), "--checkpoint", str(path)]) == 2
        assert_refused(capsys, "gen-ppl", path)
        out = tmp_path / f"finetune_{path.stem}"
        assert cli.main(["finetune", GB_DEMO, f"pretrained={path}", f"output_dir={out}"]) == 2
        assert_refused(capsys, "finetune", path)
        assert not out.exists()


# ------------------------------------------------------------- item 9: a stale .fai


def replace_keeping_mtime(path: Path, write) -> None:
    """Replace ``path``'s content and give it back its old mtime (as cp -p / rsync -a do)."""
    old = path.stat()
    write()
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))


@pytest.mark.parametrize("width", [60, 37])  # same line width (wrong windows), another (crash)
@pytest.mark.parametrize("packing", ["plain", "bgzf"])
def test_an_index_of_replaced_content_is_rebuilt(tmp_path, width, packing):
    plain = tmp_path / "g.fa"
    path = tmp_path / ("g.fa.gz" if packing == "bgzf" else "g.fa")
    write_fasta(plain, {"a": random_dna(1000, 1), "b": random_dna(500, 2)})
    if packing == "bgzf":
        bgzip_fasta(plain, path)
    old = Genome(path)
    assert old.lengths == {"a": 1000, "b": 500}
    old.close()
    new = {"a": random_dna(3000, 3), "b": random_dna(700, 4), "c": random_dna(90, 5)}

    def write():
        write_fasta(plain, new, width=width)
        if packing == "bgzf":
            bgzip_fasta(plain, path)

    replace_keeping_mtime(path, write)
    assert Path(f"{path}.fai").stat().st_mtime >= path.stat().st_mtime  # mtime alone: "fresh"
    genome = Genome(path)
    assert genome.lengths == {name: len(seq) for name, seq in new.items()}
    for name, seq in new.items():
        assert genome.fetch(name, 0, len(seq)) == seq


def test_a_current_index_is_kept(tmp_path):
    path = write_fasta(tmp_path / "g.fa", {"a": random_dna(1000, 1)})
    Genome(path).close()
    fai = Path(f"{path}.fai")
    stamp = fai.stat().st_mtime_ns
    assert Genome(path).fetch("a", 0, 10) == random_dna(1000, 1)[:10]
    assert fai.stat().st_mtime_ns == stamp  # not rebuilt


def test_a_stale_index_in_a_read_only_folder_is_rebuilt_in_the_cache(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = write_fasta(folder / "g.fa", {"a": random_dna(1000, 1)})
    Genome(path).close()
    fai_before = Path(f"{path}.fai").read_bytes()
    seq = random_dna(2000, 2)
    replace_keeping_mtime(path, lambda: write_fasta(path, {"a": seq}, width=50))
    real = genome_mod._dir_is_writable
    monkeypatch.setattr(genome_mod, "_dir_is_writable", lambda p: p != folder and real(p))
    genome = Genome(path, cache_dir=tmp_path / "cache")
    assert genome.lengths == {"a": 2000} and genome.fetch("a", 0, 2000) == seq
    assert Path(f"{path}.fai").read_bytes() == fai_before  # the read-only folder untouched
    assert list((tmp_path / "cache").glob("*-g.fa.fai"))


def test_eval_scores_the_replaced_fasta(checkpoint, tmp_path, capsys):
    path = write_fasta(tmp_path / "g.fa", {"a": random_dna(256, 1)})
    args = ["eval", "--checkpoint", checkpoint, "--fasta", str(path), "--length", "64", "--json"]
    assert cli.main(args) == 0
    assert '"windows": 4' in capsys.readouterr().out
    replace_keeping_mtime(path, lambda: write_fasta(path, {"a": random_dna(640, 2)}, width=70))
    assert cli.main(args) == 0  # was 4 windows of the old index (same width) or a crash
    assert '"windows": 10' in capsys.readouterr().out


# ------------------------------------------------------------- items 10-11: damaged FASTA


def test_truncated_bgzf_fasta(checkpoint, tmp_path, capsys):
    plain = write_fasta(tmp_path / "g.fa", {"a": random_dna(200_000, 1)})
    whole = bgzip_fasta(plain, tmp_path / "whole.fa.gz").read_bytes()
    cut = tmp_path / "cut.fa.gz"
    cut.write_bytes(whole[: len(whole) // 2 + 37])  # mid-block
    with pytest.raises(ValueError, match=r"cut\.fa\.gz: truncated or corrupt BGZF/gzip file"):
        Genome(cut)
    args = ["eval", "--checkpoint", checkpoint, "--fasta", str(cut)]
    assert cli.main(args) == 2  # was struct.error
    err = one_line_error(capsys, "eval")
    assert str(cut) in err and "re-compress it with bgzip" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 8, "is not a FASTA file: it holds binary data"),
        (os.urandom(3000).replace(b">", b"x"), "is not a FASTA file: it holds binary data"),
        (b">a\nACGT\x00\x01\x02\n", "is not a FASTA file: it holds binary data"),
        (b"hello world\nthis is text\n", "this is not FASTA"),
    ],
)
def test_a_file_that_is_not_fasta(checkpoint, tmp_path, capsys, content, message):
    path = tmp_path / "random.fa"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        Genome(path)
    assert cli.main(["eval", "--checkpoint", checkpoint, "--fasta", str(path)]) == 2
    err = one_line_error(capsys, "eval")
    assert message in err and str(path) in err and "must be unique" not in err

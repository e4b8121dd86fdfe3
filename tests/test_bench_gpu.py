"""The CPU-runnable parts of bench/bench_gpu.py: its arguments and its refusal without CUDA."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults_are_the_papers_setting(bench):
    args = bench.parse_args([])
    assert (args.batch, args.length) == (128, 1024)
    assert (args.sample_num, args.sample_length, args.sample_steps) == (16, 1024, 1024)
    assert bench.parse_args(["--batch", "8", "--skip-sampling"]).batch == 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_says_so_and_fails(bench, capsys):
    assert bench.main(["--steps", "1"]) == 1
    captured = capsys.readouterr()
    assert "needs a CUDA GPU" in captured.err and captured.out == ""


SAMPLER_BENCH = BENCH.with_name("bench_gpu_sampler.py")


@pytest.fixture(scope="module")
def sampler_bench():
    spec = importlib.util.spec_from_file_location("bench_gpu_sampler", SAMPLER_BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sampler_bench_defaults_are_the_issues_setting(sampler_bench):
    args = sampler_bench.parse_args(["--out", "x"])
    assert (args.rows, args.length, args.steps) == ([16, 64, 256, 1024], 1024, 1024)
    assert args.samplers == ["ancestral", "first-hitting"] and args.dtype == "float32"
    assert sampler_bench.forward_flops(470_702, 64 * 1024) == 2 * 470_702 * 65_536


def test_the_sampler_bench_smoke_run_writes_its_tables(sampler_bench, tmp_path):
    assert sampler_bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench_gpu_sampler.json").read_text())
    rows = report["results"]
    assert [(r["sampler"], r["mode"]) for r in rows] == [
        ("ancestral", "eager"), ("ancestral", "graphed"),
        ("first-hitting", "eager"), ("first-hitting", "graphed"),
    ]  # fmt: skip
    for eager in rows[::2]:
        assert eager["bp_per_s"] == pytest.approx(2 * 12 / eager["seconds"])
        # T = 3 steps or one call a position, each on 2 x 12 tokens, then the final noise
        # removal on the rows (of 2) that still hold a mask, if any
        steps = 3 if eager["sampler"] == "ancestral" else 12
        assert eager["network_calls"] in (steps, steps + 1)
        final = eager["network_tokens"] - steps * 2 * 12
        assert final in ((0,) if eager["network_calls"] == steps else (12, 24))
        flops = 2 * report["parameters"] * eager["network_tokens"]
        assert eager["flop_per_s"] == pytest.approx(flops / eager["seconds"])
    if torch.cuda.is_available():  # graphed on the GPU: the eager sequences
        assert all(r["same_as_eager"] is True for r in rows[1::2])
    else:
        assert all(r["skipped"] == "CUDA graphs need a CUDA device" for r in rows[1::2])
    table = (tmp_path / "bench_gpu_sampler.md").read_text()
    assert table.count("| 2 x 12 |") == 4 and "2 x parameters x the tokens" in table
    if not torch.cuda.is_available():  # the CPU runs genodiff's own kernels, and says so
        assert report["mixer_kernels"].startswith("genodiff's exact path")
        assert f"mixers: {report['mixer_kernels']}" in table


def test_the_sampler_bench_masked_first_hitting_draws_the_last_n_positions(sampler_bench, tmp_path):
    # --masked 5 of 12 bp: the first 7 positions given, one network call a drawn position
    # (then the final noise removal where a row keeps a mask), bp/s of the 2 x 5 drawn
    args = ["--smoke", "--samplers", "first-hitting", "--masked", "5", "--out", str(tmp_path)]
    assert sampler_bench.main(args) == 0
    report = json.loads((tmp_path / "bench_gpu_sampler.json").read_text())
    eager = report["results"][0]
    assert eager["drawn"] == 5 and eager["bp_per_s"] == pytest.approx(2 * 5 / eager["seconds"])
    assert eager["network_calls"] in (5, 6)
    flops = 2 * report["parameters"] * eager["network_tokens"]
    assert eager["flop_per_s"] == pytest.approx(flops / eager["seconds"])
    table = (tmp_path / "bench_gpu_sampler.md").read_text()
    assert "| 2 x 12 (the last 5 drawn) | first-hitting |" in table

    parsed = sampler_bench.parse_args(args)
    parsed.rows, parsed.length = [2], 12
    model = sampler_bench.build_model(parsed, torch.device("cpu"))
    samples = sampler_bench.draw(model, "first-hitting", 2, parsed, warm=False)
    assert all(s.startswith("A" * 7) and len(s) == 12 for s in samples)


def test_the_sampler_bench_profiles_a_few_steps_by_op(sampler_bench, tmp_path):
    assert (
        sampler_bench.main(
            ["--smoke", "--samplers", "ancestral", "--profile", "3", "--out", str(tmp_path)]
        )
        == 0
    )
    text = (tmp_path / "profile.txt").read_text()
    steps = sampler_bench.PROFILED_STEPS
    assert text.startswith(f"3 rows x 12 bp, ancestral, {steps} steps ({steps + 1} network calls)")
    assert "Self CPU" in text and "aten::" in text  # the profiler's table of ops
    # the network ran in the profiled draw: its matrix products are among the ops
    assert any(op in text for op in ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul"))


def test_the_sampler_bench_names_the_mixer_kernels_it_ran(
    sampler_bench, upstream_fakes, monkeypatch
):
    from genodiff.ops import upstream_kernels_on_cpu

    cpu = torch.device("cpu")
    with upstream_kernels_on_cpu():  # the fakes stand in for mamba-ssm and causal-conv1d
        assert "mamba_inner_fn with causal-conv1d" in sampler_bench.mixer_kernels(cpu)
    monkeypatch.setitem(sys.modules, "causal_conv1d", None)  # mamba-ssm alone
    with upstream_kernels_on_cpu():
        assert "short convolution in PyTorch" in sampler_bench.mixer_kernels(cpu)
    assert sampler_bench.mixer_kernels(cpu).startswith("genodiff's exact path")


def test_the_gpu_measurements_script_runs_its_sampler_parts_in_smoke_form(tmp_path):
    # bench/gpu_measurements.sh --smoke: the same parts on any machine, each with its exit
    # status; OUT holds one tar (the device tool brings back 8 files at most) of every part's
    # log and files
    import tarfile

    done = subprocess.run(
        ["bash", str(BENCH.with_name("gpu_measurements.sh")), str(tmp_path), "--smoke"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line.split(" (")[0] for line in done.stdout.splitlines()] == [
        "profile: exit 0", "bf16: exit 0",
    ]  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == ["measurements.tar"]
    with tarfile.open(tmp_path / "measurements.tar") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    parts = tmp_path / "x"
    assert (parts / "profile" / "profile.txt").read_text().startswith("2 rows x 12 bp")
    report = json.loads((parts / "bf16" / "bench_gpu_sampler.json").read_text())
    assert report["dtype"] == "bfloat16" and (parts / "bf16.log").is_file()


def test_the_gpu_sampler_ab_script_runs_both_revisions_in_smoke_form(tmp_path):
    # bench/gpu_sampler_ab.sh OUT BASE --smoke: BASE's bench and this checkout's, alternately
    # (in float32 only: on the GPU also in bfloat16); here BASE is a copy of this checkout
    # whose bench script says where it ran from, so each part is seen to run its own tree
    import shutil
    import tarfile

    base = tmp_path / "base"
    shutil.copytree(BENCH.parents[1] / "genodiff", base / "genodiff")
    shutil.copytree(BENCH.parent, base / "bench")
    shutil.copytree(BENCH.parents[1] / "configs", base / "configs")
    script = base / "bench" / "bench_gpu_sampler.py"
    marked = script.read_text().replace("\ndef main(", "\nprint('ran', __file__)\n\n\ndef main(")
    script.write_text(marked)
    done = subprocess.run(
        ["bash", str(BENCH.with_name("gpu_sampler_ab.sh")), str(tmp_path / "out"), str(base),
         "--smoke"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parts = [line.split(" (")[0] for line in done.stdout.splitlines()]
    assert parts == ["base_float32: exit 0", "head_float32: exit 0"]
    with tarfile.open(tmp_path / "out" / "ab.tar") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    parts = tmp_path / "x"
    assert f"ran {script}" in (parts / "base_float32.log").read_text()
    assert "ran " not in (parts / "head_float32.log").read_text()
    assert (parts / "head_float32" / "profile.txt").is_file()
    report = json.loads((parts / "base_float32" / "bench_gpu_sampler.json").read_text())
    assert report["dtype"] == "float32"

"""The CPU-runnable parts of bench/bench_gpu.py: its arguments and its refusal without CUDA."""

from __future__ import annotations

import importlib.util
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

"""Progress on stderr (genodiff.progress), the sampler steps it counts, the CLI's
--no-progress flag, a light `import genodiff.cli`, and a quiet `genodiff train`."""

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from genodiff import cli
from genodiff import progress as progress_module
from genodiff.backbones.capabilities import Capabilities
from genodiff.generate import draw_samples
from genodiff.progress import LINE_INTERVAL, TERMINAL_INTERVAL, Progress, progress_wanted
from genodiff.samplers.request import SampleRequest
from genodiff.training.progress_lines import PlainProgressBar
from genodiff.training.trainer import StepRunProgressBar, progress_bars
from tests.dna_objectives import DNA, mdlm, sedd
from tests.test_cli import trained_run  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
LONG_COMMANDS = ("train", "finetune", "sample", "eval", "gen-ppl", "evaluate-samples", "export")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_count_and_finish():
    stream = io.StringIO()
    progress = Progress("genodiff x", stream=stream, interval=3600)
    for done in range(1, 5):
        progress.update(done, 4, "things")
    lines = stream.getvalue().splitlines()
    # The first update and the last are drawn; the ones in between fall inside the interval.
    assert [line.split(",")[0] for line in lines] == [
        "genodiff x: things 1/4 (25%)",
        "genodiff x: things 4/4 (100%)",
    ]
    # The first line has no rate nor ETA (nothing to time yet), the last no ETA.
    assert "/s" not in lines[0] and "ETA" not in lines[0] and "ETA" not in lines[1]
    progress.note("writing out/")
    assert stream.getvalue().splitlines()[-1] == "genodiff x: writing out/"


def test_progress_on_a_terminal_rewrites_one_line():
    stream = Terminal()
    with Progress("genodiff x", stream=stream, interval=0) as progress:
        progress.update(1, 2, "steps")
        assert stream.getvalue().startswith("\r") and not stream.getvalue().endswith("\n")
    assert stream.getvalue().endswith("\n")  # closed: the line is ended


def test_disabled_progress_writes_nothing():
    stream = Terminal()
    with Progress("genodiff x", enabled=False, stream=stream) as progress:
        progress.update(1, 2, "steps")
        progress.note("stage")
    assert stream.getvalue() == ""


def test_progress_wanted(monkeypatch):
    monkeypatch.delenv("GENODIFF_PROGRESS", raising=False)
    assert progress_wanted()  # on by default, terminal or not
    assert not progress_wanted(no_progress=True)
    monkeypatch.setenv("GENODIFF_PROGRESS", "1")
    assert progress_wanted()
    assert not progress_wanted(no_progress=True)
    monkeypatch.setenv("GENODIFF_PROGRESS", "0")
    assert not progress_wanted()


class Clock:
    """``time.monotonic`` for ``genodiff.progress``, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_in_a_file_come_every_interval_with_rate_and_eta(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    stream = io.StringIO()  # a log file: no terminal
    progress = Progress("genodiff x", stream=stream, start=100)  # 100 steps done before
    assert progress.interval == LINE_INTERVAL and not progress.terminal
    for step in range(101, 201):  # one step every 2 s
        clock.now += 2
        progress.update(step, 300, "steps", extra="loss 1.5")
    lines = stream.getvalue().splitlines()
    # Drawn at step 101 (the first), then whenever LINE_INTERVAL (30 s = 15 steps) has passed.
    assert [line.split()[3] for line in lines] == [f"{s}/300" for s in range(101, 201, 15)]
    # At step 191: 91 steps in 182 s, 0.5 steps/s; 109 steps to go: 218 s.
    assert lines[-1] == "genodiff x: steps 191/300 (64%), 0.5 steps/s, 3:02, ETA 3:38, loss 1.5"
    progress.update(200, 300, "steps", force=True)
    assert stream.getvalue().splitlines()[-1].startswith("genodiff x: steps 200/300 (67%)")
    progress.update(300, None, "steps", force=True)  # no total known: the count and rate
    # 199 steps since the first update (step 101, at 2 s) in 198 s.
    assert stream.getvalue().splitlines()[-1] == "genodiff x: steps 300, 1.01 steps/s, 3:20"


def test_the_rate_and_eta_leave_out_the_time_before_the_first_update(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    stream = io.StringIO()
    progress = Progress("genodiff x", stream=stream)  # a log file: a line every 30 s
    clock.now += 300  # start-up before the first step: loading, compiling kernels
    progress.update(1, 400, "steps")
    for step in range(2, 32):  # then one step a second
        clock.now += 1
        progress.update(step, 400, "steps")
    first, second = stream.getvalue().splitlines()
    # The first step took 5:00 and tells nothing of the pace: no rate, no ETA.
    assert first == "genodiff x: steps 1/400 (0%), 5:00"
    # Steps 1 to 31 in 30 s: 1 step/s, and 369 steps to go, 6:09 (not the 0.094 steps/s and
    # 1:05:28 that counting the start-up would give).
    assert second == "genodiff x: steps 31/400 (8%), 1 steps/s, 5:30, ETA 6:09"


def test_a_single_final_update_has_its_rate_from_the_start(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    stream = io.StringIO()
    progress = Progress("genodiff x", stream=stream, start=6)  # 6 done before (a resume)
    clock.now += 8
    progress.update(10, 10, "windows")  # the 4 left, in 8 s
    assert stream.getvalue() == "genodiff x: windows 10/10 (100%), 0.5 windows/s, 0:08\n"


def test_progress_on_a_terminal_redraws_every_half_second():
    progress = Progress("genodiff x", stream=Terminal())
    assert progress.interval == TERMINAL_INTERVAL and progress.terminal


def test_lightning_bar_is_plain_lines_where_stderr_is_no_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    (bar,) = progress_bars({}, "genodiff train")
    assert isinstance(bar, PlainProgressBar) and bar.label == "genodiff train"
    monkeypatch.setattr(sys, "stderr", Terminal())
    (bar,) = progress_bars({}, "genodiff train")
    assert isinstance(bar, StepRunProgressBar)
    assert progress_bars({"enable_progress_bar": False}, "genodiff train") == []


def test_request_reports_its_steps_as_a_part_of_the_whole():
    reports = []
    request = SampleRequest(1, 4, steps=3, on_step=lambda *report: reports.append(report))
    assert list(request.part(1, 2).reporting("abc", 3)) == ["a", "b", "c"]
    assert reports == [(4, 6), (5, 6), (6, 6)]  # the second of two parts of 3 steps each
    assert SampleRequest(1, 4).part(1, 2).on_step is None


class Bigram(nn.Module):
    """A network whose logits depend on the token at each position only."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(DNA.vocab_size, DNA.vocab_size)
        self.capabilities = Capabilities(vocab_size=DNA.vocab_size)

    def forward(self, ids: torch.Tensor, sigma: torch.Tensor | None = None) -> torch.Tensor:
        return self.table(ids)  # (B, L, V)


@pytest.mark.parametrize("sampler", ["ancestral", "cached", "first-hitting", "semi-ar"])
def test_sampling_progress_counts_steps_and_changes_no_sample(sampler):
    torch.manual_seed(0)
    model, objective = Bigram(), mdlm()
    semi_ar = {"block": 6, "stride": 3} if sampler == "semi-ar" else {}
    request = SampleRequest(5, 12, steps=7, sampler=sampler, **semi_ar)
    stream = io.StringIO()
    progress = Progress("genodiff sample", stream=stream, interval=0)
    shown = draw_samples(objective, model, request, seed=3, batch_size=2, progress=progress)
    plain = draw_samples(objective, model, request, seed=3, batch_size=2)
    assert torch.equal(shown, plain)
    counts = [line.split()[4].split("/") for line in stream.getvalue().splitlines()]
    done = [int(d) for d, _ in counts]
    (total,) = {int(t) for _, t in counts}
    per_batch = {"first-hitting": 12, "semi-ar": 3 * 7}.get(sampler, 7)  # 3 windows of 7 steps
    assert total == 3 * per_batch  # 3 batches (2 + 2 + 1 samples)
    assert done == sorted(done) and done[-1] > 2 * per_batch  # into the last batch


def test_sample_into_a_log_shows_progress_lines(
    trained_run,  # noqa: F811
    tmp_path,
    capsys,
    monkeypatch,
):
    monkeypatch.delenv("GENODIFF_PROGRESS")  # as by default; stderr is captured: no terminal
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    args = ["sample", "--checkpoint", str(checkpoint), "--num-samples", "2", "--length", "64",
            "--steps", "8", "--out", str(tmp_path / "samples.fa")]  # fmt: skip
    capsys.readouterr()
    assert cli.main(args) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if line.startswith("genodiff sample: ")]
    # One batch of 8 steps: its first step and its last, each on its own line.
    assert [line.split(",")[0] for line in lines] == [
        "genodiff sample: sampling steps 1/8 (12%)",
        "genodiff sample: sampling steps 8/8 (100%)",
    ]
    assert "\r" not in "".join(err)  # nothing redrawn in place
    assert cli.main([*args, "--overwrite", "--no-progress"]) == 0
    assert "genodiff sample: " not in capsys.readouterr().err


def test_long_commands_take_no_progress():
    subcommands = cli.build_parser()._subparsers._group_actions[0].choices
    for command in LONG_COMMANDS:
        options = {o for a in subcommands[command]._actions for o in a.option_strings}
        assert "--no-progress" in options, command


def test_import_of_the_cli_is_light():
    code = (
        "import sys, genodiff.cli; genodiff.cli.build_parser(); "
        "print(sorted(m for m in ('torch', 'lightning', 'hydra', 'numpy', 'omegaconf') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_train_shows_no_lightning_advert_or_leafspec_warning(tmp_path):
    args = [
        "configs/demo.yaml",
        "model=caduceus_tiny",
        "data.max_length=64",
        "data.batch_size=4",
        "trainer.max_steps=1",
        "trainer.val_check_interval=1",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "samples.num_samples=0",
        f"output_dir={tmp_path / 'run'}",
    ]
    env = {**os.environ, "GENODIFF_PROGRESS": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "genodiff.cli", "train", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    output = run.stdout + run.stderr
    assert "genodiff: test NELBO" in output  # it trained, validated and tested
    assert "Tip:" not in output and "litlogger" not in output
    assert "LeafSpec" not in output


# Runs the smallest CPU kernel on float32 and float64; prints (loaded from the cache, compiled).
MIXER_CONV_TWICE = (
    "import torch; from genodiff.ops import _scan_cpu; "
    "S, D, K = 1, 4, 3; xz = torch.randn(1, 5, 1, 2 * D); "
    "_scan_cpu.mixer_conv(xz, torch.randn(S, D, K), torch.randn(S, D), torch.empty(S, 1, 5, D)); "
    "f = torch.float64; _scan_cpu.mixer_conv(xz.to(f), torch.randn(S, D, K, dtype=f), "
    "torch.randn(S, D, dtype=f), torch.empty(S, 1, 5, D, dtype=f)); "
    "stats = _scan_cpu._mixer_conv_kernel.stats; "
    "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))"
)


def test_kernel_compilation_is_announced_once_per_cache(tmp_path):
    """A cold numba cache compiles (and says so, once); a warm one loads without a word."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", MIXER_CONV_TWICE], env=env, capture_output=True, text=True
        )
        for _ in range(2)
    ]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr
    # (loaded from the cache, compiled) per run: numba's own count of what it did
    assert [run.stdout.split() for run in runs] == [["0", "2"], ["2", "0"]]
    notice = "genodiff: compiling the CPU kernels (once per install and dtype, ~20 s)"
    assert runs[0].stderr.count(notice) == 1  # two signatures compiled, one notice
    assert notice not in runs[1].stderr  # both loaded, nothing compiled: no notice


def test_an_installed_wheel_caches_its_kernels_outside_site_packages(tmp_path):
    """numba caches compiled kernels beside their source where it can write; for an installed
    wheel that was site-packages/genodiff/ops/__pycache__, which `pip uninstall` leaves behind
    (the leftover genodiff/ folder then hides a later install). Now they go to the user's cache
    folder, and a second run loads them from there."""
    site = tmp_path / "site-packages"  # a copy of genodiff laid out as a wheel installs it
    shutil.copytree(
        ROOT / "genodiff", site / "genodiff", ignore=shutil.ignore_patterns("__pycache__")
    )
    (site / "genodiff" / "_bundle").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env |= {"PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", MIXER_CONV_TWICE + "; print(_scan_cpu.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        for _ in range(2)
    ]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout.split()[2] == str(site / "genodiff" / "ops" / "_scan_cpu.py")
    assert [run.stdout.split()[:2] for run in runs] == [["0", "2"], ["2", "0"]]
    assert not [p for p in site.rglob("*") if p.suffix in (".nbi", ".nbc")]
    cached = {p.suffix for p in (tmp_path / "xdg" / "genodiff" / "numba").rglob("*")}
    assert {".nbi", ".nbc"} <= cached


def test_only_the_main_process_announces_the_kernel_compilation(monkeypatch, capsys):
    """The processes of a ``--devices`` run compile at once: one notice, the main one's (was:
    one per process)."""
    from types import SimpleNamespace

    from genodiff.ops._scan_cpu import COMPILE_NOTICE, KERNELS, _FirstCompileNotice

    compiling = SimpleNamespace(data={"dispatcher": KERNELS[0]})
    for rank in ("1", "0"):
        monkeypatch.setenv("LOCAL_RANK", rank)  # Lightning's launcher sets it in the others
        _FirstCompileNotice(KERNELS).on_start(compiling)
    assert capsys.readouterr().err.splitlines() == [COMPILE_NOTICE]


@pytest.mark.parametrize(
    ("sampler", "objective"),
    [("ancestral", mdlm), ("cached", mdlm), ("first-hitting", mdlm), ("euler", sedd)],
)
def test_sampling_progress_reaches_its_end_when_nothing_is_left_to_draw(sampler, objective):
    # An infill with one position to draw unmasks it long before the last of 40 steps; the
    # sampler stopped there without a word, so the progress stayed at "1/40 (2%)" (first-hitting
    # never reported its last event at all).
    torch.manual_seed(0)
    given = torch.ones(12, dtype=torch.bool)
    given[5] = False
    template = torch.full((12,), DNA.encode("A")[0])
    request = SampleRequest(2, 12, steps=40, sampler=sampler, template=template, given=given)
    stream = io.StringIO()
    progress = Progress("genodiff sample", stream=stream, interval=3600)
    draw_samples(objective(), Bigram(), request, seed=3, batch_size=2, progress=progress)
    last = stream.getvalue().splitlines()[-1]
    assert "(100%)" in last, stream.getvalue()

"""Thread counts and OpenMP waiting on a shared machine (genodiff/threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from genodiff import threads
from genodiff.cli import main
from genodiff.errors import InputValueError

THREAD_VARIABLES = ("GENODIFF_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@pytest.fixture
def clean_environment(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, "auto"), ("auto", "auto"), (" System ", "system"), ("3", 3), (2, 2)],
)
def test_threads_setting_accepts_auto_system_and_counts(clean_environment, given, expected):
    assert threads.threads_setting(given) == expected


@pytest.mark.parametrize("given", ["0", "-1", "two", "1.5", ""])
def test_threads_setting_refuses_anything_else_naming_the_source(clean_environment, given):
    with pytest.raises(InputValueError, match=r"^threads=.*auto, system or a number") as refused:
        threads.threads_setting(given)  # the argument's name: the CLI adds its option
    assert refused.value.parameter == "threads"
    clean_environment.setenv("GENODIFF_THREADS", given)
    with pytest.raises(InputValueError, match=r"GENODIFF_THREADS="):
        threads.threads_setting()


def test_spinning_is_limited_unless_the_user_chose_how_openmp_waits(clean_environment):
    threads.limit_spinning()
    assert os.environ["GOMP_SPINCOUNT"] == "1000"
    clean_environment.setenv("GOMP_SPINCOUNT", "5")
    threads.limit_spinning()
    assert os.environ["GOMP_SPINCOUNT"] == "5"
    clean_environment.delenv("GOMP_SPINCOUNT")
    clean_environment.setenv("OMP_WAIT_POLICY", "ACTIVE")
    threads.limit_spinning()
    assert "GOMP_SPINCOUNT" not in os.environ
    clean_environment.delenv("OMP_WAIT_POLICY")
    clean_environment.setenv("GENODIFF_THREADS", "system")
    threads.limit_spinning()
    assert "GOMP_SPINCOUNT" not in os.environ


def test_import_genodiff_sets_the_spin_count_before_torch_loads_openmp():
    """OpenMP reads GOMP_SPINCOUNT once, when torch loads it: ``import genodiff`` (which imports
    no torch) must have set it by then, in the C environment that the runtime reads."""
    code = (
        "import sys, ctypes, genodiff\n"
        "assert 'torch' not in sys.modules\n"
        "import torch\n"
        "getenv = ctypes.CDLL(None).getenv\n"
        "getenv.restype = ctypes.c_char_p\n"
        "print(getenv(b'GOMP_SPINCOUNT').decode())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == str(threads.SPIN_COUNT)


def write_stat(path, cpus: dict[int, tuple[int, int]]) -> None:
    """A /proc/stat with, per CPU, (busy user ticks, idle ticks); other fields zero."""
    lines = ["cpu  999 0 0 999 0 0 0 0 0 0"]
    lines += [f"cpu{cpu} {busy} 0 0 {idle} 0 0 0 0 0 0" for cpu, (busy, idle) in cpus.items()]
    path.write_text("\n".join(lines + ["intr 1 2 3", "ctxt 42"]) + "\n")


def test_free_cores_are_the_idle_share_of_the_usable_cpus_over_the_interval(
    clean_environment, tmp_path
):
    stat = tmp_path / "stat"
    write_stat(stat, {0: (100, 100), 1: (100, 100), 2: (0, 0)})
    # over the interval: cpu0 busy 50 / idle 50, cpu1 idle 100 / 100, cpu2 (not usable) busy
    after = {0: (150, 150), 1: (100, 200), 2: (500, 0)}
    clean_environment.setattr(threads, "PROC_STAT", str(stat))
    clean_environment.setattr(threads, "usable_cpus", lambda: [0, 1])
    clean_environment.setattr(threads.time, "sleep", lambda seconds: write_stat(stat, after))
    assert threads.free_cores() == pytest.approx(2 * (50 + 100) / (100 + 100))


def test_free_cores_without_proc_stat_fall_back_to_the_load_average(clean_environment, tmp_path):
    clean_environment.setattr(threads, "PROC_STAT", str(tmp_path / "missing"))
    clean_environment.setattr(threads, "usable_cpus", lambda: [0, 1, 2, 3])
    clean_environment.setattr(threads.os, "getloadavg", lambda: (1.25, 0.0, 0.0))
    assert threads.free_cores() == pytest.approx(2.75)


@pytest.mark.parametrize(("free", "expected"), [(0.0, 1), (0.4, 1), (1.6, 2), (7.9, 4)])
def test_auto_takes_the_free_cores_rounded_within_one_and_the_usable_cpus(
    clean_environment, free, expected
):
    clean_environment.setattr(threads, "usable_cpus", lambda: [0, 1, 2, 3])
    clean_environment.setattr(threads, "free_cores", lambda: free)
    assert threads.configure_threads() == expected
    assert torch.get_num_threads() == expected


def test_a_count_is_set_and_system_or_the_users_omp_num_threads_change_nothing(clean_environment):
    torch.set_num_threads(2)
    assert threads.configure_threads(1) == 1 and torch.get_num_threads() == 1
    assert threads.configure_threads("system") is None and torch.get_num_threads() == 1
    clean_environment.setenv("OMP_NUM_THREADS", "2")
    clean_environment.setattr(threads, "free_cores", lambda: pytest.fail("measured"))
    assert threads.configure_threads() is None and torch.get_num_threads() == 1


def test_every_command_takes_threads_and_refuses_a_bad_value_in_one_line(clean_environment, capsys):
    assert main(["info", "--threads", "many", "nothing.ckpt"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "genodiff info: error: threads='many': give auto, system or a number of threads "
        "(1 or more) (--threads)"
    )
    torch.set_num_threads(2)
    main(["info", "--threads", "1", "nothing.ckpt"])  # the missing file is a user error
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("place", ["after", "before"])
def test_a_data_subcommand_takes_threads_after_its_name_or_before(
    clean_environment, capsys, tmp_path, place
):
    """docs/troubleshooting.md: --threads on any command. Was: `genodiff data labelled-split
    ... --threads 1` was refused as an unrecognized argument (only `data --threads 1 ...`)."""
    command = ["labelled-split", str(tmp_path / "none.yaml"), "--dest", str(tmp_path / "out")]
    argv = ["data", *command, "--threads", "1"] if place == "after" else [
        "data", "--threads", "1", *command
    ]  # fmt: skip
    torch.set_num_threads(2)
    assert main(argv) == 2  # the missing config is a user error, reported by the command
    assert "none.yaml' not found" in capsys.readouterr().err
    assert torch.get_num_threads() == 1

"""A warning genodiff gives its user names the user's line (``genodiff/user_warnings.py``), as
NumPy's and pandas' do: here, this file and the line of the call into genodiff. Was: a line of
genodiff's own (``genodiff/trained_window.py:89``, ``genodiff/checkpoints/folders.py:432``,
``genodiff/metrics/suite.py:215``), whatever the call that met it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

import genodiff
from genodiff.errors import UserInputWarning
from genodiff.progress import shown_by_the_main_process_alone
from tests.test_cli import ROOT
from tests.test_generation_config import LENGTH, tiny


def next_line() -> int:
    """The number of the line after the caller's."""
    return sys._getframe(1).f_lineno + 1


def where(caught: pytest.WarningsRecorder, words: str) -> tuple[str, int]:
    """The file and line of the one warning caught that says ``words``."""
    (warning,) = [w for w in caught if words in str(w.message)]
    return warning.filename, warning.lineno


def test_generate_past_the_trained_windows_names_the_generate_line():
    model = tiny()
    with pytest.warns(UserWarning) as caught:
        line = next_line()
        model.generate(1, length=2 * LENGTH, steps=1)
    assert where(caught, f"sampling {2 * LENGTH} bp") == (__file__, line)


def test_load_of_a_folder_with_unknown_keys_names_the_load_line(tmp_path):
    folder = tiny().save_pretrained(tmp_path / "m", weights="raw")
    record = json.loads((folder / "genodiff.json").read_text())
    record["config"]["watermark"] = {"key": 7}  # a key this version does not know
    (folder / "genodiff.json").write_text(json.dumps(record))
    with pytest.warns(UserWarning) as caught:
        line = next_line()
        genodiff.load(folder)
    assert where(caught, "sets watermark") == (__file__, line)


def test_evaluate_samples_with_a_small_reference_names_the_evaluate_line(tmp_path):
    samples = ["ACGTTGCAAC" * 10, "TTGACCAGTA" * 10, "GGCATACGTA" * 10, "CATGCATTGC" * 10]
    reference = [s[::-1] for s in samples] + ["ACGGTCAATG" * 10, "TACGGATCCA" * 10]
    with pytest.warns(UserWarning) as caught:
        line = next_line()
        genodiff.evaluate_samples(samples, reference, out=tmp_path / "report")
    assert where(caught, "only 6 reference windows for 4 samples") == (__file__, line)


def test_a_warning_named_at_the_users_line_is_still_left_to_the_main_process(monkeypatch):
    """The other processes of a ``devices=N`` run meet the same warnings: genodiff's are
    shown by the main process alone, also now that they name the user's file, not genodiff's."""
    shown = []
    show = shown_by_the_main_process_alone(lambda *args: shown.append(args[0]))
    monkeypatch.setenv("LOCAL_RANK", "1")  # a second process of the run
    show(UserInputWarning("past the trained windows"), UserInputWarning, __file__, 1)
    show(UserWarning("another library's"), UserWarning, "/elsewhere/lib.py", 3)
    assert [str(message) for message in shown] == ["another library's"]


def test_the_command_line_still_says_them_in_one_line(tmp_path, capsys):
    """Under genodiff's command line no line is the user's: the warning keeps genodiff's frame,
    and the command prints it as one line, as before."""
    from genodiff import cli

    folder = tiny().save_pretrained(tmp_path / "m", weights="raw")
    options = ["--length", str(2 * LENGTH), "--num-samples", "1", "--steps", "1"]
    argv = ["sample", "--checkpoint", str(folder), "--out", str(tmp_path / "s.fa"), *options]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main([*argv, "--no-progress"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"genodiff sample: warning: sampling {2 * LENGTH} bp from a model")


WARN_FROM_MAIN = (
    "from genodiff.training.run_checks import warn_ema_stays_near_init\n"
    "warn_ema_stays_near_init(0.9999, False, 10)\n"
)


@pytest.mark.parametrize("where_run", ["elsewhere", "inside the package"])
@pytest.mark.parametrize("how", ["-c", "-m"])
def test_a_warning_in_a_main_module_that_is_no_script_is_a_warning(tmp_path, how, where_run):
    # Was: ImportError ("'__main__' is not a built-in module", "loader for ... cannot handle
    # __main__"): the loader of __main__ was asked for its source. And run from inside the
    # package, "<string>" resolved into it and was taken for genodiff's own file.
    (tmp_path / "usermod.py").write_text(WARN_FROM_MAIN)
    argument = WARN_FROM_MAIN if how == "-c" else "usermod"
    cwd = tmp_path if where_run == "elsewhere" else ROOT / "genodiff"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    done = subprocess.run(
        [sys.executable, how, argument], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    named = "<string>" if how == "-c" else str(tmp_path / "usermod.py")
    assert f"{named}:2: UserInputWarning: ema.decay=0.9999 without ema.warmup" in done.stderr

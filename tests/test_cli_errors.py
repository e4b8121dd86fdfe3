"""The CLI prints one line only for errors in what the user gave (``genodiff.errors``) and for
the file system's refusals about the user's files and disk; any other error is a bug and keeps
its traceback."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from genodiff import cli
from genodiff.checkpoints import info
from genodiff.errors import InputKeyError, InputValueError

ROOT = Path(__file__).resolve().parents[1]


def fail_inside_info(monkeypatch, tmp_path, error: Exception) -> list[str]:
    """``genodiff info`` on a file whose reading raises ``error``; the command's argv."""
    checkpoint = tmp_path / "run.ckpt"
    checkpoint.write_bytes(b"")

    def open_checkpoint(path):
        raise error

    monkeypatch.setattr(info, "open_checkpoint", open_checkpoint)
    return ["info", str(checkpoint)]


@pytest.mark.parametrize(
    "error",
    [
        KeyError("state_dict"),
        ValueError("too many values to unpack"),
        ImportError("cannot import name 'x'"),
        OSError(errno.ECONNRESET, "Connection reset by peer"),
        FloatingPointError("overflow"),
    ],
    ids=["KeyError", "ValueError", "ImportError", "OSError", "FloatingPointError"],
)
def test_an_internal_error_keeps_its_traceback(monkeypatch, tmp_path, capsys, error):
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    with pytest.raises(type(error)) as raised:
        cli.main(argv)
    assert raised.value is error
    assert "error:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "error, line",
    [
        (InputValueError("run.ckpt is truncated"), "run.ckpt is truncated"),
        (InputKeyError("unknown backbone 'x'"), "unknown backbone 'x'"),  # no KeyError quotes
        (FileNotFoundError(errno.ENOENT, "No such file", "a.fa"), "No such file: 'a.fa'"),
        (PermissionError(errno.EACCES, "Permission denied", "a.fa"), "Permission denied: 'a.fa'"),
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    ],
    ids=["input value", "input key", "missing file", "permission", "disk full"],
)
def test_a_user_error_is_one_line(monkeypatch, tmp_path, capsys, error, line):
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    assert cli.main(argv) == 2
    (printed,) = capsys.readouterr().err.strip().splitlines()
    assert printed.startswith("genodiff info: error: ") and printed.endswith(line)


def test_genodiff_debug_shows_the_traceback_of_a_user_error(monkeypatch, tmp_path):
    error = InputValueError("run.ckpt is truncated")
    argv = fail_inside_info(monkeypatch, tmp_path, error)
    monkeypatch.setenv("GENODIFF_DEBUG", "1")
    with pytest.raises(InputValueError):
        cli.main(argv)


@pytest.mark.parametrize(
    "command, after",
    [
        (["info"], "run it again"),
        (["data", "hg38", "--dest"], "run the same command again"),
        (["finetune"], "run the same command again to resume"),
    ],
)
def test_ctrl_c_is_one_line_and_exit_status_130(monkeypatch, tmp_path, capsys, command, after):
    def stopped(args):
        raise KeyboardInterrupt

    run = {"info": "_info", "data": "_data_hg38", "finetune": "_finetune"}[command[0]]
    monkeypatch.setattr(cli, run, stopped)
    assert cli.main([*command, str(tmp_path)]) == 128 + signal.SIGINT  # was: a traceback
    (printed,) = capsys.readouterr().err.strip().splitlines()
    assert printed.startswith(f"genodiff {command[0]}: stopped by Ctrl-C; {after}")


def test_genodiff_debug_shows_the_traceback_of_a_ctrl_c(monkeypatch, tmp_path):
    argv = fail_inside_info(monkeypatch, tmp_path, KeyboardInterrupt())
    monkeypatch.setenv("GENODIFF_DEBUG", "1")
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--devices", "0"], "--devices: 0: give 1 or more"),
        (["--devices", "2", "--num-nodes", "0"], "--num-nodes: 0: give 1 or more"),
        (["--devices", "two"], "--devices: 'two' is not a whole number"),
        (["--devices", "2", "--accelerator", "tpu"], "--accelerator: invalid choice: 'tpu'"),
    ],
)
def test_process_flags_that_start_no_process_are_refused_by_the_parser(capsys, options, named):
    argv = ["sample", "--checkpoint", "x.ckpt", "--out", "s.fa", *options]
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert named in err.splitlines()[-1]


@pytest.mark.parametrize(
    "settings",
    [{"accelerator": "tpu", "devices": 2}, {"accelerator": "cpu", "devices": 0}],
)
def test_processes_lightning_cannot_start_are_an_input_error(settings):
    from genodiff.parallel import launch_workers

    with pytest.raises(InputValueError, match="Lightning cannot start these processes") as err:
        launch_workers(settings)
    assert err.value.parameter == ("accelerator", "devices")


@pytest.mark.parametrize(
    "command, accelerator",
    [
        (["sample", "--out", "s.fa", "--length", "8", "--steps", "1"], "gpu"),
        (["eval", "--file", "real.fa", "--length", "8"], "cpu"),
    ],
)
def test_an_accelerator_without_devices_is_refused_not_ignored(
    capsys, tmp_path, monkeypatch, command, accelerator
):
    """``--accelerator gpu`` alone, on a machine without a GPU, drew on the CPU and said
    nothing (and ``--accelerator cpu`` alone left a GPU machine's command on its GPU): it is
    the device kind of the processes --devices starts, so without them it is refused, in one
    line that names the option that chooses one process's device."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real.fa").write_text(">real\nACGTACGTACGTACGT\n")
    argv = [command[0], "--checkpoint", "mdlm-chrx", *command[1:]]
    assert cli.main([*argv, "--accelerator", accelerator]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"genodiff {command[0]}: error: accelerator='{accelerator}' ")
    assert "--device" in line and "--devices" in line
    assert [p.name for p in tmp_path.iterdir()] == ["real.fa"]  # nothing drawn or indexed


@pytest.mark.parametrize(
    "option, said",
    [
        (["--t-samples", "0"], "t_samples must be an integer >= 1, got 0 (--t-samples)"),
        (["--batch-size", "0"], "batch_size must be >= 1, got 0 (--batch-size)"),
    ],
)
def test_eval_refuses_a_count_below_one_naming_its_option(capsys, tmp_path, option, said):
    """Was ``while scoring 128-token windows: need t_samples >= 1 and batch_size >= 1, got 0,
    16``, after the data file was read, naming neither option."""
    real = tmp_path / "real.fa"
    real.write_text(">real\n" + "ACGT" * 8 + "\n")
    argv = ["eval", "--checkpoint", "mdlm-chrx", "--file", str(real), "--length", "8"]
    assert cli.main([*argv, *option]) == 2
    assert capsys.readouterr().err == f"genodiff eval: error: {said}\n"


def test_eval_says_which_option_an_exact_likelihood_ignores(capsys, tmp_path):
    real = tmp_path / "real.fa"
    real.write_text(">real\n" + "ACGT" * 8 + "\n")
    argv = ["eval", "--checkpoint", "ar-chrx", "--file", str(real), "--length", "8", "--json"]
    assert cli.main([*argv, "--t-samples", "4", "--no-progress"]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert line.startswith("genodiff eval: warning: t_samples=4 is ignored: ")
    assert line.endswith(" (--t-samples)")


@pytest.mark.parametrize("command", [["models"], ["models", "mdlm-chrx"]])
def test_output_whose_reader_left_ends_quietly(command):
    """``genodiff models NAME | head``: the reader closes the pipe before genodiff writes (a
    short output: its flush at exit; a long one: a write mid-way); either way no traceback."""
    root = Path(__file__).resolve().parents[1]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    process = subprocess.Popen(
        [sys.executable, "-m", "genodiff.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
    )
    process.stdout.close()  # the reader leaves before the first line comes
    status, stderr = process.wait(timeout=120), process.stderr.read().decode()
    assert stderr == ""
    assert status == 128 + 13  # what a shell reports for a program SIGPIPE stopped


def test_a_broken_pipe_that_is_not_the_output_s_is_no_quiet_end(monkeypatch):
    """Only standard output's reader leaving ends a command quietly: a broken pipe of its own
    (a socket, a child process's pipe) while the output is fine is raised, traceback and all."""

    def run(args):
        raise BrokenPipeError(32, "Broken pipe")  # a pipe other than standard output

    monkeypatch.setattr(cli, "_info", run)
    with pytest.raises(BrokenPipeError):
        cli.main(["info", "anything"])


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["sample", "--checkpoint", "run", "--lenght", "4", "--out", "x.fa"],
            "genodiff sample: error: unrecognized arguments: --lenght 4 (did you mean --length?)",
        ),
        (
            ["data", "hg38", "--dst=x"],
            "genodiff data hg38: error: unrecognized arguments: --dst=x (did you mean --dest?)",
        ),
        (["models", "a", "b"], "genodiff models: error: unrecognized arguments: b"),
        (  # the mistyped option is a required one: its hint, not "--checkpoint is required"
            ["sample", "--checkpiont", "x.ckpt"],
            "genodiff sample: error: unrecognized arguments: --checkpiont x.ckpt "
            "(did you mean --checkpoint?)",
        ),
        (  # another required option (--out) is missing too: the mistyped one comes first
            ["sample", "--checkpoint", "x.ckpt", "--lenght", "4"],
            "genodiff sample: error: unrecognized arguments: --lenght 4 (did you mean --length?)",
        ),
    ],
)
def test_a_mistyped_option_is_refused_by_its_command_with_the_close_option(capsys, argv, said):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == said
    assert err.startswith(f"usage: genodiff {argv[0]}")  # the command's usage, not genodiff's


def test_a_missing_command_or_option_is_said_when_nothing_is_mistyped(capsys):
    """Mistyped options are looked for with nothing required; then the required arguments
    are required again (the usage still shows --checkpoint unbracketed): a missing one is
    refused."""
    with pytest.raises(SystemExit) as stop:
        cli.main(["sample", "--checkpoint", "x.ckpt"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and " --checkpoint CHECKPOINT" in err
    assert err.splitlines()[-1] == (
        "genodiff sample: error: the following arguments are required: --out"
    )
    with pytest.raises(SystemExit):
        cli.main([])
    said = capsys.readouterr().err
    assert said.endswith("genodiff: error: the following arguments are required: command\n")


def test_a_mistyped_option_before_any_command_gets_the_close_option(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--verison"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "genodiff: error: unrecognized arguments: --verison (did you mean --version?)"
    )


def test_genodiffs_own_warnings_are_one_line_like_its_errors(capsys, monkeypatch):
    """Python shows a warning as ``FILE:LINE: UserWarning: MESSAGE`` and the source line
    after it, two lines that name genodiff's internals; a command says its own as it says an
    error. Another library's warning is left to Python's display (its file and category say
    whose)."""
    shown_by_python = []
    monkeypatch.setattr(warnings, "showwarning", lambda *args: shown_by_python.append(args[:4]))
    ours = str(Path(cli.__file__).parent / "generate.py")
    with cli.warnings_as_lines("sample"):
        warnings.simplefilter("always")
        warnings.warn_explicit("sampling past the trained window", UserWarning, ours, 237)
        warnings.warn_explicit("a deprecated flag", FutureWarning, "/elsewhere/lib.py", 3)
    assert capsys.readouterr().err == "genodiff sample: warning: sampling past the trained window\n"
    ((message, category, filename, line),) = shown_by_python
    assert (str(message), category, filename, line) == (
        "a deprecated flag",
        FutureWarning,
        "/elsewhere/lib.py",
        3,
    )


def test_a_warning_names_the_commands_own_options_and_the_main_process_alone_says_it(
    capsys, monkeypatch
):
    """A ``UserInputWarning`` says what to change in the library's terms (``parameter``); a
    command adds the options it has of those (not another command's); the other processes
    of a ``--devices N`` run meet the same warning and leave it to the main one."""
    from genodiff.errors import UserInputWarning

    parser = cli.build_parser()
    ours = str(Path(cli.__file__).parent / "trained_window.py")
    warning = UserInputWarning("too long; give a shorter length", parameter=("length", "block"))

    def said(command: str) -> str:
        with cli.warnings_as_lines(command, cli.command_options(parser, command)):
            warnings.simplefilter("always")
            warnings.warn_explicit(warning, UserInputWarning, ours, 1)
        return capsys.readouterr().err

    long_line = "genodiff sample: warning: too long; give a shorter length (--length, --block)\n"
    assert said("sample") == long_line
    assert said("eval") == "genodiff eval: warning: too long; give a shorter length (--length)\n"
    assert said("train") == "genodiff train: warning: too long; give a shorter length\n"
    monkeypatch.setenv("LOCAL_RANK", "1")  # a second process of the run
    assert said("eval") == ""


def test_an_error_names_the_options_of_the_command_that_met_it_alone(capsys, monkeypatch):
    """An error's ``parameter`` becomes the options the command has of it: sample has
    --length, train has none (was: any command's, so a run's samples section, which train
    sets by config keys, was told "(--block, --stride)")."""

    def refused(args) -> None:
        raise InputValueError("length must be at most 8", parameter=("length", "block"))

    for name in ("_sample", "_eval", "_train"):
        monkeypatch.setattr(cli, name, refused)
    assert cli.main(["sample", "--checkpoint", "x", "--out", "x.fa"]) == 2
    said = "genodiff sample: error: length must be at most 8 (--length, --block)\n"
    assert capsys.readouterr().err == said
    assert cli.main(["eval", "--checkpoint", "x"]) == 2
    assert capsys.readouterr().err == "genodiff eval: error: length must be at most 8 (--length)\n"
    assert cli.main(["train", "demo"]) == 2
    assert capsys.readouterr().err == "genodiff train: error: length must be at most 8\n"


def test_a_warning_during_a_command_reaches_stderr_as_one_line(capsys, tmp_path):
    folder = Path(shutil.copytree(ROOT / "models" / "mdlm-chrx", tmp_path / "m"))
    record = json.loads((folder / "genodiff.json").read_text())
    record["config"]["samples"]["guidance_knob"] = 0.5  # a key this version does not know
    (folder / "genodiff.json").write_text(json.dumps(record))
    assert cli.main(["info", str(folder)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("genodiff info: warning: ")
    assert "samples.guidance_knob" in err[0]

"""One run, one folder: the lock a live run holds, refusing another run's folder, resolving
ckpt_path=last, and writing nothing before every check has passed."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
import torch

from genodiff import cli
from genodiff.checkpoints import run_folder
from genodiff.config import ConfigError
from tests.test_cli import DEMO, TINY

HOLD_LOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.write("4242"); handle.flush()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_live_run_holds_its_folder_until_it_dies(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out / run_folder.LOCK_FILE)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        code = cli.main(["train", DEMO, *TINY, f"output_dir={out}"])
        err = capsys.readouterr().err
        assert code == 2
        assert "in use by a running genodiff run (pid 4242)" in err
        assert sorted(p.name for p in out.iterdir()) == [run_folder.LOCK_FILE]  # nothing written
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with run_folder.hold(out):  # a killed holder leaves no stale lock
        assert (out / run_folder.LOCK_FILE).read_text() != "4242"


@pytest.mark.parametrize("ending", ["returns", "raises"])
def test_the_lock_file_goes_when_the_run_ends(tmp_path, ending):
    lock = tmp_path / run_folder.LOCK_FILE
    failure = pytest.raises(RuntimeError) if ending == "raises" else contextlib.nullcontext()
    with failure, run_folder.hold(tmp_path):
        assert lock.read_text() == str(os.getpid())
        if ending == "raises":
            raise RuntimeError("the run failed")
    assert not lock.exists()


def test_a_lock_file_removed_by_its_ending_holder_is_not_taken(tmp_path, monkeypatch):
    # The file was opened, then its holder ended and removed it before our flock: holding
    # that orphaned file would exclude no one, so hold refuses instead.
    lock = tmp_path / run_folder.LOCK_FILE
    real_flock = run_folder.fcntl.flock

    def holder_ends_first(handle, operation):
        lock.unlink()
        real_flock(handle, operation)

    monkeypatch.setattr(run_folder.fcntl, "flock", holder_ends_first)
    with pytest.raises(ConfigError, match="ended just now; start again"), run_folder.hold(tmp_path):
        pass


def test_a_new_run_into_another_runs_folder_is_refused(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("the other run's config\n")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "best-step2.ckpt").write_bytes(b"the other run's weights")
    code = cli.main(["train", DEMO, *TINY, f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "already holds a run (checkpoints/best-step2.ckpt)" in err and "ckpt_path=last" in err
    assert (tmp_path / "config.yaml").read_text() == "the other run's config\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "config.yaml"]


@pytest.mark.parametrize("ckpt_path", ["last", "{out}/checkpoints/missing.ckpt"])
def test_a_resume_without_its_checkpoint_fails_before_writing(tmp_path, capsys, ckpt_path):
    (tmp_path / "config.yaml").write_text("the run's config\n")
    ckpt = ckpt_path.format(out=tmp_path)
    code = cli.main(["train", DEMO, *TINY, f"output_dir={tmp_path}", f"ckpt_path={ckpt}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "nothing to resume" in err or "not found" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_resuming_a_folder_that_does_not_exist_says_so(tmp_path):
    missing = tmp_path / "runs" / "x"
    with pytest.raises(ConfigError) as err:
        run_folder.resume_checkpoint("last", missing)
    message = str(err.value)
    assert f"output_dir={missing} does not exist" in message
    assert f"remove {missing}" not in message  # nothing there to remove
    assert not missing.exists()


def test_output_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "config.yaml").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        run_folder.check_output_dir(tmp_path / "config.yaml", None)


def save_checkpoint(path, step):
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {"state_dict": {"w": torch.ones(3)}, "global_step": step}
    torch.save({**content, "hyper_parameters": {"config": {}}}, path)


def test_last_falls_back_to_the_newest_loadable_checkpoint(tmp_path, capsys):
    folder = tmp_path / run_folder.CHECKPOINT_FOLDER
    save_checkpoint(folder / "best-step2.ckpt", 2)
    save_checkpoint(folder / "best-step4.ckpt", 4)
    save_checkpoint(folder / "last.ckpt", 6)
    assert run_folder.resume_checkpoint("last", tmp_path).source == (folder / "last.ckpt").resolve()
    assert capsys.readouterr().err == ""

    data = (folder / "last.ckpt").read_bytes()
    (folder / "last.ckpt").write_bytes(data[: len(data) // 2])  # truncated by a crash
    resumed = run_folder.resume_checkpoint("last", tmp_path)
    assert resumed.source == (folder / "best-step4.ckpt").resolve()
    assert resumed.content["global_step"] == 4
    assert "last.ckpt is missing or damaged; resuming from" in capsys.readouterr().err

    for name in ("best-step2.ckpt", "best-step4.ckpt"):
        (folder / name).write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="only damaged checkpoints"):
        run_folder.resume_checkpoint("last", tmp_path)
    with pytest.raises(ConfigError, match="damaged or not a training checkpoint"):
        run_folder.resume_checkpoint(str(folder / "last.ckpt"), tmp_path)


def test_a_named_checkpoint_must_be_a_training_checkpoint_file(tmp_path):
    folder = tmp_path / run_folder.CHECKPOINT_FOLDER
    save_checkpoint(folder / "last.ckpt", 6)
    with pytest.raises(ConfigError, match=r"checkpoints: is a folder; pass a \.ckpt"):
        run_folder.resume_checkpoint(str(folder), tmp_path)  # not the last.ckpt inside
    content = torch.load(folder / "last.ckpt", weights_only=True)
    for step in (None, "6", -1):
        torch.save({**content, "global_step": step}, folder / "odd.ckpt")
        with pytest.raises(ValueError, match=rf"no training step \(global_step is {step!r}\)"):
            run_folder.resume_checkpoint(str(folder / "odd.ckpt"), tmp_path)
    assert run_folder.resume_checkpoint("last", tmp_path).content["global_step"] == 6


def test_hold_removes_what_a_killed_writer_left(tmp_path):
    folder = tmp_path / run_folder.CHECKPOINT_FOLDER
    folder.mkdir()
    (folder / ".last.ckpt.123.tmp").write_bytes(b"half")
    save_checkpoint(folder / "last.ckpt", 1)
    with run_folder.hold(tmp_path):
        assert sorted(p.name for p in folder.iterdir()) == ["last.ckpt"]

"""A Genomic Benchmarks task fetched through the genomic-benchmarks package, against a local
HTTP server: what the package's network and archive errors become, and what they leave."""

from __future__ import annotations

import errno
import io
import shutil
import urllib.request
import zipfile
from pathlib import Path

import pytest

import genodiff.data.benchmarks as benchmarks
from genodiff import cli
from genodiff.cli import is_user_error
from genodiff.data.benchmarks import load_task
from genodiff.data.download import DownloadError
from genodiff.errors import DiskFullError
from tests.test_bad_input_cli import GB_DEMO, one_line_error
from tests.test_finetune_data import fake_genomic_benchmarks
from tests.test_hg38_download import _Server

TASK = "demo_human_or_worm"
LAYOUT = {  # split -> class -> sequences
    "train": {"human": ["ACGTAC", "GGTTAA"], "worm": ["TTTTCC", "CCAAGG"]},
    "test": {"human": ["ACGGTA"], "worm": ["GATTAC"]},
}


def task_zip(stored: bool = False) -> bytes:
    """The task as the package's cloud cache holds it: ``TASK/{train,test}/<class>/<i>.txt``."""
    buffer = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for split, classes in LAYOUT.items():
            for name, seqs in classes.items():
                for i, seq in enumerate(seqs):
                    archive.writestr(f"{TASK}/{split}/{name}/{i}.txt", seq)
    return buffer.getvalue()


def damaged(archive: bytes) -> bytes:
    """``archive`` (stored, not deflated) with the first sequence's first base changed, so that
    its CRC-32 no longer matches."""
    at = archive.index(b"ACGTAC")
    return archive[:at] + b"T" + archive[at + 1 :]


@pytest.fixture
def gb_server():
    server = _Server({f"/{TASK}_v0.zip": task_zip()})
    yield server
    server.close()


def package_fetching_from(monkeypatch, base_url: str) -> None:
    """``genomic_benchmarks.loc2seq`` whose ``download_dataset`` does what the package's does
    for the 8 benchmarks (its cloud cache): urllib's ``urlretrieve`` (no timeout of its own)
    of ``NAME_vVERSION.zip`` into ``dest_path``, unpacked there, the zip deleted."""

    def download_dataset(name, version=None, dest_path=None):
        archive = Path(dest_path) / f"{name}.zip"
        Path(dest_path).mkdir(parents=True, exist_ok=True)
        urllib.request.urlretrieve(f"{base_url}/{name}_v{version}.zip", archive)
        shutil.unpack_archive(archive, dest_path)
        archive.unlink()
        return Path(dest_path) / name

    fake_genomic_benchmarks(monkeypatch, download_dataset)


def test_the_package_fetches_the_task_from_the_server(gb_server, tmp_path, monkeypatch):
    package_fetching_from(monkeypatch, gb_server.url)
    task = load_task(tmp_path, TASK)
    assert task.classes == ["human", "worm"]
    assert (len(task.train), len(task.test)) == (4, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [TASK]


FAILURES = {  # how the server (or the network) fails -> what the line says went wrong
    "connection refused": ("refused", r"Connection refused"),
    "HTTP 404": ("missing", r"HTTP Error 404: Not Found at http://127\.0\.0\.1:\d+/demo_h"),
    "no response": ("silent", r"timed out waiting for the server"),
    "zip cut short in transfer": ("cut", r"retrieval incomplete: got only 300 out of \d+ bytes"),
    "zip cut short on the server": ("short zip", r"is not a zip file"),
    "damaged zip": ("damaged zip", r"Bad CRC-32"),
}


def fail(server: _Server, how: str) -> str:
    """The server's base URL, after making it fail as ``how`` says."""
    path = f"/{TASK}_v0.zip"
    if how == "refused":
        server.close()
    elif how == "missing":
        del server.files[path]
    elif how == "silent":
        server.silent.add(path)
    elif how == "cut":
        server.truncate_always[path] = 300
    elif how == "short zip":
        server.files[path] = server.files[path][:-30]  # the end (the zip's directory) missing
    elif how == "damaged zip":
        server.files[path] = damaged(task_zip(stored=True))
    return server.url


@pytest.mark.parametrize("how, said", FAILURES.values(), ids=FAILURES)
def test_a_failed_task_download_is_one_line_and_leaves_nothing(
    gb_server, tmp_path, monkeypatch, how, said
):
    monkeypatch.setattr(benchmarks, "TASK_DOWNLOAD_TIMEOUT", 0.2)
    package_fetching_from(monkeypatch, fail(gb_server, how))
    root = tmp_path / "gb"
    with pytest.raises(DownloadError, match=said) as caught:  # was: the package's traceback
        load_task(root, TASK)
    message = str(caught.value)
    assert "\n" not in message and is_user_error(caught.value)
    assert f"Genomic Benchmarks task {TASK!r}" in message
    assert "run again" in message and str(root / TASK) in message  # or put it there yourself
    assert list(root.iterdir()) == []  # no partial task a later run would take as whole


def test_the_next_run_after_a_failed_download_fetches_the_whole_task(
    gb_server, tmp_path, monkeypatch
):
    path = f"/{TASK}_v0.zip"
    gb_server.truncate_once[path] = 300
    package_fetching_from(monkeypatch, gb_server.url)
    with pytest.raises(DownloadError, match="retrieval incomplete"):
        load_task(tmp_path, TASK)
    task = load_task(tmp_path, TASK)
    assert (len(task.train), len(task.test)) == (4, 2)
    assert [p for p, _ in gb_server.requests] == [path, path]


def test_a_full_disk_in_a_task_download_says_so_and_leaves_nothing(
    gb_server, tmp_path, monkeypatch
):
    package_fetching_from(monkeypatch, gb_server.url)

    def unpack_onto_a_full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "unpack_archive", unpack_onto_a_full_disk)
    with pytest.raises(DiskFullError, match="no space left on device writing .*Free some space"):
        load_task(tmp_path, TASK)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_said_with_the_space_free_once_the_part_is_removed(tmp_path, monkeypatch):
    """Was: the free space measured while the part of the task written so far still took its
    room (``disk_full_error`` wants the partial write removed first)."""

    def fills_the_disk(name, version=None, dest_path=None):
        (Path(dest_path) / name / "train").mkdir(parents=True)
        (Path(dest_path) / name / "train" / "0.txt").write_text("ACGT" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device")

    measured_with = []

    def disk_usage(path):
        measured_with.append(sorted(p.name for p in tmp_path.rglob("*")))
        return real_disk_usage(path)

    real_disk_usage = shutil.disk_usage
    fake_genomic_benchmarks(monkeypatch, fills_the_disk)
    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    with pytest.raises(DiskFullError, match="free there"):
        load_task(tmp_path, TASK)
    assert measured_with == [[]]


def test_ctrl_c_in_a_task_download_leaves_nothing(gb_server, tmp_path, monkeypatch):
    def interrupted(name, version=None, dest_path=None):
        (Path(dest_path) / name / "train" / "human").mkdir(parents=True)
        (Path(dest_path) / name / "train" / "human" / "0.txt").write_text("ACGT")
        raise KeyboardInterrupt

    fake_genomic_benchmarks(monkeypatch, interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_task(tmp_path, TASK)
    assert list(tmp_path.iterdir()) == []


def test_genodiff_finetune_says_a_failed_task_download_in_one_line(
    gb_server, tmp_path, monkeypatch, capsys
):
    package_fetching_from(monkeypatch, fail(gb_server, "missing"))
    overrides = [f"benchmark.root={tmp_path / 'gb'}", f"benchmark.tasks=[{TASK}]",
                 "benchmark.download=true", f"output_dir={tmp_path / 'out'}"]  # fmt: skip
    assert cli.main(["finetune", GB_DEMO, *overrides]) == 2
    err = one_line_error(capsys, "finetune")
    assert "HTTP Error 404" in err and "run again" in err
    assert list((tmp_path / "gb").iterdir()) == []


def test_a_task_the_package_does_not_know_is_named_with_the_eight_it_does(tmp_path, monkeypatch):
    def not_found(name, version=None, dest_path=None):  # the package's answer to a name
        raise FileNotFoundError(f"Dataset {name} not found.")  # that its repository lacks

    fake_genomic_benchmarks(monkeypatch, not_found)
    with pytest.raises(DownloadError, match="Dataset human_vs_wrom not found") as caught:
        load_task(tmp_path, "human_vs_wrom")
    assert "check the name (the 8: dummy_mouse_enhancers_ensembl, " in str(caught.value)
    assert "run again" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_root_that_cannot_be_written_is_said_as_it_is_not_as_a_failed_download(
    tmp_path, monkeypatch
):
    def read_only(name, version=None, dest_path=None):  # the package's first mkdir there
        raise PermissionError(errno.EACCES, "Permission denied", dest_path)

    fake_genomic_benchmarks(monkeypatch, read_only)
    with pytest.raises(PermissionError, match="Permission denied") as caught:
        load_task(tmp_path, TASK)
    assert not isinstance(caught.value, DownloadError)  # no "run again": it would fail again
    assert is_user_error(caught.value)  # the command line says it in one line
    assert list(tmp_path.iterdir()) == []

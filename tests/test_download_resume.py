"""A resumed download is of the same version of the remote file as its ``.part`` (the server's
ETag or Last-Modified recorded beside it, sent back as If-Range), and what a broken or hostile
server sends is read in bounded time and space (``genodiff.data.download``): a transfer that
stalls (a few bytes now and then, each read within the timeout) stops and resumes."""

import re
import time
from pathlib import Path

import pytest

import genodiff.data.download as download_module
from genodiff.data.download import DownloadError, download
from genodiff.errors import InputValueError
from tests.test_hg38_download import _Server

OLD = bytes(range(256)) * 8  # 2048 bytes
NEW = bytes(reversed(OLD))  # another version of the file, of the same size
MONDAY = "Mon, 02 Nov 2026 10:00:00 GMT"
TUESDAY = "Tue, 03 Nov 2026 10:00:00 GMT"
CHANGED = "the file on the server changed since the part was downloaded; starting again from byte 0"


@pytest.fixture
def server():
    server = _Server({"/f": OLD})
    yield server
    server.close()


def interrupted_at(server: _Server, dest, size: int) -> None:
    """A download of ``/f`` into ``dest`` that stopped with ``size`` bytes in its part."""
    server.truncate_once["/f"] = size
    with pytest.raises(DownloadError, match="incomplete after 1 attempts"):
        download(f"{server.url}/f", dest, retries=0, log=print)
    assert dest.with_name(dest.name + ".part").read_bytes() == OLD[:size]


VERSIONS = {
    "strong ETag": ({"ETag": '"v1"'}, {"ETag": '"v2"'}, '"v1"'),
    "Last-Modified only": ({"Last-Modified": MONDAY}, {"Last-Modified": TUESDAY}, MONDAY),
    "weak ETag, Last-Modified": (
        {"ETag": 'W/"v1"', "Last-Modified": MONDAY},
        {"ETag": 'W/"v2"', "Last-Modified": TUESDAY},
        MONDAY,  # a weak ETag is never sent in If-Range
    ),
}


@pytest.mark.parametrize("ignores_if_range", [False, True], ids=["If-Range", "ignores If-Range"])
@pytest.mark.parametrize("old, new, sent", list(VERSIONS.values()), ids=list(VERSIONS))
def test_a_part_of_a_file_changed_on_the_server_is_started_again(
    server, tmp_path, old, new, sent, ignores_if_range
):
    server.versions["/f"] = old
    interrupted_at(server, tmp_path / "f", 500)
    server.files["/f"], server.versions["/f"] = NEW, new
    if ignores_if_range:  # a server that answers the Range whatever If-Range says
        server.ignore_if_range.add("/f")
    logs = []
    out = download(f"{server.url}/f", tmp_path / "f", log=logs.append)
    assert out.read_bytes() == NEW  # was: OLD[:500] + NEW[500:], the size right, the bytes not
    assert server.requests[1] == ("/f", "bytes=500-")
    assert server.if_range[1] == sent
    assert sum(line.endswith(CHANGED) for line in logs) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # the record gone with the part


@pytest.mark.parametrize("old, sent", [(v[0], v[2]) for v in VERSIONS.values()], ids=list(VERSIONS))
def test_a_part_of_the_same_file_resumes_with_if_range(server, tmp_path, old, sent):
    server.versions["/f"] = old
    interrupted_at(server, tmp_path / "f", 500)
    logs = []
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == OLD
    assert server.requests == [("/f", None), ("/f", "bytes=500-")]
    assert server.if_range == [None, sent]  # was: none sent
    assert any("resuming at 500 B" in line for line in logs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_whole_part_of_a_changed_file_is_not_taken_for_it(server, tmp_path, monkeypatch):
    """A run stopped after its last byte, before the rename: the next one's Range starts at
    the end of the file, and a server that ignores If-Range answers 416 for a file changed to
    the same size."""
    server.versions["/f"] = {"ETag": '"v1"'}
    reads = []

    def received_then_ctrl_c(response):
        reads.append(response)
        if len(reads) == 3:  # both halves of the file received
            raise KeyboardInterrupt
        return response.read(len(OLD) // 2)

    monkeypatch.setattr(download_module, "_received", received_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        download(f"{server.url}/f", tmp_path / "f", log=print)
    monkeypatch.undo()
    assert (tmp_path / "f.part").read_bytes() == OLD
    server.files["/f"], server.versions["/f"] = NEW, {"ETag": '"v2"'}
    server.ignore_if_range.add("/f")
    logs = []
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == NEW
    assert server.requests[1:] == [("/f", f"bytes={len(OLD)}-"), ("/f", None)]  # was: 416, done
    assert sum(line.endswith(CHANGED) for line in logs) == 1


def test_a_damaged_record_of_the_version_starts_the_part_again(server, tmp_path):
    server.versions["/f"] = {"ETag": '"v1"'}
    interrupted_at(server, tmp_path / "f", 500)
    (tmp_path / "f.part.validator").write_text("{not json")
    server.files["/f"], server.versions["/f"] = NEW, {"ETag": '"v2"'}
    logs = []
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == NEW
    assert server.requests[1] == ("/f", None)  # was: bytes=500-, without If-Range
    said = "f.part.validator is no record of the server's version of the file; starting again"
    assert any(said in line for line in logs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("resume", [False, True], ids=["200 Content-Length", "206 Content-Range"])
def test_a_body_longer_than_announced_is_not_read_to_its_end(server, tmp_path, monkeypatch, resume):
    if resume:
        interrupted_at(server, tmp_path / "f", 500)
    server.overlong["/f"] = 4_000_000  # chunked: http.client reads on past the size announced
    real_received = download_module._received
    received = []

    def counted(response):
        chunk = real_received(response)
        received.append(len(chunk))
        return chunk

    monkeypatch.setattr(download_module, "_CHUNK", 1000)
    monkeypatch.setattr(download_module, "_received", counted)
    with pytest.raises(DownloadError, match="sent more than the 2048 bytes it announced") as caught:
        download(f"{server.url}/f", tmp_path / "f", log=print)
    assert "deleted the partial file" in str(caught.value)
    assert sum(received) <= len(OLD) + 1000  # was: all 4 MB read and written first
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("length", ["abc", "-1", ""])
def test_a_malformed_content_length_is_no_size(server, tmp_path, length):
    server.length_header["/f"] = length
    logs = []
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == OLD
    assert any("announced no size" in line for line in logs)  # was: ValueError; "-1": deleted


STALLED = re.compile(
    r"  f: transfer stalled at (\d+) B \((\d+) B/s over the last (\d\.\d+) s, "
    r"below the minimum of 1\.0 KB/s\)"
)


def two_attempts_that_stall(server, dest: Path, logs: list, **limits: float) -> tuple[str, float]:
    """Download ``server``'s /f to ``dest`` in two attempts (no wait between them) that each
    stall within a window of 0.5 s: the error's message and the seconds it took."""
    began = time.monotonic()
    with pytest.raises(DownloadError, match="incomplete after 2 attempts") as caught:
        download(
            f"{server.url}/f",
            dest,
            log=logs.append,
            retries=1,
            speed_window=0.5,
            retry_wait=0,
            **limits,
        )
    return str(caught.value), time.monotonic() - began


def test_a_stalled_transfer_stops_in_bounded_time_and_resumes_from_its_part(server, tmp_path):
    """300 bytes, then 8 bytes every 0.05 s (about 160 B/s) for up to 5 s: each attempt stops
    after a window of 0.5 s below 1 KiB/s (was: each read within the timeout, so the trickle
    was read to its end, 5 s an attempt)."""
    server.versions["/f"] = {"ETag": '"v1"'}
    server.trickle["/f"] = (300, 8, 0.05, 5.0)
    logs = []
    said, took = two_attempts_that_stall(server, tmp_path / "f", logs, min_speed=1024)
    # two windows of 0.5 s and the reads around them (was: 5 s an attempt, 10 s), with room for
    # a busy machine
    assert took < 8
    stalls = [STALLED.fullmatch(line) for line in logs if "stalled" in line]
    assert len(stalls) == 2 and all(stalls)
    for stall in stalls:
        assert int(stall.group(2)) < 1024 and 0.5 <= float(stall.group(3)) < 4.5
    first, received = (int(stall.group(1)) for stall in stalls)
    assert 300 <= first < received < len(OLD)  # the second attempt went on from the first's
    assert server.requests == [("/f", None), ("/f", f"bytes={first}-")]
    part = tmp_path / "f.part"
    assert part.read_bytes() == OLD[:received]
    assert (tmp_path / "f.part.validator").exists()  # the version the part holds, kept
    assert f"; the last one: transfer stalled at {received} B (" in said
    assert said.endswith(f"run again to resume from {part}")

    del server.trickle["/f"]  # the network mended: the next run resumes from the part
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == OLD
    assert server.requests[-1] == ("/f", f"bytes={received}-")
    assert server.if_range[-1] == '"v1"'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


SILENT = re.compile(
    r"  f: transfer stalled at (\d+) B \((nothing received for|sent no response in) ([\d.]+) s\)"
)


@pytest.mark.parametrize(
    "silence, head",
    [("headers then nothing", 200), ("no response", 0)],
    ids=["headers then nothing", "no response"],
)
def test_a_server_that_sends_nothing_stalls_within_a_window_and_resumes_from_its_part(
    server, tmp_path, silence, head
):
    """A resume whose response (or body) never comes stops after one window of 0.5 s without
    a byte, as a stall does, and is retried from the part. Was: only the timeout, 5 s here,
    ended it (10 s for two attempts; the window never looked at), the line said `timed out`,
    and a response that never came was an error at once, never retried."""
    server.versions["/f"] = {"ETag": '"v1"'}
    interrupted_at(server, tmp_path / "f", 300)
    if silence == "no response":
        server.silent.add("/f")
    else:  # 200 bytes, then pieces of 0 bytes until the server closes
        server.trickle["/f"] = (head, 0, 10.0, 10.0)
    logs = []
    message, took = two_attempts_that_stall(server, tmp_path / "f", logs, timeout=5)
    assert took < 4.5  # two windows of 0.5 s, with room for a busy machine
    stalls = [SILENT.fullmatch(line) for line in logs if "stalled" in line]
    assert len(stalls) == 2 and all(stalls)
    kept = [300 + head, 300 + 2 * head]  # each attempt went on from the bytes the part held
    assert [int(stall.group(1)) for stall in stalls] == kept
    for stall in stalls:
        said = "sent no response in" if silence == "no response" else "nothing received for"
        assert stall.group(2) == said and 0.5 <= float(stall.group(3)) < 4
    assert server.requests[1:] == [("/f", "bytes=300-"), ("/f", f"bytes={kept[0]}-")]
    part = tmp_path / "f.part"
    assert part.read_bytes() == OLD[: kept[1]]
    assert (tmp_path / "f.part.validator").exists()
    assert f"; the last one: transfer stalled at {kept[1]} B ({said} " in message
    assert message.endswith(f"run again to resume from {part}")

    server.silent.clear()  # the server mended: the next run resumes from the part
    server.trickle.clear()
    assert download(f"{server.url}/f", tmp_path / "f", log=logs.append).read_bytes() == OLD
    assert server.requests[-1] == ("/f", f"bytes={kept[1]}-")
    assert server.if_range[-1] == '"v1"'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_slow_but_steady_transfer_is_not_stopped(server, tmp_path):
    """64 bytes every 0.02 s (about 3 KB/s, 32 times the minimum: a busy machine's pauses are
    not stalls) over several windows."""
    server.trickle["/f"] = (0, 64, 0.02, 5.0)
    logs = []
    began = time.monotonic()
    out = download(
        f"{server.url}/f", tmp_path / "f", log=logs.append, min_speed=100, speed_window=0.2
    )
    assert time.monotonic() - began > 0.6  # 32 pieces: three windows at least
    assert out.read_bytes() == OLD
    assert server.requests == [("/f", None)]
    assert not any("stalled" in line or "interrupted" in line for line in logs)


@pytest.mark.parametrize(
    "limits, parameter",
    [
        ({"min_speed": -1}, "min_speed"),
        ({"min_speed": float("nan")}, "min_speed"),
        ({"speed_window": 0}, "speed_window"),
        ({"speed_window": "60"}, "speed_window"),
        ({"retry_wait": -1}, "retry_wait"),
        ({"retry_wait": float("inf")}, "retry_wait"),
        ({"retries": -1}, "retries"),
        ({"retries": 1.5}, "retries"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_a_stall_limit_out_of_range_is_refused_before_any_request(
    server, tmp_path, limits, parameter
):
    with pytest.raises(InputValueError, match=f"^{parameter} must be a number") as caught:
        download(f"{server.url}/f", tmp_path / "f", log=print, **limits)
    assert caught.value.parameter == parameter
    assert server.requests == [] and list(tmp_path.iterdir()) == []

"""A resumed download is of the same version of the remote file as its ``.part`` (the server's
ETag or Last-Modified recorded beside it, sent back as If-Range), and what a broken or hostile
server sends is read in bounded time and space (``genodiff.data.download``)."""

import pytest

import genodiff.data.download as download_module
from genodiff.data.download import DownloadError, download
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

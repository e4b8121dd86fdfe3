"""The hg38 downloader against a local HTTP server that supports Range requests."""

import contextlib
import errno
import gzip
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import genodiff.data.download as download_module
from genodiff import atomic_files, cli
from genodiff.data.download import DownloadError, download, gunzip, prepare_hg38
from genodiff.data.genome import Genome
from genodiff.errors import DiskFullError
from tests.test_bad_input_cli import one_line_error

_RNG = random.Random(0)
FASTA = "".join(
    f">chr{i}\n" + "".join("".join(_RNG.choices("ACGT", k=60)) + "\n" for _ in range(50))
    for i in (1, 2)
).encode()  # 2 x 3000 bp, about 1.6 KB gzipped
BED = b"chr1\t0\t100\ttrain\nchr1\t100\t200\tvalid\nchr2\t0\t100\ttest\n"


class _Server:
    """Serves ``files`` (path -> bytes). Behaviour knobs, per path:
    ``truncate_once``: close the connection after that many body bytes on the first request;
    ``truncate_always``: the same on every request; ``ignore_range``: always answer 200;
    ``silent``: read the request and send nothing until the server closes; ``hang_up``: close
    the connection without a response; ``redirect_loop``: redirect to the path itself;
    ``odd_resume``: answer the next Range request with ``(status, shift, content_range)``, the
    body from the byte asked for plus ``shift`` (a 200: the whole body) and that Content-Range
    header (a format string of ``start``, ``end``, ``size``; None: no header);
    ``odd_always``: the same for every request, with or without Range; ``versions``: the
    headers (ETag, Last-Modified) that name the version of the file, sent with each answer, and
    a Range request whose If-Range names none of them answered with the whole file (200),
    unless ``ignore_if_range`` holds the path; ``overlong``: send the body chunked (the
    Content-Length kept) and go on past its end to that many bytes in all; ``length_header``:
    that Content-Length instead of the body's; ``trickle``: ``(head, piece, every, for_s)``, send
    the first ``head`` bytes of the body at once, then ``piece`` bytes every ``every`` seconds,
    and hang up after ``for_s`` seconds if the body is not all sent by then (``piece`` 0: the
    head, then nothing); ``answers``: answer the next requests with these statuses and headers
    (no body), one each, before the file."""

    def __init__(self, files, port: int = 0):
        self.files = files
        self.truncate_once: dict[str, int] = {}
        self.truncate_always: dict[str, int] = {}
        self.ignore_range: set[str] = set()
        self.silent: set[str] = set()
        self.hang_up: set[str] = set()
        self.redirect_loop: set[str] = set()
        self.odd_resume: dict[str, tuple[int, int, str | None]] = {}
        self.odd_always: dict[str, tuple[int, int, str | None]] = {}
        self.versions: dict[str, dict[str, str]] = {}
        self.ignore_if_range: set[str] = set()
        self.overlong: dict[str, int] = {}
        self.length_header: dict[str, str] = {}
        self.trickle: dict[str, tuple[int, int, float, float]] = {}
        self.answers: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.if_range: list[str | None] = []  # each request's If-Range header
        self.closing = threading.Event()
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = server.files.get(self.path)
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                if_range = self.headers.get("If-Range")
                server.if_range.append(if_range)
                version = server.versions.get(self.path, {})
                if if_range is not None and self.path not in server.ignore_if_range:
                    rng = rng if if_range in version.values() else None  # changed: all of it
                if server.answers.get(self.path):
                    self.send_answer(*server.answers[self.path].pop(0))
                    return
                if self.path in server.silent:
                    server.closing.wait(10)
                    return
                if self.path in server.hang_up:
                    self.close_connection = True
                    return
                if self.path in server.redirect_loop:
                    self.send_response(302)
                    self.send_header("Location", self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", rng or "")
                odd = server.odd_always.get(self.path)
                if match and odd is None:
                    odd = server.odd_resume.pop(self.path, None)
                if odd is not None:
                    self.send_odd(body, int(match.group(1)) if match else 0, *odd)
                    return
                if match and self.path not in server.ignore_range:
                    start = int(match.group(1))
                    if start >= len(body):
                        self.send_response(416)
                        self.send_version()
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_version()
                length = str(len(body) - start)
                self.send_header("Content-Length", server.length_header.get(self.path, length))
                if self.path in server.overlong:
                    self.send_endless(body[start:], server.overlong[self.path])
                    return
                self.end_headers()
                if self.path in server.trickle:
                    self.send_trickle(body[start:], *server.trickle[self.path])
                    return
                cut = server.truncate_once.pop(self.path, None)
                cut = server.truncate_always.get(self.path, cut)
                payload = body[start:] if cut is None else body[start : start + cut]
                self.wfile.write(payload)
                if cut is not None:
                    self.close_connection = True

            def send_answer(self, status, headers):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def send_version(self):
                for name, value in server.versions.get(self.path, {}).items():
                    self.send_header(name, value)

            def send_endless(self, body, size):
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                sent = 0
                with contextlib.suppress(ConnectionError):  # the client stopped reading
                    while sent < size:
                        piece = (body or b"x")[: size - sent]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        sent += len(piece)
                    self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

            def send_trickle(self, body, head, piece, every, for_s):
                hang_up_at = time.monotonic() + for_s
                sent = head
                with contextlib.suppress(ConnectionError):  # the client stopped reading
                    self.wfile.write(body[:head])
                    while sent < len(body) and time.monotonic() < hang_up_at:
                        if server.closing.wait(every):
                            break
                        self.wfile.write(body[sent : sent + piece])
                        sent += piece
                self.close_connection = True

            def send_odd(self, body, asked, status, shift, content_range):
                start = asked + shift if status == 206 else 0
                self.send_response(status)
                if content_range is not None:
                    header = content_range.format(start=start, end=len(body) - 1, size=len(body))
                    self.send_header("Content-Range", header)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                self.wfile.write(body[start:])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def gd_server():
    server = _Server({"/hg38.ml.fa.gz": gzip.compress(FASTA), "/seq.bed": BED})
    yield server
    server.close()


def urls(server):
    return {"fasta_url": f"{server.url}/hg38.ml.fa.gz", "bed_url": f"{server.url}/seq.bed"}


def test_prepare_hg38_end_to_end_and_skip(gd_server, tmp_path):
    logs = []
    paths = prepare_hg38(tmp_path / "hg38", **urls(gd_server), log=logs.append)
    assert paths == {
        "fasta": tmp_path / "hg38/hg38.ml.fa",
        "bed": tmp_path / "hg38/human-sequences.bed",
    }
    assert paths["fasta"].read_bytes() == FASTA
    assert paths["bed"].read_bytes() == BED
    names = sorted(p.name for p in (tmp_path / "hg38").iterdir())
    assert names == ["hg38.ml.fa", "hg38.ml.fa.fai", "human-sequences.bed"]
    assert Genome(paths["fasta"]).lengths == {"chr1": 3000, "chr2": 3000}
    assert any("100.0%" in line for line in logs)
    assert any("3 rows (train 1, valid 1, test 1)" in line for line in logs)

    n_requests = len(gd_server.requests)
    logs.clear()
    prepare_hg38(tmp_path / "hg38", **urls(gd_server), log=logs.append)
    assert len(gd_server.requests) == n_requests  # nothing fetched again
    assert sum("already present" in line for line in logs) == 2


def test_truncated_transfer_resumes_with_range(gd_server, tmp_path):
    body = gd_server.files["/hg38.ml.fa.gz"]
    gd_server.truncate_once["/hg38.ml.fa.gz"] = 500
    logs = []
    url = f"{gd_server.url}/hg38.ml.fa.gz"
    out = download(url, tmp_path / "f.gz", log=logs.append, retry_wait=0)
    assert out.read_bytes() == body
    assert gd_server.requests == [("/hg38.ml.fa.gz", None), ("/hg38.ml.fa.gz", "bytes=500-")]
    assert any("resuming at 500 B" in line for line in logs)
    assert not (tmp_path / "f.gz.part").exists()


def test_resume_from_existing_part_and_server_without_range(gd_server, tmp_path):
    body = gd_server.files["/seq.bed"]
    (tmp_path / "b.bed.part").write_bytes(body[:10])
    assert download(f"{gd_server.url}/seq.bed", tmp_path / "b.bed", log=print).read_bytes() == body
    assert gd_server.requests[-1] == ("/seq.bed", "bytes=10-")

    (tmp_path / "c.bed.part").write_bytes(b"garbage-garbage")
    gd_server.ignore_range.add("/seq.bed")
    logs = []
    assert (
        download(f"{gd_server.url}/seq.bed", tmp_path / "c.bed", log=logs.append).read_bytes()
        == body
    )
    assert any("starting again from byte 0" in line for line in logs)

    (tmp_path / "d.bed.part").write_bytes(body)  # complete but never renamed
    gd_server.ignore_range.clear()
    n_requests = len(gd_server.requests)
    assert download(f"{gd_server.url}/seq.bed", tmp_path / "d.bed", log=print).read_bytes() == body
    assert gd_server.requests[n_requests:] == [("/seq.bed", f"bytes={len(body)}-")]  # 416: done


RANGE = "bytes {start}-{end}/{size}"


@pytest.mark.parametrize(
    "status, shift, content_range",
    [
        (206, -7, RANGE),
        (206, 7, RANGE),
        (206, 0, None),
        (206, 0, "bytes={start}-{end}/{size}"),
        (200, 0, None),
    ],
    ids=[
        "a range from before the byte asked for",
        "a range from after it",
        "206 without Content-Range",
        "a malformed Content-Range",
        "200 with the whole file",
    ],
)
def test_a_resume_answered_with_other_bytes_than_asked_for_starts_again_from_byte_0(
    gd_server, tmp_path, status, shift, content_range
):
    body = gd_server.files["/hg38.ml.fa.gz"]
    (tmp_path / "f.gz.part").write_bytes(body[:100])
    gd_server.odd_resume["/hg38.ml.fa.gz"] = (status, shift, content_range)
    logs = []
    out = download(f"{gd_server.url}/hg38.ml.fa.gz", tmp_path / "f.gz", log=logs.append)
    assert out.read_bytes() == body  # was: those bytes written after the part, or from byte 0
    assert gd_server.requests[0] == ("/hg38.ml.fa.gz", "bytes=100-")
    assert any("starting again from byte 0" in line for line in logs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.gz"]


def test_part_of_the_file_sent_for_the_whole_file_is_one_line_and_no_file(gd_server, tmp_path):
    gd_server.odd_always["/hg38.ml.fa.gz"] = (206, 7, RANGE)  # to every request
    url = f"{gd_server.url}/hg38.ml.fa.gz"
    with pytest.raises(DownloadError, match="206 Partial Content .*bytes 7-") as caught:
        download(url, tmp_path / "f.gz", log=print)  # was: bytes 7.. written from byte 0
    assert "\n" not in str(caught.value) and "run again" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "f.gz.part").write_bytes(b"x" * 100)  # a resume: the same, the part kept
    with pytest.raises(DownloadError, match="206 Partial Content"):
        download(url, tmp_path / "f.gz", log=print)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.gz.part"]


def test_ctrl_c_in_a_transfer_leaves_the_part_only_and_the_next_run_resumes(
    gd_server, tmp_path, monkeypatch
):
    body = gd_server.files["/hg38.ml.fa.gz"]
    real_received = download_module._received
    reads = []

    def received_then_ctrl_c(response):
        reads.append(response)
        if len(reads) == 3:
            raise KeyboardInterrupt
        return real_received(response)

    monkeypatch.setattr(download_module, "_CHUNK", 100)
    monkeypatch.setattr(download_module, "_received", received_then_ctrl_c)
    url = f"{gd_server.url}/hg38.ml.fa.gz"
    with pytest.raises(KeyboardInterrupt):
        download(url, tmp_path / "f.gz", log=print)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.gz.part"]
    assert (tmp_path / "f.gz.part").read_bytes() == body[:200]
    monkeypatch.undo()
    assert download(url, tmp_path / "f.gz", log=print).read_bytes() == body
    assert gd_server.requests[-1] == ("/hg38.ml.fa.gz", "bytes=200-")


def test_size_mismatch_never_leaves_final_file(gd_server, tmp_path):
    gd_server.truncate_always["/hg38.ml.fa.gz"] = 50
    with pytest.raises(DownloadError, match=r"incomplete after 3 attempts \(150 of \d+ bytes\)"):
        download(
            f"{gd_server.url}/hg38.ml.fa.gz",
            tmp_path / "hg38.ml.fa.gz",
            retries=2,
            log=print,
            retry_wait=0,
        )
    assert not (tmp_path / "hg38.ml.fa.gz").exists()
    assert (tmp_path / "hg38.ml.fa.gz.part").stat().st_size == 150  # kept for resuming
    gd_server.truncate_always.clear()
    prepare_hg38(tmp_path, **urls(gd_server), log=print)
    assert (tmp_path / "hg38.ml.fa").read_bytes() == FASTA
    assert gd_server.requests[-1][1] == "bytes=150-"


def test_bad_bed_and_missing_url(gd_server, tmp_path):
    gd_server.files["/seq.bed"] = b"chr1\t0\t100\n"
    with pytest.raises(DownloadError, match="seq.bed sent no valid file .*expected 4 columns"):
        prepare_hg38(tmp_path, **urls(gd_server), log=print)  # was: named the .part, deleted
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(f"{gd_server.url}/missing", tmp_path / "x", log=print)
    with pytest.raises(DownloadError, match="cannot reach"):
        download("http://127.0.0.1:9/none", tmp_path / "x", log=print, retry_wait=0)


@pytest.mark.parametrize(
    "knob, said",
    [("silent", "no response in 0.2 s;"), ("hang_up", r"no response \(.*closed connection")],
    ids=["never answers", "hangs up"],
)
def test_a_server_that_sends_no_response_is_one_line_naming_the_url(
    gd_server, tmp_path, knob, said
):
    getattr(gd_server, knob).add("/seq.bed")
    url = f"{gd_server.url}/seq.bed"
    with pytest.raises(DownloadError, match=said) as caught:  # was: TimeoutError, a traceback
        download(url, tmp_path / "seq.bed", log=print, timeout=0.2, retry_wait=0)
    assert f"{url} sent no response" in str(caught.value)
    assert len(gd_server.requests) == 6  # retried (was: given up after the first)
    assert "run again" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_redirect_loop_is_one_line(gd_server, tmp_path):
    gd_server.redirect_loop.add("/seq.bed")
    with pytest.raises(DownloadError, match="HTTP 302 .*infinite loop") as caught:
        download(f"{gd_server.url}/seq.bed", tmp_path / "seq.bed", log=print)
    assert "\n" not in str(caught.value)  # was: urllib's reason, over three lines
    assert len(gd_server.requests) <= 11  # urllib follows at most 10 redirects
    assert list(tmp_path.iterdir()) == []


def test_an_html_page_sent_for_the_gzip_never_takes_its_name(gd_server, tmp_path):
    """A server (a captive portal, a moved mirror) that answers 200 with an HTML page."""
    gzipped = gd_server.files["/hg38.ml.fa.gz"]
    gd_server.files["/hg38.ml.fa.gz"] = b"<html><body>Moved</body></html>"
    with pytest.raises(DownloadError, match="gz sent no valid file .*not as a gzip file does") as e:
        prepare_hg38(tmp_path, **urls(gd_server), log=print)
    assert str(e.value).endswith("check the URL and run again")
    assert not (tmp_path / "hg38.ml.fa.gz").exists()  # was: kept, and taken as downloaded
    assert not (tmp_path / "hg38.ml.fa.gz.part").exists()
    gd_server.files["/hg38.ml.fa.gz"] = gzipped  # the right URL: the next run completes
    prepare_hg38(tmp_path, **urls(gd_server), log=print)
    assert (tmp_path / "hg38.ml.fa").read_bytes() == FASTA


def test_a_url_without_a_scheme_is_one_line(tmp_path, capsys):
    where = ["--fasta-url", "http://127.0.0.1:9/f.gz", "--bed-url", "data/seq.bed"]
    assert cli.main(["data", "hg38", "--dest", str(tmp_path), *where]) == 2
    err = one_line_error(capsys, "data")  # was: ValueError: unknown url type, a traceback
    assert "'data/seq.bed' is no URL" in err and "https://HOST/PATH" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["human-sequences.bed.part", "human-sequences.bed.part.validator"])
def test_a_folder_where_a_download_writes_is_one_line(gd_server, tmp_path, capsys, name):
    """Was: IsADirectoryError, a traceback (the part opened, or its record read or written)."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "keep.txt").write_text("the user's")
    where = [f"--{k.replace('_', '-')}={v}" for k, v in urls(gd_server).items()]
    assert cli.main(["data", "hg38", "--dest", str(tmp_path), *where]) == 2
    err = one_line_error(capsys, "data")
    assert f"{tmp_path / name} is in the way of the download" in err and "move it away" in err
    assert (tmp_path / name / "keep.txt").read_text() == "the user's"


def _raise(error: OSError):
    """A ``write`` that raises ``error``."""

    def write(data):
        raise error

    return write


def _failing_writes(error: OSError):
    """``open`` for ``genodiff.data.download``: files opened for writing take no byte, their
    writes raise ``error`` (a full disk, a folder made read-only under the run)."""
    real_open = open

    def opener(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "w" in mode or "+" in mode:
            handle.write = _raise(error)
        return handle

    return opener


@pytest.mark.parametrize(
    "error, raised, said",
    [
        (OSError(errno.ENOSPC, "No space left on device"), DiskFullError, "no space left"),
        (OSError(errno.EIO, "Input/output error"), OSError, "Input/output error"),
    ],
    ids=["disk full", "I/O error"],
)
def test_a_failed_write_of_the_part_is_no_transfer_to_retry(
    gd_server, tmp_path, monkeypatch, error, raised, said
):
    monkeypatch.setattr(download_module, "open", _failing_writes(error), raising=False)
    with pytest.raises(raised, match=said) as caught:  # was: retried, "incomplete after 6 attempts"
        download(f"{gd_server.url}/hg38.ml.fa.gz", tmp_path / "f.gz", log=print)
    assert not isinstance(caught.value, DownloadError)
    assert len(gd_server.requests) == 1  # not fetched again while the disk cannot take it
    assert not (tmp_path / "f.gz").exists()
    assert (tmp_path / "f.gz.part").exists()  # kept to resume from
    if raised is DiskFullError:
        assert "run again to resume" in str(caught.value)


def test_a_full_disk_while_decompressing_keeps_the_download_and_says_so(tmp_path, monkeypatch):
    compressed = tmp_path / "hg38.ml.fa.gz"
    compressed.write_bytes(gzip.compress(FASTA))
    real_atomic_write = atomic_files.atomic_write

    @contextlib.contextmanager
    def full_disk(path, mode="w", **kwargs):
        with real_atomic_write(path, mode, **kwargs) as handle:
            handle.write = _raise(OSError(errno.ENOSPC, "No space left on device"))
            yield handle

    monkeypatch.setattr(download_module, "atomic_write", full_disk)
    with pytest.raises(DiskFullError) as caught:
        gunzip(compressed, tmp_path / "hg38.ml.fa", log=print)
    assert "delete" not in str(caught.value)  # was: "cannot decompress ...; delete it"
    assert compressed.read_bytes() == gzip.compress(FASTA)
    assert not (tmp_path / "hg38.ml.fa").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hg38.ml.fa.gz"]


def test_a_damaged_download_is_still_named_to_fetch_again(tmp_path):
    damaged = tmp_path / "hg38.ml.fa.gz"
    damaged.write_bytes(gzip.compress(FASTA)[:-20])  # the end cut off
    with pytest.raises(DownloadError, match="cannot decompress .*delete it and run again"):
        gunzip(damaged, tmp_path / "hg38.ml.fa", log=print)
    assert not (tmp_path / "hg38.ml.fa").exists()


def test_what_a_killed_decompression_left_is_removed_by_the_next_run(gd_server, tmp_path):
    dest = tmp_path / "hg38"
    dest.mkdir()
    (dest / ".hg38.ml.fa.4242.tmp").write_bytes(FASTA[:1000])  # pid 4242 was killed
    (dest / ".notes.tmp").write_text("not ours")
    # and a record of a part's version, half written (genodiff.data.remote_version)
    (dest / ".hg38.ml.fa.gz.part.validator.4243.tmp").write_text('{"ETag": "')
    (dest / ".human-sequences.bed.part.validator.4244.tmp").write_text("{")
    prepare_hg38(dest, **urls(gd_server), log=print)
    names = sorted(p.name for p in dest.iterdir())
    assert names == [".notes.tmp", "hg38.ml.fa", "hg38.ml.fa.fai", "human-sequences.bed"]


def test_the_gzip_a_run_killed_after_its_decompression_kept_is_removed(gd_server, tmp_path):
    """The FASTA is renamed into place whole (atomic_write): beside it, the .gz is a leftover
    (830 MB for hg38), not a download to decompress again."""
    dest = tmp_path / "hg38"
    dest.mkdir()
    (dest / "hg38.ml.fa").write_bytes(FASTA)
    (dest / "hg38.ml.fa.gz").write_bytes(gzip.compress(FASTA))
    prepare_hg38(dest, **urls(gd_server), log=print)
    names = sorted(p.name for p in dest.iterdir())
    assert names == ["hg38.ml.fa", "hg38.ml.fa.fai", "human-sequences.bed"]
    assert (dest / "hg38.ml.fa").read_bytes() == FASTA
    assert not any(path.endswith(".gz") for path, _ in gd_server.requests)


def hg38_command(server, dest) -> list[str]:
    where = urls(server)
    return ["data", "hg38", "--dest", str(dest), "--fasta-url", where["fasta_url"],
            "--bed-url", where["bed_url"]]  # fmt: skip


def test_a_second_run_into_the_same_folder_is_refused(gd_server, tmp_path, capsys):
    """Two runs would write the same .part file, and each rename and delete what the other
    still writes."""
    dest = tmp_path / "hg38"
    dest.mkdir()
    with atomic_files.writer_lock(dest / ".lock", dest, parameter="dest"):  # the first run
        assert cli.main(hg38_command(gd_server, dest)) == 2
        err = one_line_error(capsys, "data")
    assert "being written by another run right now" in err and "(--dest)" in err
    assert "another folder" in err
    assert gd_server.requests == []
    assert list(dest.iterdir()) == []  # the first run's lock gone with it, nothing written

    file = tmp_path / "notes.txt"
    file.write_text("mine")
    assert cli.main(hg38_command(gd_server, file)) == 2
    assert "is a file; name a folder" in one_line_error(capsys, "data")  # was: [Errno 17]
    assert file.read_text() == "mine"

"""Resumable downloads (stdlib urllib) and ``prepare_hg38``, behind ``genodiff data hg38``.

A download goes to ``<name>.part``; an interrupted one resumes from there with an HTTP ``Range``
request (a server that answers 200 instead of 206, or 206 with a Content-Range that is missing,
malformed or starts elsewhere than the byte asked for, restarts it from byte 0, never writing
those bytes after the part). The version of the remote file the part holds (the server's ETag or
Last-Modified, ``genodiff.data.remote_version``) is recorded beside it in
``<name>.part.validator`` and sent back as ``If-Range``: a file changed on the server since (a
200, or a 206 or 416 naming another version) restarts it from byte 0 too, with a line saying so.
The size is checked against the server's Content-Length / Content-Range total, a body that goes
on past it is not read further (the part deleted), and only a complete, verified file is fsynced
and renamed to its final name, so a failure never leaves a partial file under the final name
(the ``.part`` file is this writer's documented staging, kept between runs to resume from, which
``atomic_write`` could not keep); the BED must also parse and the gzipped FASTA start as gzip
does (not an HTML page sent with status 200). Only the network's failures are retried, from the
bytes the ``.part`` holds (its version record kept): a transfer interrupted, stalled or closed
early, a server that sends no response, a connection refused or reset before one was made, a
network or host unreachable and a name that cannot be resolved for now (a server or network
that may come back; a connection that timed out, or a name that does not exist, stops at once),
and an answer that may change with time (408, 429,
500, 502, 503, 504; any other error status, such as 404, stops at once). A transfer that stalls,
delivering fewer than ``min_speed`` bytes per second (1 KiB/s by default) averaged over a window
of ``speed_window`` seconds (60), is stopped as an interrupted one is, the line saying the rate
observed and over how long: a server or proxy that trickles a byte now and then would otherwise
keep a download alive for years. Nothing at all for a window is a rate of 0: a server that sends
no response, or headers and then no byte, stalls the attempt once a window (or ``timeout``
seconds, 60 by default, when shorter) has passed without a byte, the line saying ``no response``
/ ``nothing received`` and for how long. The defaults never stop a slow but real line (dial-up
gives 5 KB/s; a pause of TCP retransmissions or of a congested link lasts seconds, inside the
window), while at 1 KiB/s the 830 MB hg38 FASTA would take nine days; a stall is seen within two
windows and one read, and a read waits at most a window. Before each retry the download waits
``retry_wait`` seconds (1), doubled after each failed attempt, or the seconds a 429 or 503
answer's ``Retry-After`` asks when more, never more than ``MAX_WAIT`` times ``retry_wait`` (a
minute by default); the line says how long. The error after the last attempt says what stopped
it and that running again resumes (or, when no byte came, what the server did); a write of the
``.part`` file that fails (a full disk, a read-only folder) stops the download at once, the
bytes received kept. Files already in place are skipped.
``prepare_hg38`` holds its folder (``.lock`` in it) so that two runs never write the same
files, and removes what a decompression that was killed left there.
"""

from __future__ import annotations

import errno
import gzip
import http.client
import math
import os
import re
import shutil
import socket
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from genodiff.atomic_files import (
    DISK_FULL,
    FILE_TOO_LARGE,
    atomic_write,
    fsync_path,
    remove_temporary_files,
    writer_lock,
)
from genodiff.data.genome import Genome, compression
from genodiff.data.hg38 import read_bed
from genodiff.data.remote_version import (
    Validator,
    names_another_version,
    read_record,
    record_path,
    validator_of,
    write_record,
)
from genodiff.errors import DiskFullError, InputValueError, UserInputError

HG38_FASTA_URL = "https://storage.googleapis.com/basenji_barnyard2/hg38.ml.fa.gz"
HG38_BED_URL = "https://storage.googleapis.com/basenji_barnyard2/sequences_human.bed"
HG38_FASTA_NAME = "hg38.ml.fa"
HG38_BED_NAME = "human-sequences.bed"
LOCK_FILE = ".lock"  # in the folder ``prepare_hg38`` writes, while it writes there

Log = Callable[[str], None]
_CHUNK = 1 << 20
#: HTTP statuses another attempt may mend (a request that timed out, too many requests, a server
#: error that passes); any other error status is an answer that waiting does not change.
_TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
_ASKS_TO_WAIT = frozenset({429, 503})  # the statuses whose ``Retry-After`` is honoured
MAX_WAIT = 60  # each wait between attempts: at most this many times ``retry_wait``


class DownloadError(UserInputError, OSError):
    """A transfer that could not be completed; the message says what was kept (``download``:
    the ``.part`` file, to resume from) and what to do."""


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


class _Progress:
    """Logs ``name: done / total (pct)`` at most every ``every`` seconds, and at the end."""

    def __init__(self, name: str, total: int | None, log: Log, every: float = 5.0) -> None:
        self.name, self.total, self.log, self.every = name, total, log, every
        self.last = 0.0

    def __call__(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.every:
            return
        self.last = now
        if self.total:
            self.log(
                f"  {self.name}: {_human(done)} / {_human(self.total)} "
                f"({100 * done / self.total:.1f}%)"
            )
        else:
            self.log(f"  {self.name}: {_human(done)}")


def _open_range(
    url: str, offset: int, timeout: float, validator: Validator | None = None
) -> tuple[http.client.HTTPResponse | None, int]:
    """Response for ``url`` from byte ``offset`` and the offset it really starts at: 0 (the
    whole file) unless the server sends the bytes from ``offset`` of the version ``validator``
    names (sent as ``If-Range``; None: any version).

    The response is None when the range is empty because ``offset`` is the full size. A
    failure another attempt may mend (no response within ``timeout`` seconds, a connection
    closed before one, a transient HTTP status) is a ``_NoAnswerError``.
    """
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "genodiff"})
    except ValueError as err:  # no scheme ("unknown url type")
        raise DownloadError(f"{url!r} is no URL ({err}); give one as https://HOST/PATH") from None
    if offset:
        request.add_header("Range", f"bytes={offset}-")
        if validator is not None:
            request.add_header("If-Range", validator[1])
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:  # the range starts at or past the end of the file
            complete = err.headers.get("Content-Range", "") == f"bytes */{offset}"
            if complete and not names_another_version(err.headers, validator):
                return None, offset
            return _open_range(url, 0, timeout)
        reason = " ".join(str(err.reason).split())  # a redirect loop's reason spans lines
        if err.code in _TRANSIENT:
            said = f"answered HTTP {err.code} {reason}"
            raise _NoAnswerError("refused", said, _retry_after(err)) from None
        raise DownloadError(
            f"GET {url} failed: HTTP {err.code} {reason}; check the URL and run again"
        ) from None
    except urllib.error.URLError as err:
        if _may_pass(err.reason):
            raise _NoAnswerError("unreachable", str(err.reason)) from None
        raise DownloadError(f"cannot reach {url}: {err.reason}") from None
    except TimeoutError:  # connected, then no response came
        raise _NoAnswerError("stalled", f"sent no response in {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as err:  # connected, then closed with no response
        raise _NoAnswerError("interrupted", f"sent no response ({_network_failure(err)})") from None
    if response.status != 206:
        return response, 0  # 200: the server sent the whole file
    if _range_start(response) == offset and not names_another_version(response.headers, validator):
        return response, offset
    response.close()  # other bytes than asked for (or of another version): not after the part
    if offset:
        return _open_range(url, 0, timeout)
    said = response.headers.get("Content-Range") or "no Content-Range"
    raise DownloadError(
        f"{url} answered a request for the whole file with 206 Partial Content ({said}); "
        "check the URL (or use another mirror) and run again"
    )


def _range_start(response: http.client.HTTPResponse) -> int | None:
    """The first byte a 206 response holds, by its Content-Range ``bytes FIRST-LAST/SIZE``
    (SIZE may be ``*``); None when the header is missing or malformed."""
    content_range = response.headers.get("Content-Range", "").strip()
    match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range)
    return int(match.group(1)) if match and int(match.group(1)) <= int(match.group(2)) else None


def _total_size(response: http.client.HTTPResponse) -> int | None:
    """Full size of the remote file, from Content-Range (206) or Content-Length (200)."""
    match = re.match(r"bytes \d+-\d+/(\d+)", response.headers.get("Content-Range", ""))
    if match:
        return int(match.group(1))
    length = (response.headers.get("Content-Length") or "").strip()
    return int(length) if length.isdecimal() and response.status == 200 else None


class _TransferInterruptedError(Exception):
    """A transfer that stopped in its middle, ``what`` (``interrupted``: the connection
    failed, raised from the network's error; ``stalled``; ``refused``: an HTTP status another
    attempt may mend; ``unreachable``: no connection made, which another attempt may make) and
    ``why`` in words: the download resumes from the bytes received so
    far. ``retry_after``: the seconds the server asked to wait first (None: it did not say)."""

    def __init__(self, what: str, why: str, retry_after: float | None = None) -> None:
        super().__init__(what, why)
        self.what, self.why, self.retry_after = what, why, retry_after


class _NoAnswerError(_TransferInterruptedError):
    """An attempt that got no response to read (``why`` says what the server did instead, worded
    to follow its URL: ``sent no response in 60 s``)."""


def _may_pass(reason: object) -> bool:
    """Whether a connection that could not be made (urllib's ``URLError.reason``) may be made
    on another attempt, and is said at once: refused or reset (a server restarting), a network
    or host unreachable (Wi-Fi or a VPN that dropped out), a name that could not be resolved
    for now (EAI_AGAIN). Not a connection that timed out (each attempt would wait ``timeout``
    again: minutes behind a firewall that drops packets), a name that does not exist, a
    certificate refused or a URL urllib cannot open."""
    if isinstance(reason, socket.gaierror):
        return reason.errno == socket.EAI_AGAIN
    passing = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError)
    unreachable = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN}
    return isinstance(reason, passing) or (
        isinstance(reason, OSError)
        and not isinstance(reason, TimeoutError)
        and reason.errno in unreachable
    )


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    """The seconds a 429 or 503 answer asks to wait before the next request, by its
    ``Retry-After`` in seconds; None for another status, no header or an HTTP date."""
    value = (err.headers.get("Retry-After") or "").strip()
    seconds = value.isascii() and value.isdigit()  # not the HTTP-date form
    return float(value) if seconds and err.code in _ASKS_TO_WAIT else None


def _wait_before_retry(failed: int, retry_wait: float, asked: float | None) -> float:
    """Seconds to wait after ``failed`` attempts failed: ``retry_wait`` doubled after each, or
    the ``asked`` seconds of a ``Retry-After`` when more, at most ``MAX_WAIT`` x ``retry_wait``."""
    wait = retry_wait * 2 ** min(failed - 1, 16)  # the exponent bounded: never an overflow
    return min(max(wait, asked or 0), MAX_WAIT * retry_wait)


def _received(response: http.client.HTTPResponse) -> bytes:
    """The bytes of ``response`` that have arrived, at most ``_CHUNK`` (empty at its end): one
    read of the socket, so that a server that trickles them is seen between reads rather than
    waited for until 1 MB is there. ``_TransferInterruptedError`` when the network fails, told
    apart from a failed write of the ``.part`` file, which no retry mends: ``stalled`` when
    nothing came within the socket's timeout (the response's wait, at most a stall window)."""
    began = time.monotonic()
    try:
        return response.read1(_CHUNK)
    except TimeoutError as err:
        waited = time.monotonic() - began
        raise _TransferInterruptedError("stalled", f"nothing received for {waited:.3g} s") from err
    except (OSError, http.client.HTTPException) as err:
        raise _TransferInterruptedError("interrupted", _network_failure(err)) from err


class _StallCheck:
    """Called with the bytes received so far after each read: ``_TransferInterruptedError``
    (``stalled``) when fewer than ``min_speed`` bytes per second arrived over the last
    ``window`` seconds or more (a monotonic clock; the window starts again when it was fast
    enough). ``min_speed`` 0: never."""

    def __init__(self, done: int, min_speed: float, window: float) -> None:
        self.min_speed, self.window = min_speed, window
        self.since, self.start = time.monotonic(), done

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        elapsed = now - self.since
        if elapsed < self.window:
            return
        speed = (done - self.start) / elapsed
        if speed < self.min_speed:
            raise _TransferInterruptedError(
                "stalled",
                f"{_human(speed)}/s over the last {elapsed:.3g} s, "
                f"below the minimum of {_human(self.min_speed)}/s",
            )
        self.since, self.start = now, done


def _require_limits(
    retries: int, timeout: float, min_speed: float, speed_window: float, retry_wait: float
) -> None:
    """InputValueError unless ``retries`` is an int >= 0, ``timeout`` and
    ``speed_window`` numbers > 0 and ``min_speed`` and ``retry_wait`` numbers >= 0."""
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise InputValueError(
            f"retries must be a number >= 0 without a fraction (0: one attempt only), "
            f"got {retries!r:.60}",
            parameter="retries",
        )
    for name, value, zero in (
        ("timeout", timeout, None),
        ("min_speed", min_speed, "no minimum"),
        ("speed_window", speed_window, None),
        ("retry_wait", retry_wait, "no wait"),
    ):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and math.isfinite(value) and (value > 0 or (value == 0 and zero)):
            continue
        bound = f">= 0 (0: {zero})" if zero else "> 0"
        raise InputValueError(f"{name} must be a number {bound}, got {value!r:.60}", parameter=name)


def _network_failure(err: BaseException) -> str:
    """What a failed read of a response says in a log line: the system's words for an OS error
    (``Connection reset by peer``), else its message, else its kind (``TimeoutError``)."""
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def _append_part(fh: BinaryIO, part: Path, chunk: bytes, total: int | None) -> None:
    """Append ``chunk`` to ``part``. A full disk is a ``DiskFullError`` saying that the bytes
    received so far stay in ``part`` to resume from; any other failure of the write (a folder
    made read-only, an I/O error) propagates as it is."""
    try:
        fh.write(chunk)
    except OSError as err:
        reason = DISK_FULL.get(err.errno) or FILE_TOO_LARGE.get(err.errno)
        if reason is None:
            raise
        received = _human(fh.seek(0, os.SEEK_END))
        needed = "" if total is None else f"{_human(total - fh.tell())} more needed, "
        free = _human(shutil.disk_usage(part.parent).free)
        raise DiskFullError(
            err.errno,
            f"{reason} writing {part} ({needed}{free} free there); the {received} received so "
            "far stay there: make room and run again to resume from them",
        ) from err


def download(
    url: str,
    dest: str | os.PathLike,
    log: Log = print,
    check: Callable[[Path], object] | None = None,
    retries: int = 5,
    timeout: float = 60.0,
    *,
    min_speed: float = 1024.0,
    speed_window: float = 60.0,
    retry_wait: float = 1.0,
) -> Path:
    """Download ``url`` to ``dest`` via ``dest.part``, resuming after an interruption.

    ``check(part_path)`` may reject the complete file by raising; the part is then deleted (a
    ValueError, saying what is wrong with the file, becomes a ``DownloadError`` naming ``url``).
    ``retries``: the attempts made after the first when the transfer is interrupted, stalls or
    ends early, the server sends no response or a transient HTTP error (408, 429, 500, 502,
    503, 504), or the connection is refused or the network unreachable (``_may_pass``), each
    resuming from the part. ``retry_wait`` (seconds; 0: none): the wait before the
    first retry, doubled before each next one, or the seconds a 429 or 503 answer's
    ``Retry-After`` asks when more, each at most ``MAX_WAIT`` x ``retry_wait``. ``timeout``: the
    most seconds to wait for the response and for any byte of it. ``min_speed`` (bytes per
    second; 0: no minimum) and ``speed_window`` (seconds): an attempt that receives fewer than
    ``min_speed`` bytes per second averaged over ``speed_window`` seconds stalled, and stops as
    an interrupted one does; one that receives nothing for a window (no response, or no byte of
    it) stalls then, before ``timeout`` when that is longer (the module's docstring says why the
    defaults, 1 KiB/s over 60 s, never stop a real line).
    """
    _require_limits(retries, timeout, min_speed, speed_window, retry_wait)
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    record = record_path(part)
    for path in (dest, part, record):  # what the download writes, renames and replaces
        if path.exists() and not path.is_file():
            raise DownloadError(
                f"{path} is in the way of the download of {url} and is no file (a folder?); "
                "move it away and run again"
            )
    dest.parent.mkdir(parents=True, exist_ok=True)
    done, validator = _part_to_resume(part, record, dest.name, log)
    # the socket's timeout: nothing at all for a stall window is a rate of 0, a stall
    patience = min(timeout, speed_window) if min_speed else timeout
    attempts, total = retries + 1, None
    for attempt in range(1, attempts + 1):
        try:
            response, start = _open_range(url, done, patience, validator)
            if response is None:  # the part holds the whole file
                total = done
                break
            with response:
                total = _total_size(response)
                if start != done:
                    why = _why_from_byte_0(response, validator)
                    log(f"  {dest.name}: {why}; starting again from byte 0")
                elif done:
                    log(f"  {dest.name}: resuming at {_human(done)}")
                done = start
                progress = _Progress(dest.name, total, log)
                stall_check = _StallCheck(done, min_speed, speed_window)
                with open(part, "r+b" if start else "wb") as fh:
                    fh.seek(start)
                    fh.truncate()
                    if not start:  # a new part, of the version of the file this response is
                        validator = validator_of(response.headers)
                        os.fsync(fh.fileno())  # emptied on disk before its record changes
                        write_record(record, validator)
                    while chunk := _received(response):
                        _append_part(fh, part, chunk, total)
                        done += len(chunk)
                        if total is not None and done > total:
                            break  # a body longer than announced (or endless): read no further
                        progress(done)
                        stall_check(done)
        except _TransferInterruptedError as err:  # done: the bytes the part holds
            stopped = err
            failure = (
                f"cannot reach the server ({err.why})"
                if err.what == "unreachable"
                else f"transfer {err.what} at {_human(done)} ({err.why})"
            )
        else:
            if total is None or done == total:
                break
            if done > total:
                _discard(part)
                raise DownloadError(
                    f"{url} sent more than the {total} bytes it announced; "
                    "deleted the partial file, run again to restart"
                )
            stopped, failure = None, f"connection closed at {done} of {total} bytes"
        log(f"  {dest.name}: {failure}")
        if attempt < attempts:
            asked = None if stopped is None else stopped.retry_after
            wait = _wait_before_retry(attempt, retry_wait, asked)
            said = "" if asked is None else f"; the server asked for {asked:g} s"
            next_one = f"attempt {attempt + 1} of {attempts}{said}"
            log(f"  {dest.name}: retrying in {wait:.3g} s ({next_one})")
            time.sleep(wait)
    else:
        if isinstance(stopped, _NoAnswerError) and not done:  # nothing received to resume from
            said = (
                f"cannot reach {url}: {stopped.why}"
                if stopped.what == "unreachable"
                else f"{url} {stopped.why}"
            )
            raise DownloadError(
                f"{said}; {attempts} attempts made: check the URL and the network and run again"
            )
        size = f"{done} bytes" if total is None else f"{done} of {total} bytes"
        raise DownloadError(
            f"{url}: incomplete after {attempts} attempts ({size}); the last one: {failure}; "
            f"run again to resume from {part}"
        )
    _finish(url, dest, part, done, total, check, log)
    return dest


def _finish(
    url: str,
    dest: Path,
    part: Path,
    done: int,
    total: int | None,
    check: Callable[[Path], object] | None,
    log: Log,
) -> None:
    """Check the complete ``part`` (``check``; deleted when it fails) and rename it to ``dest``."""
    _Progress(dest.name, total, log)(done, final=True)
    if total is None:
        log(f"  {dest.name}: the server announced no size, so it could not be verified")
    if check is not None:
        try:
            check(part)
        except ValueError as err:  # the server sent something else (an HTML error page)
            _discard(part)
            raise DownloadError(
                f"{url} sent no valid file ({err}); deleted it: check the URL and run again"
            ) from None
        except Exception:
            _discard(part)
            raise
    fsync_path(part)
    os.replace(part, dest)
    fsync_path(dest.parent)  # the rename itself
    record_path(part).unlink(missing_ok=True)


def _part_to_resume(part: Path, record: Path, name: str, log: Log) -> tuple[int, Validator | None]:
    """The bytes of ``part`` a download resumes after and the version of the remote file they
    are of (``record``: None when unknown); 0 when there is no part, or when its record is
    damaged (the part's version unknown although the server named one)."""
    done = part.stat().st_size if part.exists() else 0
    if not done:
        return 0, None
    try:
        return done, read_record(record)
    except ValueError as err:
        log(f"  {name}: {err}; starting again from byte 0")
        return 0, None


def _why_from_byte_0(response: http.client.HTTPResponse, validator: Validator | None) -> str:
    """Why a resume got the whole file, for the line that says so."""
    if names_another_version(response.headers, validator):
        return "the file on the server changed since the part was downloaded"
    return "the server sent the whole file, not the rest of the part"


def _discard(part: Path) -> None:
    """Delete the download ``part`` and the record of its version."""
    part.unlink(missing_ok=True)
    record_path(part).unlink(missing_ok=True)


def gunzip(src: str | os.PathLike, dest: str | os.PathLike, log: Log = print) -> Path:
    """Decompress ``src`` to ``dest`` atomically (``dest`` is whole or untouched)."""
    src, dest = Path(src), Path(dest)
    progress = _Progress(f"{dest.name} (decompressing)", None, log)
    with gzip.open(src, "rb") as fin, atomic_write(dest, "wb") as fout:
        while chunk := _decompressed(fin, src):
            fout.write(chunk)  # a full disk: atomic_write's DiskFullError; src is kept
            progress(fout.tell())
    return dest


def _require_gzip(path: Path) -> None:
    """A ``check`` for ``download``: ValueError unless ``path`` is gzip (``genome.compression``
    reads its first bytes), not an HTML error page a server sent with status 200."""
    if compression(path) == "none":
        with open(path, "rb") as fh:
            start = fh.read(16)
        raise ValueError(f"{path.name} starts {start!r}, not as a gzip file does")


def _decompressed(fin: gzip.GzipFile, src: Path) -> bytes:
    """The next chunk of ``fin``; a ``DownloadError`` saying to fetch ``src`` again when it
    is damaged (truncated, not gzip) or cannot be read."""
    try:
        return fin.read(_CHUNK)
    except (OSError, EOFError, zlib.error) as err:
        raise DownloadError(f"cannot decompress {src}: {err}; delete it and run again") from None


#: The files ``prepare_hg38`` downloads (each through ``NAME.part``).
PARTS = (HG38_BED_NAME, f"{HG38_FASTA_NAME}.gz")


def prepare_hg38(
    dest: str | os.PathLike,
    fasta_url: str = HG38_FASTA_URL,
    bed_url: str = HG38_BED_URL,
    log: Log = print,
) -> dict[str, Path]:
    """Fetch hg38 to ``dest/hg38.ml.fa`` (gunzipped, indexed) and ``dest/human-sequences.bed``.

    Returns ``{"fasta": path, "bed": path}``. Safe to run again: finished files are skipped
    and an interrupted download resumes.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputValueError(
            f"{dest} is a file; name a folder to write hg38 into", parameter="dest"
        )
    dest.mkdir(parents=True, exist_ok=True)
    with writer_lock(dest / LOCK_FILE, dest, parameter="dest"):  # one writer of its files
        # what killed writers left: a decompression, the version records of the downloads
        for name in (HG38_FASTA_NAME, *(record_path(dest / f"{f}.part").name for f in PARTS)):
            remove_temporary_files(dest, name)
        bed = _fetch_bed(dest, bed_url, log)
        fasta = _fetch_fasta(dest, fasta_url, log)
        log(f"indexing {fasta} (first time only)")
        genome = Genome(fasta)
        log(f"{fasta}: {len(genome.lengths)} sequences, {sum(genome.lengths.values()):,} bp")
        genome.close()
    return {"fasta": fasta, "bed": bed}


def _fetch_bed(dest: Path, url: str, log: Log) -> Path:
    """``dest/human-sequences.bed``, downloaded from ``url`` unless it is there."""
    bed = dest / HG38_BED_NAME
    if bed.exists():
        log(f"{bed}: already present")
    else:
        log(f"downloading {url} -> {bed}")
        download(url, bed, log=log, check=read_bed)
    rows = read_bed(bed)
    counts = {split: sum(r.split == split for r in rows) for split in ("train", "valid", "test")}
    log(f"{bed}: {len(rows)} rows ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return bed


def _fetch_fasta(dest: Path, fasta_url: str, log: Log) -> Path:
    """``dest/hg38.ml.fa``, downloaded gzipped from ``fasta_url`` and decompressed, unless it
    is there."""
    fasta = dest / HG38_FASTA_NAME
    gz = dest / f"{HG38_FASTA_NAME}.gz"
    if fasta.exists():
        log(f"{fasta}: already present")
    else:
        if gz.exists():
            log(f"{gz}: already downloaded")
        else:
            log(f"downloading {fasta_url} -> {gz}")
            download(fasta_url, gz, log=log, check=_require_gzip)
        log(f"decompressing {gz} -> {fasta}")
        gunzip(gz, fasta, log=log)
    if gz.exists():  # also one a run killed between the rename of its FASTA and here left
        gz.unlink()
        log(f"removed {gz}")
    return fasta

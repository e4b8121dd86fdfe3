"""Which failures of a download are retried, and how long it waits before each retry
(``genodiff.data.download``): a transient HTTP status (408, 429, 500, 502, 503, 504) is retried
from the ``.part`` after a wait that doubles from ``retry_wait`` up to a cap, or after the
seconds a 429 or 503 answer's ``Retry-After`` asks (capped too); any other error status stops
at once. The waits are checked loosely, from below only, on a monotonic clock."""

import re
import socket
import time

import pytest

from genodiff.data.download import DownloadError, download
from tests.test_download_resume import OLD, interrupted_at
from tests.test_hg38_download import _Server


@pytest.fixture
def server():
    server = _Server({"/f": OLD})
    yield server
    server.close()


def waits(logs: list[str]) -> list[str]:
    """The waits the retry lines of ``logs`` announce, as logged."""
    return [m.group(1) for line in logs if (m := re.match(r"  f: retrying in (\S+) s", line))]


@pytest.mark.parametrize("status", [503, 429])
def test_a_retry_after_is_waited_for_and_the_download_resumes_from_its_part(
    server, tmp_path, status
):
    """Was: HTTP 503 (429) was an error at once, the download not retried."""
    interrupted_at(server, tmp_path / "f", 500)
    server.answers["/f"] = [(status, {"Retry-After": "1"})]
    logs = []
    began = time.monotonic()
    out = download(f"{server.url}/f", tmp_path / "f", log=logs.append, retry_wait=0.05)
    assert time.monotonic() - began >= 1.0  # the second of Retry-After, more than 0.05 s
    assert out.read_bytes() == OLD
    assert server.requests[1:] == [("/f", "bytes=500-"), ("/f", "bytes=500-")]
    reason = {503: "Service Unavailable", 429: "Too Many Requests"}[status]
    assert f"  f: transfer refused at 500 B (answered HTTP {status} {reason})" in logs
    assert "  f: retrying in 1 s (attempt 2 of 6; the server asked for 1 s)" in logs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_the_wait_doubles_with_each_failed_attempt_up_to_60_times_retry_wait(server, tmp_path):
    server.answers["/f"] = [(503, {})] * 8  # no Retry-After
    logs = []
    began = time.monotonic()
    out = download(f"{server.url}/f", tmp_path / "f", log=logs.append, retries=8, retry_wait=0.001)
    assert time.monotonic() - began >= 0.183  # the sum of the waits below
    assert out.read_bytes() == OLD
    assert len(server.requests) == 9
    assert waits(logs) == ["0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.06", "0.06"]


@pytest.mark.parametrize(
    "status, retry_after, said",
    [
        (503, "3600", "0.6 s (attempt 2 of 6; the server asked for 3600 s)"),  # capped
        (503, "Fri, 31 Dec 2027 23:59:59 GMT", "0.01 s (attempt 2 of 6)"),  # a date: not read
        (500, "1", "0.01 s (attempt 2 of 6)"),  # Retry-After of a 429 or 503 only
    ],
    ids=["longer than the cap", "an HTTP date", "on a 500"],
)
def test_a_retry_after_is_capped_and_read_in_seconds_of_a_429_or_503_only(
    server, tmp_path, status, retry_after, said
):
    server.answers["/f"] = [(status, {"Retry-After": retry_after})]
    logs = []
    began = time.monotonic()
    out = download(f"{server.url}/f", tmp_path / "f", log=logs.append, retry_wait=0.01)
    assert time.monotonic() - began < 30  # far less than an hour, with room for a busy machine
    assert out.read_bytes() == OLD
    assert f"  f: retrying in {said}" in logs
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [408, 500, 502, 504])
def test_a_transient_status_is_retried(server, tmp_path, status):
    server.answers["/f"] = [(status, {})]
    out = download(f"{server.url}/f", tmp_path / "f", log=print, retry_wait=0)
    assert out.read_bytes() == OLD  # was: an error at once
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 501])
def test_an_error_that_waiting_does_not_mend_is_not_retried(server, tmp_path, status):
    interrupted_at(server, tmp_path / "f", 500)
    server.answers["/f"] = [(status, {})] * 6
    with pytest.raises(DownloadError, match=f"failed: HTTP {status} .*check the URL and run again"):
        download(f"{server.url}/f", tmp_path / "f", log=print, retry_wait=10)
    assert len(server.requests) == 2  # the interrupted one and this one, no retry, no wait
    assert (tmp_path / "f.part").read_bytes() == OLD[:500]  # kept to resume from


def test_a_server_that_stays_unavailable_is_one_line_after_the_last_attempt(server, tmp_path):
    server.answers["/f"] = [(503, {})] * 3
    url = f"{server.url}/f"
    with pytest.raises(DownloadError) as caught:
        download(url, tmp_path / "f", log=print, retries=2, retry_wait=0)
    assert str(caught.value) == (
        f"{url} answered HTTP 503 Service Unavailable; 3 attempts made: check the URL and the "
        "network and run again"
    )
    assert len(server.requests) == 3
    assert list(tmp_path.iterdir()) == []


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (a connection to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_server_that_refuses_the_connection_is_retried_until_it_is_up(tmp_path):
    """A server restarting: the first connection refused, the next made (was: "cannot reach" at
    once, the download given up)."""
    port, started = free_port(), []
    logs = []

    def log(line: str) -> None:  # the server comes up once the first attempt was refused
        logs.append(line)
        if "cannot reach the server" in line and not started:
            started.append(_Server({"/f": OLD}, port=port))

    try:
        out = download(f"http://127.0.0.1:{port}/f", tmp_path / "f", log=log, retry_wait=0)
        assert out.read_bytes() == OLD
    finally:
        for server in started:
            server.close()
    assert re.fullmatch(r"  f: cannot reach the server \(.*Connection refused\)", logs[0])
    assert logs[1] == "  f: retrying in 0 s (attempt 2 of 6)"
    assert started and started[0].requests == [("/f", None)]


def test_a_server_never_reached_is_one_line_after_the_last_attempt(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/f"
    logs = []
    with pytest.raises(DownloadError) as caught:
        download(url, tmp_path / "f", log=logs.append, retries=2, retry_wait=0)
    assert re.fullmatch(
        rf"cannot reach {re.escape(url)}: .*Connection refused\]?; 3 attempts made: check the "
        "URL and the network and run again",
        str(caught.value),
    )
    assert sum("cannot reach the server" in line for line in logs) == 3
    assert list(tmp_path.iterdir()) == []


def test_which_failures_to_connect_are_retried():
    """Refused, reset, a network or host unreachable (Wi-Fi or a VPN that dropped out) and a
    name not resolved for now are tried again; a connection that timed out (each attempt would
    wait the timeout again), a name that does not exist and a refused certificate are not."""
    import errno
    import ssl

    from genodiff.data.download import _may_pass

    again = [
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
        OSError(errno.ENETUNREACH, "Network is unreachable"),  # was not retried
        OSError(errno.EHOSTUNREACH, "No route to host"),  # was not retried
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
    ]
    not_again = [
        TimeoutError("timed out"),  # was retried: 6 x 60 s behind a firewall that drops it
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        ssl.SSLCertVerificationError(1, "certificate verify failed"),
        "unknown url type: ftp",
    ]
    assert [_may_pass(reason) for reason in again] == [True] * len(again)
    assert [_may_pass(reason) for reason in not_again] == [False] * len(not_again)

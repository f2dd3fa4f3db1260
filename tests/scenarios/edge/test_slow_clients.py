"""Slow clients cannot hold a real ``perdure serve`` (issue 29, item 5): stalled request
headers, a body trickled a byte a second and an idle kept-alive connection are each closed
after their time limit (the first two answered 408 in perdure's shape), a bystander is
served meanwhile, and ``/metrics`` counts every one by reason, with the parser's size
refusals. The clock itself is tests/server/edge/test_slow_clients.py."""

from __future__ import annotations

import json
import resource
import selectors
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import ServerProcess

from .access_server import access_server, new_key

HEADER_TIMEOUT = 3.0
BODY_TIMEOUT = 2.0
KEEP_ALIVE_TIMEOUT = 1.0
SLACK = 10.0
"""Seconds past a limit a test waits for the server before it gives up."""
STALLED = 800


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    _enough_file_descriptors(STALLED + 200)
    limits = [
        *("--header-timeout", str(HEADER_TIMEOUT)),
        *("--body-timeout", str(BODY_TIMEOUT)),
        *("--keep-alive-timeout", str(KEEP_ALIVE_TIMEOUT)),
    ]
    with access_server(tmp_path_factory.mktemp("slow"), *limits, token=None) as process:
        yield process


def _enough_file_descriptors(count: int) -> None:
    """Raise this process's open-file limit to ``count`` if it is lower (the server, started
    after, inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        if hard != resource.RLIM_INFINITY and hard < count:
            pytest.skip(f"the open-file limit is {hard}, {count} are needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))


def _refusals(server: ServerProcess) -> dict[str, int]:
    """Every ``perdure_edge_refusals_total`` count by reason (a loopback scrape)."""
    scrape = httpx.get(f"{server.url}/metrics", timeout=SLACK)
    assert scrape.status_code == 200, scrape.text
    prefix = 'perdure_edge_refusals_total{reason="'
    counts = {}
    for row in scrape.text.splitlines():
        if row.startswith(prefix):
            reason, _, value = row[len(prefix) :].partition('"} ')
            counts[reason] = int(float(value))
    return counts


def _counted_since(server: ServerProcess, before: dict[str, int], reason: str) -> int:
    return _refusals(server).get(reason, 0) - before.get(reason, 0)


def _connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=SLACK)
    sock.setblocking(False)
    return sock


def _read_until_closed(socks: list[socket.socket], wait: float) -> dict[socket.socket, bytes]:
    """What the server sent on each of ``socks`` until it closed them; a socket still open
    after ``wait`` seconds is missing from the result."""
    received = {sock: b"" for sock in socks}
    closed: dict[socket.socket, bytes] = {}
    by_fd = {sock.fileno(): sock for sock in socks}
    deadline = time.monotonic() + wait
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while len(closed) < len(socks):
            left = deadline - time.monotonic()
            ready = selector.select(timeout=max(left, 0))
            if not ready and left <= 0:
                break
            for key, _events in ready:
                sock = by_fd[key.fd]
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                received[sock] += chunk
                if not chunk:
                    selector.unregister(sock)
                    closed[sock] = received[sock]
    return closed


def _parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def _assert_408(answer: bytes, code: str, seconds: float) -> None:
    status, headers, body = _parse(answer)
    assert status == 408, answer[:300]
    assert headers["x-rivet-error"] == f"request.{code}"
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    error = json.loads(body)
    assert (error["group"], error["code"]) == ("request", code)
    assert error["metadata"] == {"timeout": seconds}


def _stall(server: ServerProcess, index: int) -> socket.socket:
    """A connection that sent part of a request line, or part of its headers, and stops."""
    sock = _connect(server)
    if index % 2:
        sock.send(b"GET /gateway/box/action/g")
    else:
        sock.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: abc")
    return sock


def _target(action: str, key: str) -> str:
    return f"/gateway/guarded/action/{action}?rvt-method=getOrCreate&rvt-key={key}"


def _call(server: ServerProcess, action: str, key: str, *args: object) -> object:
    """``action(*args)`` on the ``guarded`` actor ``key``; its output."""
    with httpx.Client(timeout=SLACK) as client:
        answer = client.post(server.url + _target(action, key), json={"args": list(args)})
    assert answer.status_code == 200, answer.text
    return answer.json()["output"]


def test_stalled_headers_are_closed_and_a_bystander_is_served(server: ServerProcess) -> None:
    before = _refusals(server)
    stalled = [_stall(server, index) for index in range(STALLED)]
    try:
        assert _call(server, "ping", new_key()) == "pong"  # the bystander
        # The bystander was served while every stalled connection was still open.
        assert _read_until_closed(stalled, 0) == {}
        closed = _read_until_closed(stalled, HEADER_TIMEOUT + SLACK)
        assert len(closed) == STALLED, f"{STALLED - len(closed)} stalled connections still open"
        for answer in closed.values():
            _assert_408(answer, "header_timeout", HEADER_TIMEOUT)
    finally:
        for sock in stalled:
            sock.close()
    assert _counted_since(server, before, "request.header_timeout") >= STALLED


def test_a_connection_that_sends_nothing_is_closed_silently(server: ServerProcess) -> None:
    before = _refusals(server)
    with _connect(server) as sock:
        assert _read_until_closed([sock], HEADER_TIMEOUT + SLACK) == {sock: b""}
    assert _counted_since(server, before, "request.header_timeout") >= 1


def test_a_body_sent_a_byte_a_second_is_408_and_nothing_runs(server: ServerProcess) -> None:
    key = new_key()
    before = _refusals(server)
    body = json.dumps({"args": [None]}).encode()
    head = (
        f"POST {_target('record_probe', key)} HTTP/1.1\r\nHost: x\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    with _connect(server) as sock:
        sock.send(head.encode())
        closed: dict[socket.socket, bytes] = {}
        for byte in body[:-1]:  # never the last one
            sock.send(bytes([byte]))
            closed = _read_until_closed([sock], 1.0)
            if closed:
                break
        else:
            closed = _read_until_closed([sock], BODY_TIMEOUT + SLACK)
        assert sock in closed, "the trickled body's connection is still open"
        _assert_408(closed[sock], "body_timeout", BODY_TIMEOUT)
    assert _counted_since(server, before, "request.body_timeout") == 1
    assert _call(server, "probe", key) is None  # record_probe never ran


def test_a_long_action_outlives_both_limits(server: ServerProcess) -> None:
    """The clock stops at the end of the request: answering may take as long as it takes."""
    seconds = HEADER_TIMEOUT + BODY_TIMEOUT
    assert _call(server, "slow", new_key(), seconds) == "done"


def test_an_idle_kept_alive_connection_is_closed_silently(server: ServerProcess) -> None:
    before = _refusals(server)
    with _connect(server) as sock:
        sock.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        closed = _read_until_closed([sock], KEEP_ALIVE_TIMEOUT + SLACK)
        assert sock in closed, "the idle connection is still open"
        status, headers, body = _parse(closed[sock])
        assert status == 200  # its answer, and nothing after it
        assert len(body) == int(headers["content-length"])
    assert _counted_since(server, before, "request.keep_alive_timeout") >= 1


def test_a_busy_kept_alive_connection_outlives_the_header_timeout(server: ServerProcess) -> None:
    """The header clock restarts with each request: a connection making requests for longer
    than the header timeout, with its headers in pieces, is served throughout."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=SLACK) as sock:
        started = time.monotonic()
        while time.monotonic() - started < HEADER_TIMEOUT + 1:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            time.sleep(KEEP_ALIVE_TIMEOUT / 2)
            sock.sendall(b"X-Piece: 2\r\n\r\n")
            answer = b""
            while b'"status":"ok"' not in answer:
                chunk = sock.recv(65536)
                assert chunk, "the server closed a busy connection"
                answer += chunk
            assert _parse(answer)[0] == 200


def test_the_parsers_size_refusals_are_counted(server: ServerProcess) -> None:
    before = _refusals(server)
    requests = {
        "request.uri_too_long": b"GET /health?pad=%s HTTP/1.1\r\n\r\n" % (b"a" * 70_000),
        "request.headers_too_large": b"GET /health HTTP/1.1\r\nX-Big: %s\r\n\r\n" % (b"a" * 70_000),
        "request.malformed": b"NOT HTTP AT ALL\r\n\r\n",
    }
    for reason, request in requests.items():
        with _connect(server) as sock:
            sock.setblocking(True)
            sock.sendall(request)
            sock.setblocking(False)
            closed = _read_until_closed([sock], SLACK)
            assert sock in closed
            assert _parse(closed[sock])[1]["x-rivet-error"] == reason
    for reason in requests:
        assert _counted_since(server, before, reason) == 1, reason

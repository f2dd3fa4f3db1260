"""A Server-Sent Events reader that stops reading cannot grow the server's memory
(issue 29): what waits for it is bounded (perdure.server.gateway.sse.MAX_QUEUED_BYTES),
and once it falls that far behind it is told why (``$perdure.error``,
``message.outgoing_queue_full``) and its stream ends. Over a real server process, with a
real socket that stops reading."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest

from perdure.client import create_client
from tests.scenarios.events.conftest import REGISTRY
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)

EVENT_SIZE = 4096
EVENTS_PER_CALL = 500
CALLS = 40  # 40 x 500 x 4 KiB: 80 MiB of events (the figure), twenty times the bound
GROWTH_LIMIT = 20 * 1024 * 1024


def rss(pid: int) -> int:
    """The process's resident memory, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_stalled_reader(server: ServerProcess, key: str) -> socket.socket:
    """An SSE stream whose reader takes the response head and then stops reading (a
    small receive buffer, so that the server's side fills soon)."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect((host, int(port)))
    path = f"/gateway/counter/events?rvt-method=getOrCreate&rvt-key={key}"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    head = b""
    while b": open" not in head:
        chunk = sock.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return sock


def read_to_end(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    data = bytearray()
    while time.monotonic() < deadline:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return bytes(data)
        data += chunk
    raise AssertionError(f"the stream did not end; {len(data)} bytes read")


async def test_a_stalled_reader_costs_a_bounded_amount_and_is_told_why(
    tmp_path: Path,
) -> None:
    server = ServerProcess(REGISTRY, tmp_path / "data").start()
    try:
        assert server.process is not None
        pid = server.process.pid
        async with create_client(server.url) as client:
            handle = client.counter.get_or_create("flood")
            await handle.flood(1, 16)  # the actor and the server warmed up
            sock = open_stalled_reader(server, "flood")
            try:
                before = rss(pid)
                peak = before
                for _ in range(CALLS):
                    assert await handle.flood(EVENTS_PER_CALL, EVENT_SIZE) == EVENTS_PER_CALL
                    peak = max(peak, rss(pid))
                await asyncio.sleep(0.5)
                peak = max(peak, rss(pid))
                assert peak - before < GROWTH_LIMIT, (before, peak)
                data = await asyncio.to_thread(read_to_end, sock, time.monotonic() + 30)
            finally:
                sock.close()
            # What had been sent arrives in order, then the reason, then the end.
            assert data.count(b"event: other") >= 1
            tail = data[data.rindex(b"event: ") :]
            assert tail.startswith(b"event: $perdure.error\ndata: "), tail[:200]
            error = json.loads(tail.split(b"\n")[1].removeprefix(b"data: "))
            assert (error["group"], error["code"]) == ("message", "outgoing_queue_full")
            assert data.endswith(b"0\r\n\r\n")  # the chunked body was ended, not cut
            # Far less than was emitted reached the reader: the rest was dropped.
            assert len(data) < CALLS * EVENTS_PER_CALL * EVENT_SIZE // 2
            # The server goes on serving, and a new stream resumes from the log.
            assert await handle.flood(1, 16) == 1
    finally:
        server.kill()

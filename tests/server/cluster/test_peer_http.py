"""The lean HTTP/1.1 client nodes forward with, against a real socket server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from perdure.server.cluster import peer_http
from perdure.server.cluster.peer_http import PeerConnectError, PeerHttpError, PeerHttpPool
from tests.support.server import free_port

Answer = Callable[[bytes], bytes | None]
Serve = Callable[[Answer], Awaitable["Peer"]]


class Peer:
    """A socket server answering each request with ``answer(body)`` (``None``: hang up)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.port = free_port()
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                reply = self.answer(await reader.readexactly(length))
                if reply is None:
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.perdure/forward"


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> Peer:
        peer = Peer(answer)
        peer.server = await asyncio.start_server(peer._serve, "127.0.0.1", peer.port)
        servers.append(peer.server)
        return peer

    yield start
    for server in servers:
        server.close()


async def test_posts_reuse_one_kept_alive_connection(serve: Serve) -> None:
    peer = await serve(lambda body: ok(body[::-1]))
    pool = PeerHttpPool({"x-test": "1"})
    try:
        answers = [
            await pool.post(peer.url, b"abc%d" % i, connect_timeout=1, timeout=5) for i in range(3)
        ]
    finally:
        await pool.close()
    assert answers == [(200, b"%dcba" % i) for i in range(3)]
    assert peer.connections == 1


async def test_idle_connections_are_not_reused_past_their_time(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer_http, "IDLE_SECONDS", 0.05)
    peer = await serve(lambda body: ok(body))
    pool = PeerHttpPool({})
    try:
        await pool.post(peer.url, b"1", connect_timeout=1, timeout=5)
        await asyncio.sleep(0.1)
        await pool.post(peer.url, b"2", connect_timeout=1, timeout=5)
    finally:
        await pool.close()
    assert peer.connections == 2


async def test_connection_close_is_honoured(serve: Serve) -> None:
    peer = await serve(lambda body: ok(body, b"connection: close\r\n"))
    pool = PeerHttpPool({})
    try:
        for _ in range(2):
            assert await pool.post(peer.url, b"x", connect_timeout=1, timeout=5) == (200, b"x")
    finally:
        await pool.close()
    assert peer.connections == 2


async def test_failures_say_whether_the_request_was_delivered(serve: Serve) -> None:
    pool = PeerHttpPool({})
    refused = f"http://127.0.0.1:{free_port()}/"
    with pytest.raises(PeerConnectError):
        await pool.post(refused, b"x", connect_timeout=1, timeout=5)
    hangs_up = await serve(lambda body: None)
    with pytest.raises(PeerHttpError):
        await pool.post(hangs_up.url, b"x", connect_timeout=1, timeout=5)
    chunked = await serve(lambda body: b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    with pytest.raises(PeerHttpError, match="chunked"):
        await pool.post(chunked.url, b"x", connect_timeout=1, timeout=5)
    silent = await serve(lambda body: b"")
    with pytest.raises(TimeoutError):
        await pool.post(silent.url, b"x", connect_timeout=1, timeout=0.2)
    await pool.close()

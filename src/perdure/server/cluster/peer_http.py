"""The HTTP/1.1 client nodes forward with: one POST shape, kept-alive connections.

Forwarding is on the hot path of every request that lands on a node other than its
actor's: measured on this project's two-core machine, httpx spent about 1.7-2.5 ms of CPU
per forwarded call (half of it in its connection pool and protocol layers), several
times the cost of serving the call. Nodes only ever send each other one kind of request
(``POST /.perdure/forward`` with a CBOR body, answered by perdure's own endpoint with a
``content-length``), so this client speaks exactly that and nothing more: no redirects,
no chunked bodies, no proxies, no TLS. A peer behind TLS goes through httpx instead (see
:class:`~perdure.server.cluster.peers.HttpPeers`).

Idle connections are kept per peer address and dropped after :data:`IDLE_SECONDS`,
below uvicorn's keep-alive timeout (5 s), so a request is not written on a connection
the peer is about to close. A connection that fails before any byte of the answer
arrived is reported as not delivered only if it could not be opened; once a request has
been written, a failure means its outcome is unknown.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from urllib.parse import urlsplit

__all__ = ["IDLE_SECONDS", "PeerConnectError", "PeerHttpError", "PeerHttpPool"]

IDLE_SECONDS = 2.0
_MAX_HEADER = 16 * 1024
_MAX_BODY = 64 * 1024 * 1024


class PeerConnectError(Exception):
    """The connection could not be opened: the request was not delivered."""


class PeerHttpError(Exception):
    """The request was written but no complete answer came back: outcome unknown."""


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        return (
            now - self.idle_since < IDLE_SECONDS
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        self.writer.close()


class PeerHttpPool:
    """POSTs to peers over kept-alive connections (see the module docstring)."""

    def __init__(self, headers: dict[str, str], *, max_idle: int = 64) -> None:
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._max_idle = max_idle
        self._closed = False

    async def post(
        self,
        url: str,
        body: bytes,
        *,
        connect_timeout: float,
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """``(status, body)`` of ``POST url``, with ``headers`` besides the pool's own;
        raises :class:`PeerConnectError` or :class:`PeerHttpError` (or ``TimeoutError``
        once written: outcome unknown)."""
        parts = urlsplit(url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or 80
        conn = await self._connection((host, port), connect_timeout)
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"POST {parts.path or '/'} HTTP/1.1\r\nhost: {parts.netloc}\r\n{self._headers}"
            f"{extra}content-length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        try:
            conn.writer.write(head + body)
            status, answer, keep = await asyncio.wait_for(_read_answer(conn.reader), timeout)
        except TimeoutError:
            conn.close()
            raise
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            conn.close()
            raise PeerHttpError(f"{type(exc).__name__}: {exc}") from None
        if keep:
            self._release((host, port), conn)
        else:
            conn.close()
        return status, answer

    async def _connection(self, address: tuple[str, int], connect_timeout: float) -> _Connection:
        idle = self._idle.get(address)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now):
                return conn
            conn.close()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*address, limit=_MAX_HEADER), connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            raise PeerConnectError(f"{type(exc).__name__}: {exc}") from None
        return _Connection(reader, writer)

    def _release(self, address: tuple[str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(address, deque())
        if self._closed or len(idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def close(self) -> None:
        """Close every idle connection."""
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """``(status, body, keep alive)`` of one response with a ``content-length``."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    status = int(status_line[1])
    length: int | None = None
    keep = status_line[0] == "HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "connection":
            keep = value.strip().lower() != "close"
        elif name == "transfer-encoding":
            raise ValueError("a chunked answer (peers answer with a content-length)")
    if length is None or length < 0 or length > _MAX_BODY:
        raise ValueError(f"an answer of unusable length {length}")
    return status, await reader.readexactly(length), keep

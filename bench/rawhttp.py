"""A minimal HTTP/1.1 keep-alive client for load generation in benchmarks.

httpx's async client spends about a millisecond of CPU per request on this machine, so a
benchmark driven by it measures httpx. This client writes a prepared request and reads
the response on one asyncio stream connection, and nothing more.
"""

from __future__ import annotations

import asyncio

__all__ = ["RawConnection"]


class RawConnection:
    """One keep-alive connection posting JSON bodies."""

    def __init__(self, url: str) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawConnection:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()

    def request(self, path: str, body: bytes) -> bytes:
        """A prepared POST request (build once, send many times)."""
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def send(self, request: bytes) -> bytes:
        """Send a prepared request; return the body of a 200 answer (raise otherwise)."""
        status, body = await self.exchange(request)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body.decode(errors='replace')}")
        return body

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send a prepared request; return ``(status, body)``."""
        assert self._reader is not None
        assert self._writer is not None
        self._writer.write(request)
        headers = await self._reader.readuntil(b"\r\n\r\n")
        status = int(headers[9:12])
        return status, await self._reader.readexactly(_content_length(headers))


def _content_length(headers: bytes) -> int:
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise RuntimeError("no content-length in the response")

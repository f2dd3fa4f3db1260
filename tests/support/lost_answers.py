"""An HTTP transport that loses one answer after the server applied the request.

:class:`LoseAnswerAfter` lets a request reach the server and its answer come back, then
runs ``then`` (kill the server, say) and raises ``httpx.ReadError`` instead of returning
that answer: what a connection broken after the commit looks like to a client. Only the
first request whose path contains ``match`` is treated so; ``keys`` records the
``Idempotency-Key`` of every such request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

__all__ = ["LoseAnswerAfter"]


class LoseAnswerAfter(httpx.AsyncBaseTransport):
    """See the module docstring; ``then`` runs in a worker thread."""

    def __init__(self, match: str, then: Callable[[], None]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.match = match
        self.then = then
        self.armed = True
        self.keys: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if self.match not in request.url.path:
            return response
        self.keys.append(request.headers.get("idempotency-key"))
        if not self.armed:
            return response
        self.armed = False
        assert response.status_code == 200, response.text  # applied: only the answer is lost
        await asyncio.to_thread(self.then)
        raise httpx.ReadError("the connection broke before the answer", request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()

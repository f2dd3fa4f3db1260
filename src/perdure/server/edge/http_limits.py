"""The HTTP parser's limits, answered in perdure's error shape.

uvicorn's httptools protocol answers a request it cannot parse with a plain-text
``Invalid HTTP request received.`` and sets no limit of its own on the request line or
the headers. :class:`EdgeHttpProtocol` (what ``perdure serve`` runs) bounds both while
they arrive and answers every refusal with perdure's JSON error body and ``x-rivet-error``:

- a request target over :data:`MAX_URL_BYTES` → 414 ``request.uri_too_long``;
- headers over :data:`MAX_HEADER_BYTES` in total, or more than :data:`MAX_HEADERS` →
  431 ``request.headers_too_large``;
- anything the parser refuses → 400 ``request.malformed``.

The connection is closed after the answer (the rest of the request is not read).

It also runs the slow-client time limits of :mod:`.slow_clients` (408
``request.header_timeout`` and ``request.body_timeout``, the idle keep-alive close) and
counts every refusal and timeout in :class:`~perdure.server.edge.refusals.EdgeRefusals`
for ``/metrics``. :meth:`EdgeHttpProtocol.bound` gives the class ``perdure serve`` hands
uvicorn, with its limits and counter.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, Final, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from perdure.errors import RequestRefused, status_for
from perdure.server.edge.refusals import EdgeRefusals
from perdure.server.edge.slow_clients import (
    BODY,
    HEADERS,
    KEEP_ALIVE_REASON,
    WAITING,
    RequestClock,
    SlowClientLimits,
    timeout_refusal,
)
from perdure.server.edge.wire_errors import error_body, header_text

__all__ = ["MAX_HEADERS", "MAX_HEADER_BYTES", "MAX_URL_BYTES", "EdgeHttpProtocol", "RequestRefused"]

MAX_URL_BYTES: Final = 65536
"""Longest request target (path and query) accepted."""

MAX_HEADER_BYTES: Final = 65536
"""Most bytes of header names and values in one request."""

MAX_HEADERS: Final = 256
"""Most header lines in one request."""

_REASONS: Final = {
    400: b"Bad Request",
    408: b"Request Timeout",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
}


class _Refuse(Exception):
    """Raised from a parser callback; httptools turns it into a parser error."""


class EdgeHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded request lines and headers, and time
    limits on slow clients."""

    limits: ClassVar[SlowClientLimits] = SlowClientLimits()
    """The time limits (:meth:`bound` sets them)."""

    refusals: ClassVar[EdgeRefusals] = EdgeRefusals()
    """Where refusals and timeouts are counted (:meth:`bound` sets the server's)."""

    _refusal: RequestRefused | None = None
    _header_bytes = 0
    _header_count = 0
    _clock: RequestClock

    @classmethod
    def bound(cls, limits: SlowClientLimits, refusals: EdgeRefusals) -> type[EdgeHttpProtocol]:
        """A subclass with ``limits`` and ``refusals`` (uvicorn makes one protocol object
        per connection from the class it is given)."""
        attributes = {"limits": limits, "refusals": refusals}
        return cast("type[EdgeHttpProtocol]", type(cls.__name__, (cls,), attributes))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn's own idle timer; it types the seconds as an int, any number works.
        self.timeout_keep_alive = self.limits.keep_alive_timeout  # type: ignore[assignment]
        self._clock = RequestClock(self.loop, self._time_is_up)
        self._clock.start(WAITING, self.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._clock.close()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._clock.phase and (self.cycle is None or self.cycle.response_complete):
            # The first byte after an answer. (Bytes that come while an answer is made
            # wait for it: a request they begin has its own header clock.)
            self._clock.start(WAITING, self.limits.header_timeout)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._refusal = None
        self._header_bytes = 0
        self._header_count = 0
        clock = self._clock
        if clock.phase == WAITING:
            clock.phase = HEADERS  # the header clock runs from the connection's first byte
        else:  # a pipelined request right after the previous one
            clock.start(HEADERS, self.limits.header_timeout)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.parser.should_upgrade():
            self._clock.close()  # a WebSocket's protocol has limits of its own
        else:
            self._clock.start(BODY, self.limits.body_timeout)

    def on_message_complete(self) -> None:
        self._clock.stop()
        super().on_message_complete()

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self.refusals.count(KEEP_ALIVE_REASON)
        super().timeout_keep_alive_handler()

    def _time_is_up(self, phase: int) -> None:
        """A slow-client limit passed in ``phase`` (the clock is idle)."""
        if self.transport.is_closing():
            return
        if phase == BODY and self._not_reading():
            self._clock.start(BODY, self.limits.body_timeout)
            return
        error = timeout_refusal(phase, self.limits)
        self.refusals.count(error.identifier)
        if phase == WAITING or not self._answerable(phase):
            self.transport.close()  # nothing of a request came, or an answer is under way
            return
        if self.cycle is not None and phase == BODY:
            self.cycle.disconnected = True  # the application's answer, if any, is dropped
        self._write_refusal(error)

    def _not_reading(self) -> bool:
        """Whether the body is late because the server does not read it (the application
        has not taken what came, or has not asked for a ``100-continue`` body yet)."""
        cycle = self.cycle
        return self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue)

    def _answerable(self, phase: int) -> bool:
        """Whether a 408 can be written: no answer is started or due before it."""
        cycle = self.cycle
        if phase == BODY:
            return not cycle.response_started and not self.pipeline
        return cycle is None or cycle.response_complete

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > MAX_URL_BYTES:
            self._refuse(
                RequestRefused(
                    f"The request target is longer than {MAX_URL_BYTES} bytes.",
                    code="uri_too_long",
                    status=414,
                    metadata={"limit": MAX_URL_BYTES},
                )
            )
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        self._header_count += 1
        if self._header_bytes > MAX_HEADER_BYTES or self._header_count > MAX_HEADERS:
            self._refuse(
                RequestRefused(
                    f"The request headers are larger than {MAX_HEADER_BYTES} bytes "
                    f"or more than {MAX_HEADERS} lines.",
                    code="headers_too_large",
                    status=431,
                    metadata={"limit": MAX_HEADER_BYTES, "lines": MAX_HEADERS},
                )
            )
        super().on_header(name, value)

    def _refuse(self, error: RequestRefused) -> None:
        self._refusal = error
        raise _Refuse(error.message)

    def send_400_response(self, msg: str) -> None:
        """Answer a refused request in perdure's shape (uvicorn calls this on any parser
        error; ``msg`` is its own plain text, not used)."""
        error = self._refusal or RequestRefused(
            "The HTTP request could not be parsed.", code="malformed", status=400
        )
        self._refusal = None
        self.refusals.count(error.identifier)
        self._write_refusal(error)

    def _write_refusal(self, error: RequestRefused) -> None:
        """Write ``error`` as the answer, straight to the transport, and close."""
        status = status_for(error)
        body = error_body(error, "json", None)
        head = [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Bad Request")),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-rivet-error: " + header_text(error.identifier) + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()

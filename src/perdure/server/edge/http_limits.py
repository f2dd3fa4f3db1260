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
"""

from __future__ import annotations

from typing import Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from perdure.errors import RequestRefused, status_for
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
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
}


class _Refuse(Exception):
    """Raised from a parser callback; httptools turns it into a parser error."""


class EdgeHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded request lines and headers."""

    _refusal: RequestRefused | None = None
    _header_bytes = 0
    _header_count = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._refusal = None
        self._header_bytes = 0
        self._header_count = 0

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

"""Small ASGI helpers for the hot request path: read a bounded body, send a response.

The gateway routes speak raw ASGI instead of going through Starlette's ``Request`` and
``Response`` objects: a request there is decode → call → encode, and every avoided
allocation and await shows up in the round-trip latency.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from perdure.errors import InvalidRequest, MessageError
from perdure.protocol.codec import outgoing_too_long
from perdure.telemetry import Observer

__all__ = [
    "ASGIApp",
    "ClientDisconnected",
    "Headers",
    "Receive",
    "Scope",
    "Send",
    "body_too_long",
    "client_gone",
    "header_value",
    "outgoing_too_long",
    "read_body",
    "send_bytes",
    "traced",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]


class ClientDisconnected(Exception):
    """The client went away before its request body was complete."""


def header_value(scope: Scope, name: bytes) -> str | None:
    """The value of request header ``name`` (lower-case bytes), decoded as Latin-1."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def body_too_long(limit: int) -> MessageError:
    """The error for a request body (or frame) above ``limit`` bytes."""
    return MessageError(
        "Incoming message too long",  # rivetkit 2.3.19's text; the limit is in the metadata
        code="incoming_too_long",
        metadata={"limit": limit},
    )


async def traced(observer: Observer, scope: Scope, work: Awaitable[None]) -> None:
    """Await ``work`` (the request's handling) with the W3C trace context the client sent
    (``traceparent`` and ``tracestate`` headers) current, so that the actions and sends it
    starts are traced as its children. Called only when an observer traces."""
    traceparent = header_value(scope, b"traceparent")
    entered = None
    if traceparent is not None:
        entered = observer.enter_trace(traceparent, header_value(scope, b"tracestate"))
    try:
        await work
    finally:
        if entered is not None:
            entered.end(None)


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refusing (``message.incoming_too_long``) past ``limit`` bytes.

    A declared ``content-length`` above the limit is refused before anything is read, and
    a chunked body is counted while it arrives, so an oversize upload is never buffered
    whole.
    """
    declared = header_value(scope, b"content-length")
    if declared is not None:
        try:
            length = int(declared)
        except ValueError:
            raise InvalidRequest("The content-length header is not a number.") from None
        if length > limit:
            raise body_too_long(limit)
    message = await receive()
    if message["type"] != "http.request":
        raise ClientDisconnected()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise body_too_long(limit)
        return body
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise body_too_long(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_bytes(
    send: Send, status: int, body: bytes, content_type: bytes, extra: Headers | None = None
) -> None:
    """Send a complete response with ``content-type`` and ``content-length``."""
    headers: Headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def client_gone(receive: Receive) -> None:
    """Return once the client has gone away (for a response that streams until then)."""
    while (await receive())["type"] != "http.disconnect":
        pass

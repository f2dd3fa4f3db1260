"""``GET /gateway/{name-or-id}/events``: an actor's events as Server-Sent Events, for
browsers (``new EventSource(url)``; docs/events.md).

The target is given as on the other gateway routes (``rvt-method``, ``rvt-key`` … for an
actor addressed by name and key; a token as ``rvt-token``, since an ``EventSource``
sends no headers of its own). Each event is one SSE message: ``id`` its number in the
actor's event log, ``event`` its name, ``data`` its arguments as a JSON array (rivet's
JSON value tags for big integers, bytes …). A stream resumes after the ``Last-Event-ID``
header (which browsers send by themselves when they reconnect) or the ``since`` query
parameter, else it starts now. When the log no longer holds what was asked for, the
stream opens with ``event: $perdure.gap`` and ``data: {"after": n, "resumedAt": m}``.
A comment line is sent every 15 s so that proxies keep the stream open.

What waits for a reader is bounded (:data:`MAX_QUEUED_BYTES`), as a WebSocket's outbox
is: a reader that falls that far behind gets ``event: $perdure.error`` with ``data``
``{"group": "message", "code": "outgoing_queue_full", …}`` after what it had been sent,
and the stream ends (an ``EventSource`` then reconnects with ``Last-Event-ID`` and
resumes from the log, a gap announced if the log no longer holds it).

Errors before the stream starts are answered like any gateway error (400
``events.invalid_since`` for a bad ``since``/``Last-Event-ID``, 404 ``actor.not_found``
…; 429 ``request.too_many_streams`` with ``Retry-After`` past the client address's cap of
open streams, docs/edge.md). In a cluster, a stream of an actor another node owns is
relayed from that node (:mod:`perdure.server.cluster.raw_relay`); a race with a move that
the relay cannot follow is answered 503 ``events.not_local`` (retry).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from perdure.errors import ClientCapReached, MethodNotAllowed, NotLocal
from perdure.handles import CloseEvent
from perdure.protocol.values import to_json_value
from perdure.runtime import ActorDispatch, ConnectionRef, LoggedEvent, Since, parse_since
from perdure.server.cluster.raw_relay import RawRelay
from perdure.server.edge.asgi import Receive, Scope, Send, client_gone, header_value
from perdure.server.edge.client_caps import UNLIMITED, ClientLimits
from perdure.server.edge.wire_errors import actor_headers, send_error
from perdure.server.gateway.target import (
    parse_conn_params,
    parse_query,
    parse_target,
    resolve_target,
)

__all__ = ["MAX_QUEUED_BYTES", "EventStream"]

# What one stream holds for a reader that does not keep up (its socket's buffers come on
# top). Smaller than a WebSocket's outbox (32 MiB): events for a browser page are small,
# and a stalled page must not cost the server more than this.
MAX_QUEUED_BYTES = 4 * 1024 * 1024
_OVERFLOW = json.dumps(
    {
        "group": "message",
        "code": "outgoing_queue_full",
        "message": "The stream's reader fell too far behind; resume from the last event id.",
    }
)

_KEEPALIVE = 15.0
_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
]


class _StreamSink:
    """The SSE connection's transport and follower sink: SSE messages into one queue of
    at most ``limit`` bytes (see the module docstring)."""

    def __init__(self, limit: int = MAX_QUEUED_BYTES) -> None:
        self.items: asyncio.Queue[bytes | CloseEvent] = asyncio.Queue()
        self.queued = 0  # bytes in `items`
        self.limit = limit
        self.overflowed = False

    def event(self, event: LoggedEvent) -> None:
        if self.overflowed:
            return  # the stream is ending: nothing more is encoded for it
        data = json.dumps(to_json_value(event.args, "event arguments"), separators=(",", ":"))
        self._put(f"id: {event.seq}\nevent: {event.name}\ndata: {data}\n\n".encode())

    def taken(self, message: bytes) -> None:
        """``message`` left the queue for the socket."""
        self.queued -= len(message)

    def _put(self, message: bytes) -> None:
        if self.overflowed:
            return
        self.queued += len(message)
        if self.queued <= self.limit:
            self.items.put_nowait(message)
            return
        # The reader fell behind: drop what waits (the log keeps it, for a resume), say
        # why, and end the stream.
        self.overflowed = True
        while not self.items.empty():
            self.items.get_nowait()
        error = f"event: $perdure.error\ndata: {_OVERFLOW}\n\n".encode()
        self.queued = len(error)
        self.items.put_nowait(error)
        self.items.put_nowait(CloseEvent(1011, "message.outgoing_queue_full"))

    def resumed(self, start: int) -> None:
        """Nothing to send: the ids of what follows say it."""

    def gap(self, after: int, resumed_at: int) -> None:
        data = json.dumps({"after": after, "resumedAt": resumed_at})
        self._put(f"event: $perdure.gap\ndata: {data}\n\n".encode())

    def send_event(self, name: str, args: list[Any]) -> None:
        """A follower's events come through :meth:`event`; ``conn.send`` is not streamed."""

    def close(self, code: int, reason: str) -> None:
        self.items.put_nowait(CloseEvent(code, reason))


class EventStream:
    """Serves the ``events`` route of the gateway."""

    def __init__(
        self,
        dispatch: ActorDispatch,
        options: Any,
        names: set[str],
        relay: RawRelay | None = None,
        limits: ClientLimits = UNLIMITED,
    ) -> None:
        """``relay``: in a cluster, how a stream of an actor another node owns is
        relayed to that node. ``limits``: the per-client caps (open streams, creations)."""
        self.dispatch = dispatch
        self.options = options
        self.names = names
        self.relay = relay
        self.limits = limits
        self._stopping = asyncio.Event()

    def end_all(self) -> None:
        """The server is stopping: end every open stream now, relayed ones too. Their
        readers reconnect with ``Last-Event-ID`` (to another node, or to this one once it
        is back) and resume from the log; without this, an open stream, which never
        ends by itself, holds the shutdown until uvicorn's graceful timeout (30 s)."""
        self._stopping.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send, segment: str) -> None:
        try:
            held = self.limits.open_stream(scope)
        except ClientCapReached as error:  # 429 request.too_many_streams, Retry-After
            await send_error(send, error, "json")
            return
        try:
            await self._stream(scope, receive, send, segment)
        finally:
            self.limits.close_stream(held)

    async def _stream(self, scope: Scope, receive: Receive, send: Send, segment: str) -> None:
        sink = _StreamSink()
        conn: ConnectionRef | None = None
        try:
            if scope["method"] != "GET":
                raise MethodNotAllowed(scope["method"], scope["path"])
            query = parse_query(scope["query_string"])
            since = _since(scope, query)
            target = parse_target(segment, query, self.options, self.names)
            params = parse_conn_params(
                header_value(scope, b"x-rivet-conn-params"), self.options.max_conn_params_size
            )
            actor = await resolve_target(
                self.dispatch, target, creation=self.limits.creation_gate(scope)
            )
            owner = await actor.remote_owner()
            if owner is not None:
                if self.relay is None:
                    raise NotLocal("The actor lives on another node; its events stream there.")
                await self.relay.event_stream(
                    owner, scope, receive, send, actor.actor_id, stopping=self._stopping
                )
                return
            opened = await actor.connect(params, sink)
            if not isinstance(opened, ConnectionRef):
                await opened.close()
                raise NotLocal("The actor lives on another node; its events stream there.")
            conn = opened
            await conn.follow(since, sink)
        except Exception as exc:
            if conn is not None:
                await conn.close()
            await send_error(send, exc, "json")
            return
        try:
            headers = [*_HEADERS, *actor_headers(conn.identity)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await _pump(sink, receive, send, self._stopping)
        finally:
            await conn.close()


def _since(scope: Scope, query: dict[str, str]) -> Since:
    """Where the stream starts: ``Last-Event-ID``, else ``since``, else now."""
    text = header_value(scope, b"last-event-id")
    if text is None:
        text = query.get("since")
    return Since(age_ms=0) if text is None else parse_since(text.strip())


async def _pump(sink: _StreamSink, receive: Receive, send: Send, stopping: asyncio.Event) -> None:
    """Send the stream until the client goes away, the actor closes the connection or
    the server stops."""
    gone = asyncio.ensure_future(client_gone(receive))
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
        while True:
            item = asyncio.ensure_future(sink.items.get())
            done, _ = await asyncio.wait(
                {item, gone, stop}, timeout=_KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
            )
            if gone in done:
                item.cancel()
                return
            if stop in done and item not in done:
                item.cancel()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if not done:
                item.cancel()
                await send(
                    {"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True}
                )
                continue
            message = item.result()
            if isinstance(message, CloseEvent):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            sink.taken(message)
            await send({"type": "http.response.body", "body": message, "more_body": True})
    finally:
        gone.cancel()
        stop.cancel()

"""The actor gateway: ``/gateway/{name-or-id}/action/{action}``, ``/queue/{queue}``, ``/connect``,
``/events`` (Server-Sent Events, :mod:`perdure.server.gateway.sse`).

Every gateway request carries its target in the path and query (see
:mod:`perdure.server.gateway.target`). The HTTP routes decode the body in the encoding of the
``x-rivet-encoding`` header (``json`` when absent) and answer in the same encoding, with
the ``x-rivet-actor*`` headers. Everything a request carries (encoding, target, key,
input, connection parameters, body, action name and argument count) is checked before an
actor is created or woken, so a bad request stores nothing.

Like the original server, a stateless HTTP action or queue send opens a transient
connection for its duration: ``on_before_connect`` sees the ``x-rivet-conn-params``
header (so it can refuse the call), and the action sees ``c.conn``.

An action or queue send is a message like a WebSocket frame, and bounded like one, as
rivetkit bounds it: a body above ``max_incoming_message_size`` (64 KiB) is refused
before it is decoded (``message.incoming_too_long``), an answer above
``max_outgoing_message_size`` (1 MiB) is replaced by ``message.outgoing_too_long`` (the
action has run: its effects stay, as in rivetkit). ``max_http_body_size`` bounds the raw
``on_request`` bodies and the management API's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from perdure._time import send_delay
from perdure.errors import InvalidRequest, MethodNotAllowed, RouteNotFound
from perdure.protocol.codec import Encoding, content_type, decode_http, encode_http, parse_encoding
from perdure.protocol.messages import (
    HttpActionRequest,
    HttpActionResponse,
    HttpMessage,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
)
from perdure.runtime import (
    ActorRef,
    ActorRuntime,
    CallAction,
    Operation,
    SendMessage,
    check_idempotency_key,
)
from perdure.server.edge.asgi import (
    ClientDisconnected,
    Receive,
    Scope,
    Send,
    header_value,
    outgoing_too_long,
    read_body,
    send_bytes,
    traced,
)
from perdure.server.edge.client_caps import UNLIMITED, ClientLimits
from perdure.server.edge.mount import ROOT_KEY, raw_route_path
from perdure.server.edge.wire_errors import (
    actor_headers,
    send_error,
)
from perdure.server.gateway.raw_handlers import RawHandler, is_raw_route
from perdure.server.gateway.request_info import bind as bind_request
from perdure.server.gateway.sse import EventStream
from perdure.server.gateway.target import (
    Target,
    parse_conn_params,
    parse_query,
    parse_target,
    path_segment,
    resolve_target,
)
from perdure.server.gateway.websocket import ConnectHandler

__all__ = ["Gateway"]

R = TypeVar("R", HttpActionRequest, HttpQueueSendRequest)


class Gateway:
    """The raw ASGI app mounted at ``/gateway`` (HTTP and WebSocket)."""

    def __init__(self, runtime: ActorRuntime, limits: ClientLimits = UNLIMITED) -> None:
        """``limits``: the per-client caps (:mod:`perdure.server.edge.client_caps`)."""
        self.dispatch = runtime.dispatch
        self.observers = runtime.observers
        self.options = runtime.registry.options
        self.names = set(runtime.registry.actors)
        self.limits = limits
        self.connect_handler = ConnectHandler(runtime, self.names, limits)
        self.raw = RawHandler(self.dispatch, self.options, self.names, runtime.cluster, limits)
        self.events = EventStream(self.dispatch, self.options, self.names, self.raw.relay, limits)

    def end_streams(self) -> None:
        """The server is stopping: end the open event streams (:meth:`EventStream.end_all`)."""
        self.events.end_all()

    async def aclose(self) -> None:
        """Close what the gateway keeps open to the other nodes (the raw relay's)."""
        if self.raw.relay is not None:
            await self.raw.relay.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        if ROOT_KEY in scope:  # mounted in a host app: the path below perdure's prefix
            raw_path = raw_route_path(scope)
        parts = raw_path.split(b"/")
        # ["", "gateway", target, route, name?]
        if scope["type"] == "websocket":
            if len(parts) == 4 and parts[3] == b"connect" and parts[2]:
                await self.connect_handler(scope, receive, send, parts[2])
            elif is_raw_route(parts) and parts[3] == b"websocket":
                await self.raw.websocket(scope, receive, send, parts)  # on_websocket
            else:
                await send({"type": "websocket.close", "code": 1008, "reason": "route_not_found"})
            return
        if scope["type"] != "http":
            return
        route = parts[3] if len(parts) == 5 and parts[2] and parts[4] else None
        if route == b"action" or route == b"queue":
            try:
                segment, name = path_segment(parts[2]), path_segment(parts[4])
            except InvalidRequest as exc:
                await send_error(send, exc, _encoding_or_json(scope))
                return
            handler = self._action if route == b"action" else self._queue
            if self.observers.traces:  # only then is a traceparent header looked for
                await traced(self.observers, scope, handler(scope, receive, send, segment, name))
            else:
                await handler(scope, receive, send, segment, name)
            return
        if len(parts) == 4 and parts[3] == b"events" and parts[2]:
            await self._events(scope, receive, send, parts[2])  # SSE, docs/events.md
            return
        enc = _encoding_or_json(scope)
        if is_raw_route(parts) and parts[3] == b"request":
            # The official client's handle.fetch(): the actor's on_request (404 without).
            await self.raw.http(scope, receive, send, parts, enc)
            return
        await send_error(send, RouteNotFound(f"No gateway route `{scope['path']}`."), enc)

    async def _events(self, scope: Scope, receive: Receive, send: Send, raw: bytes) -> None:
        try:
            segment = path_segment(raw)
        except InvalidRequest as exc:
            await send_error(send, exc, "json")
            return
        await self.events(scope, receive, send, segment)

    # ------------------------------------------------------------ action, queue

    async def _action(
        self, scope: Scope, receive: Receive, send: Send, segment: str, action: str
    ) -> None:
        def operation(request: HttpActionRequest) -> Operation:
            return CallAction(action, request.args)

        def reply(output: Any) -> HttpMessage:
            return HttpActionResponse(output)

        await self._handle(scope, receive, send, segment, HttpActionRequest, operation, reply)

    async def _queue(
        self, scope: Scope, receive: Receive, send: Send, segment: str, queue: str
    ) -> None:
        def operation(request: HttpQueueSendRequest) -> Operation:
            timeout = None if request.timeout is None else request.timeout / 1000
            delay = None if request.delay is None else request.delay / 1000
            delay, at = send_delay(delay, request.at, wait=request.wait)
            return SendMessage(queue, request.body, request.wait, timeout, delay=delay, at=at)

        def reply(result: Any) -> HttpMessage:
            return HttpQueueSendResponse(result.status, result.response)

        await self._handle(scope, receive, send, segment, HttpQueueSendRequest, operation, reply)

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        segment: str,
        kind: type[R],
        operation: Callable[[R], Operation],
        reply: Callable[[Any], HttpMessage],
    ) -> None:
        """Validate everything, then resolve the actor and perform the request's operation
        inside a transient connection; answer in the request's encoding."""
        enc: Encoding = "json"
        actor: ActorRef | None = None
        try:
            enc = parse_encoding(header_value(scope, b"x-rivet-encoding"))
            target, params = self._prepare(scope, segment)
            body = await read_body(scope, receive, self.options.max_incoming_message_size)
            todo = operation(decode_http(body, enc, kind))
            if target.actor_id is None:
                # Refused before the actor is created or woken: a bad request stores nothing.
                todo = self.dispatch.check(target.name, todo)
            key = header_value(scope, b"idempotency-key")
            if key is not None:  # at most once per key (docs/idempotency.md)
                todo.idempotency_key = check_idempotency_key(key)
            creation = self.limits.creation_gate(scope)
            actor = await resolve_target(self.dispatch, target, creation=creation)
            bind_request(scope, actor.actor_id)  # c.request, for its hooks and the action
            output = reply(await actor.perform(todo, params=params))
            data = encode_http(output, enc, self.options.max_outgoing_message_size)
            self._check_outgoing(data)
        except ClientDisconnected:
            return
        except Exception as exc:
            await send_error(send, exc, enc, None if actor is None else actor.identity)
            return
        await send_bytes(send, 200, data, _CONTENT_TYPES[enc], actor_headers(actor.identity))

    # ----------------------------------------------------------------- helpers

    def _prepare(self, scope: Scope, segment: str) -> tuple[Target, Any]:
        if scope["method"] != "POST":
            raise MethodNotAllowed(scope["method"], scope["path"])
        query = parse_query(scope["query_string"])
        target = parse_target(segment, query, self.options, self.names)
        params = parse_conn_params(
            header_value(scope, b"x-rivet-conn-params"), self.options.max_conn_params_size
        )
        return target, params

    def _check_outgoing(self, data: bytes) -> None:
        # encode_http's bound is a lower bound of the size (it stops the encoder early);
        # the encoded answer itself is measured here.
        if len(data) > self.options.max_outgoing_message_size:
            raise outgoing_too_long(self.options.max_outgoing_message_size)


_CONTENT_TYPES: dict[str, bytes] = {
    enc: content_type(enc).encode() for enc in ("json", "cbor", "bare")
}


def _encoding_or_json(scope: Scope) -> Encoding:
    try:
        return parse_encoding(header_value(scope, b"x-rivet-encoding"))
    except InvalidRequest:
        return "json"

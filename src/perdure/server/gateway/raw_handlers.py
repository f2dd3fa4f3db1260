"""Raw handlers: ``/gateway/{target}/request/...`` and ``/gateway/{target}/websocket/...``.

The official client's ``handle.fetch(path, init)`` and ``handle.webSocket(path)`` reach
these routes (rivetkit's ``onRequest`` / ``onWebSocket``). An actor serves them with its
``on_request(c, request)`` and ``on_websocket(c, websocket)`` hooks: ``request`` is a
Starlette ``Request`` whose path is the part after ``/request`` and whose query has no
``rvt-*`` parameter; ``websocket`` is an accepted Starlette ``WebSocket``. The target
(query or direct form), the token and the connection parameters are those of every
gateway route. See docs/edge.md, "Raw handlers".
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from perdure.errors import ClientCapReached, NoRawHandler, PerdureError
from perdure.protocol.codec import Encoding
from perdure.runtime import ActorDispatch, ActorRef, ClusterMember
from perdure.server.cluster.pipe import handed_on_by_peer
from perdure.server.cluster.raw_relay import RawRelay
from perdure.server.edge.asgi import (
    ClientDisconnected,
    Message,
    Receive,
    Scope,
    Send,
    header_value,
)
from perdure.server.edge.asgi import read_body as read_limited_body
from perdure.server.edge.client_caps import UNLIMITED, ClientLimits
from perdure.server.edge.wire_errors import actor_headers, public_error, send_error
from perdure.server.gateway.request_info import bind as bind_request
from perdure.server.gateway.target import (
    Target,
    parse_conn_params,
    parse_query,
    parse_target,
    path_segment,
    resolve_target,
)
from perdure.server.gateway.websocket import CAP_CLOSE_CODE, read_subprotocols, refuse_socket

__all__ = ["RawHandler", "is_raw_route"]

_ROUTES = {b"request": "on_request", b"websocket": "on_websocket"}


def is_raw_route(parts: list[bytes]) -> bool:
    """Whether the split raw path (``["", "gateway", target, route, ...]``) is a raw route."""
    return len(parts) >= 4 and bool(parts[2]) and parts[3] in _ROUTES


class RawHandler:
    """Serves the raw routes of the gateway through the dispatch seam; in a cluster, a
    request or socket for an actor another node owns is relayed there
    (:mod:`perdure.server.cluster.raw_relay`)."""

    def __init__(
        self,
        dispatch: ActorDispatch,
        options: Any,
        names: set[str],
        cluster: ClusterMember | None = None,
        limits: ClientLimits = UNLIMITED,
    ) -> None:
        """``limits``: the per-client caps (open sockets, creations)."""
        self.limits = limits
        self.dispatch = dispatch
        self.options = options
        self.names = names
        self.cluster = cluster
        self.relay = (
            None
            if cluster is None
            else RawRelay(cluster, options.max_outgoing_message_size + 65536)
        )

    async def http(
        self, scope: Scope, receive: Receive, send: Send, parts: list[bytes], enc: Encoding
    ) -> None:
        """Answer ``/request/...`` with the actor's ``on_request`` (error bodies in
        ``enc``, the request's ``x-rivet-encoding``)."""
        actor: ActorRef | None = None
        try:
            target, params = self._target(scope, parts, b"x-rivet-conn-params")
            body = await read_limited_body(scope, receive, self.options.max_http_body_size)
            request = Request(_hook_scope(scope, parts), _replay(body))
            actor = await self._resolve(scope, target, "on_request")
            owner = await actor.remote_owner()
            if owner is not None and self.relay is not None:
                await self.relay.request(owner, scope, body, send, actor.actor_id, _rest(parts))
                return
            response = _as_response(await actor.raw("on_request", request, params=params))
        except ClientDisconnected:
            return
        except Exception as exc:
            await send_error(send, exc, enc, None if actor is None else actor.identity)
            return
        response.raw_headers.extend(actor_headers(actor.identity))
        _own_origin_guard(response)
        await response(scope, receive, send)

    async def websocket(
        self, scope: Scope, receive: Receive, send: Send, parts: list[bytes]
    ) -> None:
        """Accept the socket, then hand it to the actor's ``on_websocket``; the socket is
        closed when the hook returns. A failure closes it with the error's
        ``group.code`` as the reason (1008 for a refused request, 1011 otherwise; past
        the client's cap of open sockets, ``request.too_many_connections`` and 1013)."""
        try:
            held = self.limits.open_websocket(scope)
        except ClientCapReached as error:
            await refuse_socket(receive, send, scope, error, code=CAP_CLOSE_CODE)
            return
        try:
            await self._websocket(scope, receive, send, parts)
        finally:
            self.limits.close_websocket(held)

    async def _websocket(
        self, scope: Scope, receive: Receive, send: Send, parts: list[bytes]
    ) -> None:
        offered_rivet, _, params_text = read_subprotocols(scope.get("subprotocols") or ())
        socket = WebSocket(_hook_scope(scope, parts), receive, send)
        try:
            await socket.accept(subprotocol="rivet" if offered_rivet else None)
        except (OSError, RuntimeError):
            return  # the client went away before the socket opened
        try:
            if params_text is None:
                params_text = header_value(scope, b"x-rivet-conn-params")
            target, _ = self._target(scope, parts, None)
            params = parse_conn_params(params_text, self.options.max_conn_params_size)
            actor = await self._resolve(scope, target, "on_websocket")
            owner = await actor.remote_owner()
            if owner is not None and self.relay is not None:
                rest = _rest(parts)
                await self.relay.websocket(owner, scope, receive, send, actor.actor_id, rest)
                return
            # The client closing the socket is the handler's normal end.
            ends = (WebSocketDisconnect,)
            await actor.raw("on_websocket", socket, params=params, ends_normally=ends)
        except Exception as exc:
            error = public_error(exc)
            code = 1008 if error.status < 500 else 1011
            if isinstance(error, ClientCapReached):  # the creation rate: try again later
                code = CAP_CLOSE_CODE
            await _close(socket, code, error.identifier[:120])
            return
        await _close(socket, 1000, "")

    def _target(
        self, scope: Scope, parts: list[bytes], params_header: bytes | None
    ) -> tuple[Target, Any]:
        target = parse_target(
            path_segment(parts[2]), parse_query(scope["query_string"]), self.options, self.names
        )
        if params_header is None:
            return target, None
        params_text = header_value(scope, params_header)
        return target, parse_conn_params(params_text, self.options.max_conn_params_size)

    async def _resolve(self, scope: Scope, target: Target, hook: str) -> ActorRef:
        if target.actor_id is None and self.dispatch.definition(target.name).hook(hook) is None:
            # Refused before the actor is created or woken: nothing is stored.
            raise NoRawHandler(target.name, hook)
        # The mark of a peer means something on a cluster node only (its secret: read
        # now, the node agrees on it as it starts).
        cluster = self.cluster
        forwarded = cluster is not None and handed_on_by_peer(scope, cluster.secret)
        creation = self.limits.creation_gate(scope)
        actor = await resolve_target(self.dispatch, target, forwarded=forwarded, creation=creation)
        bind_request(scope, actor.actor_id)  # c.request, for its hooks and the handler
        return actor


def _hook_scope(scope: Scope, parts: list[bytes]) -> Scope:
    """The scope the hook sees: the path after ``/request`` (or ``/websocket``), the query
    without the gateway's ``rvt-*`` parameters."""
    rest = _rest(parts).encode("latin-1")
    query = [
        (name, value)
        for name, value in parse_qsl(scope["query_string"].decode("latin-1"), True)
        if not name.startswith("rvt-")
    ]
    return {
        **scope,
        "path": unquote(rest.decode("utf-8", "replace")),
        "raw_path": rest,
        "root_path": "",
        "query_string": urlencode(query).encode("latin-1"),
    }


def _rest(parts: list[bytes]) -> str:
    """The path after ``/request`` (or ``/websocket``), still percent-encoded."""
    return (b"/" + b"/".join(parts[4:])).decode("latin-1")


def _replay(body: bytes) -> Receive:
    """A ``receive`` that gives the already read (size-checked) body, then a disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


# A raw answer shares its origin with the inspector and the admin API: by default it runs
# in a sandbox of an origin of its own (scripts still run, but cannot act as the
# server's origin; the admin surface refuses `Origin: null`), and its content type is
# taken as given. An actor that sets these headers itself decides.
_GUARD_HEADERS = {
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox allow-scripts allow-forms allow-popups allow-downloads",
}


def _own_origin_guard(response: Response) -> None:
    """Add :data:`_GUARD_HEADERS` that the actor's answer does not set itself."""
    for name, value in _GUARD_HEADERS.items():
        if name not in response.headers:
            response.headers[name] = value


def _as_response(value: Any) -> Response:
    """The hook's answer: a Starlette ``Response``, or bytes, text, JSON data, ``None``."""
    if isinstance(value, Response):
        return value
    if value is None:
        return Response(status_code=204)
    if isinstance(value, bytes | bytearray | memoryview):
        return Response(bytes(value), media_type="application/octet-stream")
    if isinstance(value, str):
        return PlainTextResponse(value)
    if isinstance(value, dict | list):
        return JSONResponse(value)
    raise PerdureError(
        f"on_request returned {type(value).__name__}; return a Response, bytes, str, "
        "a dict or list (JSON), or None.",
        code="invalid_raw_response",
    )


async def _close(socket: WebSocket, code: int, reason: str) -> None:
    if socket.application_state == WebSocketState.DISCONNECTED:
        return
    # Already closed by the client (uvicorn says so with a disconnect).
    with contextlib.suppress(OSError, RuntimeError, WebSocketDisconnect):
        await socket.close(code, reason)

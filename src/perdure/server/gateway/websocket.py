"""``/gateway/{name-or-id}/connect``: a stateful connection (actions and events).

Handshake: subprotocols ``rivet`` (echoed back, as the original server does, because some
WebSocket stacks insist on a matching protocol), ``rivet_encoding.<json|cbor|bare>``
(``json`` when absent) and ``rivet_conn_params.<url-encoded JSON>`` (or the
``x-rivet-conn-params`` header). Then:

1. the target is resolved through the runtime's dispatch seam, and the actor admits the
   connection (hooks
   ``on_before_connect``, ``create_conn_state``, ``on_connect``); the server sends
   ``Init{actorId, connectionId}`` before anything else;
2. ``ActionRequest`` frames run concurrently, each answered by ``ActionResponse`` or by an
   ``Error`` carrying its ``actionId``; ``SubscriptionRequest`` frames add or remove an
   event name in ``conn.subscriptions``. A subscription to an event the actor does not
   declare is refused with an ``Error`` without ``actionId`` (``actor.unknown_event``,
   metadata ``{"event": name}``); the connection stays open;
3. a connection-level failure sends ``Error`` (no ``actionId``) and closes with code 1011
   and reason ``"{group}.{code}"``: ``actor.invalid_request`` for an undecodable frame,
   ``message.incoming_too_long`` for a frame over the limit, or the error that refused the
   connection. An unknown encoding closes with 1003 ``actor.unsupported_websocket_encoding``.
   A client address past its caps (docs/edge.md, "Per-client caps") gets ``Error``
   ``request.too_many_connections`` or ``request.creation_rate_limited`` and close 1013
   (try again later);
4. when the client goes away, closing the connection runs ``on_disconnect``; when
   the actor sleeps or is destroyed, the runtime closes the socket through the transport.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote, unquote

from websockets.asyncio.client import ClientConnection

from perdure.errors import ClientCapReached, InvalidRequest, PeerUnreachable, PerdureError
from perdure.protocol.codec import Encoding, decode_to_server, is_binary, parse_encoding
from perdure.protocol.messages import ActionRequest, Init, SubscriptionRequest
from perdure.registry import RegistryOptions
from perdure.runtime import (
    ActorRuntime,
    ConnectionRef,
    RemoteConnection,
    Since,
    Transport,
    inherit_request,
)
from perdure.server.cluster.pipe import handed_on_by_peer, open_upstream, pipe_to_owner
from perdure.server.edge.asgi import Receive, Scope, Send, body_too_long, header_value, traced
from perdure.server.edge.client_caps import UNLIMITED, ClientLimits
from perdure.server.edge.wire_errors import public_error
from perdure.server.gateway.event_stream import NUMBERED, DirectMessages, SocketEvents, resume_from
from perdure.server.gateway.outbox import EventFrameCache, SocketTransport
from perdure.server.gateway.request_info import bind as bind_request
from perdure.server.gateway.target import (
    parse_conn_params,
    parse_query,
    parse_target,
    path_segment,
    resolve_target,
)

__all__ = [
    "CAP_CLOSE_CODE",
    "ConnectHandler",
    "DirectConnect",
    "read_subprotocols",
    "refuse_socket",
]

# A connection served here, or opened on another node (an in-process race: see pipe).
AnyConnection = ConnectionRef | RemoteConnection
_ENCODING_PREFIX = "rivet_encoding."
_PARAMS_PREFIX = "rivet_conn_params."
_ACTOR_PREFIX = "rivet_actor."
_DEFAULT_IN_FLIGHT = RegistryOptions().max_actions_in_flight_per_connection
# How long a socket whose actor's owner does not answer waits for another node to take
# the actor over (a dead node's lease lapses one TTL after its last heartbeat: 5 s by
# default), trying again every _PIPE_PAUSE s.
_PIPE_PATIENCE = 15.0
_PIPE_PAUSE = 0.1
CAP_CLOSE_CODE = 1013
"""The close code of a socket refused by a per-client cap: "try again later" (the cap is
passing, unlike a policy refusal's 1008)."""
_log = logging.getLogger("perdure.server")


class ConnectHandler:
    """Serves ``/connect`` sockets for one runtime."""

    def __init__(
        self, runtime: ActorRuntime, names: set[str], limits: ClientLimits = UNLIMITED
    ) -> None:
        """``limits``: the per-client caps (open sockets, creations)."""
        self.limits = limits
        self.dispatch = runtime.dispatch
        self.observers = runtime.observers
        self.cluster = runtime.cluster
        self.options = runtime.registry.options
        # What a pipe to another node accepts from it: any frame that node may send.
        self.max_frame = self.options.max_outgoing_message_size + 65536
        self.names = names
        self.cache = EventFrameCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send, segment: bytes) -> None:
        try:
            held = self.limits.open_websocket(scope)
        except ClientCapReached as error:  # request.too_many_connections
            await refuse_socket(receive, send, scope, error, code=CAP_CLOSE_CODE)
            return
        try:
            if self.observers.traces:  # the opening request's traceparent: every action's parent
                await traced(self.observers, scope, self._connect(scope, receive, send, segment))
            else:
                await self._connect(scope, receive, send, segment)
        finally:
            self.limits.close_websocket(held)

    async def _connect(self, scope: Scope, receive: Receive, send: Send, segment: bytes) -> None:
        accepted = await _accept(scope, receive, send)
        if accepted is None:
            return
        enc_name, params_text = accepted
        try:
            enc = parse_encoding(enc_name)
        except InvalidRequest:
            reason = "actor.unsupported_websocket_encoding"
            await send({"type": "websocket.close", "code": 1003, "reason": reason})
            return
        transport = SocketTransport(send, enc, self.options.max_outgoing_message_size, self.cache)
        try:
            if params_text is None:
                params_text = header_value(scope, b"x-rivet-conn-params")
            since = resume_from(scope.get("subprotocols") or ())
            # A resuming socket numbers its events; what the actor sends to this one
            # connection (conn.send) is marked as not numbered (event_stream.py).
            channel = transport if since is None else DirectMessages(transport)
            admitted = await self._admit(scope, segment, params_text, transport, channel)
        except Exception as exc:
            _refuse_connection(transport, public_error(exc))
            await transport.run()
            return
        if isinstance(admitted, ClientConnection):
            # The actor lives on another node of the cluster: pipe the frames there.
            await pipe_to_owner(receive, send, admitted)
            return
        if since is not None:  # ahead of what on_connect sent, right after Init
            transport.put_first(NUMBERED)
        transport.put_first(Init(admitted.actor_id, admitted.id))
        await self._serve(receive, admitted, transport, since)

    async def _admit(
        self,
        scope: Scope,
        segment: bytes,
        params_text: str | None,
        transport: SocketTransport,
        channel: Transport,
    ) -> ConnectionRef | RemoteConnection | ClientConnection:
        target = parse_target(
            path_segment(segment), parse_query(scope["query_string"]), self.options, self.names
        )
        params = parse_conn_params(params_text, self.options.max_conn_params_size)
        forwarded = self._forwarded(scope)
        creation = self.limits.creation_gate(scope)
        actor = await resolve_target(self.dispatch, target, forwarded=forwarded, creation=creation)
        deadline = asyncio.get_running_loop().time() + _PIPE_PATIENCE
        while True:
            owner = await actor.remote_owner()
            if owner is None:
                # c.request for the connect hooks, every action and on_disconnect (its
                # tasks inherit it: _action).
                bind_request(scope, actor.actor_id)
                return await actor.connect(params, channel)
            cluster = self.cluster
            assert cluster is not None  # only a cluster node has remote owners
            try:
                return await open_upstream(
                    owner,
                    actor.actor_id,
                    list(scope.get("subprotocols") or ()),
                    params_text,
                    origin_node=cluster.node_id,
                    secret=cluster.secret,
                    max_size=self.max_frame,
                )
            except PeerUnreachable:
                # The owner died (or is cut off): look again, avoiding it, until its
                # lease lapses and this node takes the actor over, rather than answer an
                # error the official client takes as final (it stops reconnecting).
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                actor.owner_unreachable(owner)
                await asyncio.sleep(_PIPE_PAUSE)

    def _forwarded(self, scope: Scope) -> bool:
        """True for a connection another node piped here; refused without the secret.
        The mark means something on a cluster node only."""
        cluster = self.cluster
        return cluster is not None and handed_on_by_peer(scope, cluster.secret)

    async def _serve(
        self,
        receive: Receive,
        conn: AnyConnection,
        transport: SocketTransport,
        since: Since | None = None,
    ) -> None:
        writer = asyncio.create_task(transport.run(), name=f"ws writer {conn.id}")
        actions: set[asyncio.Task[None]] = set()
        try:
            # A perdure client's backlog of events (docs/events.md) before any action.
            if since is not None and isinstance(conn, ConnectionRef):
                try:
                    await conn.follow(since, SocketEvents(transport))
                except Exception as exc:
                    transport.fail(public_error(exc))
                    return
            await self._receive_loop(receive, conn, transport, actions)
        finally:
            await conn.close()
            if actions:
                # Actions already started run to completion (their answers are dropped if
                # the socket is gone); cancelling them midway would tear their effects.
                await asyncio.wait(actions)
            transport.close(1000, "")
            try:
                # Flush what is queued; a client that stopped reading gets 5 s.
                await asyncio.wait_for(writer, 5)
            except TimeoutError:
                _log.debug("connection %s: gave up flushing to a stalled client", conn.id)

    async def _receive_loop(
        self,
        receive: Receive,
        conn: AnyConnection,
        transport: SocketTransport,
        actions: set[asyncio.Task[None]],
    ) -> None:
        limit = self.options.max_incoming_message_size
        enc = transport.enc
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return
            data: bytes | str | None = message.get("bytes")
            if data is None:
                data = message.get("text")
                if data is None:
                    continue
            if _size(data) > limit:
                transport.fail(body_too_long(limit))
                return
            request = _decode(data, enc)
            if isinstance(request, PerdureError):
                transport.fail(request)
                return
            if isinstance(request, ActionRequest):
                capacity = self.options.max_actions_in_flight_per_connection
                if len(actions) >= capacity:
                    transport.push_error(_overloaded(capacity), request.id)
                    continue
                task = asyncio.create_task(self._action(conn, transport, request))
                actions.add(task)
                task.add_done_callback(actions.discard)
            else:
                await _subscribe(
                    conn, request, transport, self.options.max_subscriptions_per_connection
                )

    @staticmethod
    async def _action(
        conn: AnyConnection, transport: SocketTransport, request: ActionRequest
    ) -> None:
        inherit_request()
        try:
            output = await conn.call(request.name, request.args)
        except Exception as exc:
            transport.push_error(public_error(exc), request.id)
            return
        transport.push_response(request.id, output)


class DirectConnect:
    """``/connect`` outside ``/gateway``: the actor id comes in the ``rivet_actor.<id>``
    subprotocol (or the ``x-rivet-actor`` header), next to ``rivet_target.actor``.

    The official client connects this way to an actor it addresses by id (``getForId``,
    or a handle from ``create``) when it skips the gateway's ready wait
    (``skipReadyWait``). Everything else is the gateway's ``/connect``; without an actor
    id the connection is refused with ``Error`` and close 1011 ``actor.invalid_request``.
    """

    def __init__(self, handler: ConnectHandler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        actor_id = header_value(scope, b"x-rivet-actor") or ""
        for protocol in scope.get("subprotocols") or ():
            if protocol.startswith(_ACTOR_PREFIX):
                actor_id = protocol[len(_ACTOR_PREFIX) :]
        await self.handler(scope, receive, send, quote(actor_id, safe="").encode())


async def _accept(
    scope: Scope, receive: Receive, send: Send
) -> tuple[str | None, str | None] | None:
    """Accept the socket: ``(encoding name, conn params JSON)`` it asked for, or ``None``
    when the client went away first."""
    if (await receive())["type"] != "websocket.connect":
        return None
    offered_rivet, enc_name, params_text = read_subprotocols(scope.get("subprotocols") or ())
    await send({"type": "websocket.accept", "subprotocol": "rivet" if offered_rivet else None})
    return enc_name, params_text


def read_subprotocols(offered: Any) -> tuple[bool, str | None, str | None]:
    """``(offers "rivet", encoding name, conn params JSON)`` from the offered subprotocols."""
    rivet = False
    encoding: str | None = None
    params: str | None = None
    for protocol in offered:
        if protocol == "rivet":
            rivet = True
        elif protocol.startswith(_ENCODING_PREFIX):
            encoding = protocol[len(_ENCODING_PREFIX) :]
        elif protocol.startswith(_PARAMS_PREFIX):
            try:
                params = unquote(protocol[len(_PARAMS_PREFIX) :], errors="strict")
            except UnicodeDecodeError:
                params = "\x00"  # not JSON: refused with a clear error by parse_conn_params
    return rivet, encoding, params


def _size(data: bytes | str) -> int:
    if isinstance(data, bytes):
        return len(data)
    return len(data) if data.isascii() else len(data.encode("utf-8", "surrogatepass"))


def _decode(data: bytes | str, enc: Encoding) -> ActionRequest | SubscriptionRequest | PerdureError:
    """The decoded frame, or the error saying why it is not a valid message in ``enc``
    (the decoders' errors name the field or the path inside a value at fault)."""
    if isinstance(data, str) and is_binary(enc):
        return InvalidRequest(f"The {enc} encoding needs binary frames, got a text frame.")
    try:
        return decode_to_server(data, enc)
    except PerdureError as exc:
        return exc
    except Exception:
        _log.debug("undecodable frame", exc_info=True)
        return InvalidRequest("The message could not be decoded.")


async def _subscribe(
    conn: AnyConnection, request: SubscriptionRequest, transport: SocketTransport, limit: int
) -> None:
    """Apply a subscription change. Refused with an error frame, the socket staying open
    and nothing applied: an event the actor does not declare (``actor.unknown_event``),
    one its ``can_subscribe`` hook refuses (``auth.forbidden``), one past the
    connection's limit (``actor.too_many_subscriptions``)."""
    name = request.event_name
    if not request.subscribe:
        conn.unsubscribe(name)
        return
    if conn.is_subscribed(name):
        return
    try:
        if conn.subscription_count >= limit:
            raise InvalidRequest(
                f"A connection may subscribe to at most {limit} events.",
                code="too_many_subscriptions",
                metadata={"event": name, "limit": limit},
            )
        if isinstance(conn, ConnectionRef):  # a connection opened elsewhere is checked there
            conn.check_subscription(name)
            await conn.authorize_subscription(name)
    except Exception as exc:
        transport.push_error(public_error(exc), None)
        return
    conn.subscribe(name)


def _refuse_connection(transport: SocketTransport, error: PerdureError) -> None:
    """Refuse the connection with ``error``: close 1011, or :data:`CAP_CLOSE_CODE` for a
    per-client cap (the client's creation rate)."""
    if isinstance(error, ClientCapReached):
        transport.push_error(error, None)
        transport.close(CAP_CLOSE_CODE, error.identifier)
    else:
        transport.fail(error)


def _overloaded(capacity: int = _DEFAULT_IN_FLIGHT) -> PerdureError:
    """Too many actions in flight on one connection: rivetkit 2.3.19's ``actor.overloaded``
    (rivetkit-core's ``ActorLifecycle::Overloaded``) in its format and metadata."""
    channel, operation = "conn_actions", "dispatch_action"
    return PerdureError(
        f"Actor channel '{channel}' is overloaded while attempting to {operation} "
        f"(capacity {capacity}).",
        code="overloaded",
        metadata={"channel": channel, "capacity": capacity, "operation": operation},
    )


async def refuse_socket(
    receive: Receive, send: Send, scope: Scope, error: PerdureError, *, code: int = 1008
) -> None:
    """Refuse a WebSocket before any route serves it (no token, a disallowed origin):
    accept it, send ``Error`` in the encoding it asked for, close with ``code`` (1008,
    policy; :data:`CAP_CLOSE_CODE` for a per-client cap) and the error's ``group.code``."""
    accepted = await _accept(scope, receive, send)
    if accepted is None:
        return
    enc_name = accepted[0]
    try:
        enc = parse_encoding(enc_name)
    except InvalidRequest:
        enc = "json"
    transport = SocketTransport(send, enc, 65536, EventFrameCache())
    transport.push_error(error, None)
    transport.close(code, error.identifier)
    await transport.run()

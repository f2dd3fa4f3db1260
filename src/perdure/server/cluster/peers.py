"""Forwarding between the nodes of a cluster: the client side and the endpoint.

A node forwards an operation on an actor owned by another node with one HTTP request,
``POST {owner}/.perdure/forward``, over connections kept alive between the nodes. The
body and the answer are CBOR (values keep their types: bytes, big integers, dates),
independent of the encoding the original client used::

    request  {"actor": id, "op": "call"|"send"|"$status"|"$destroy"|"$sleep",
              "action", "args" | "queue", "body", "wait", "timeout", "validated",
              "params" (absent: no connection)}
    answer   {"result": value, "identity": [actor id, key, generation] | null}
          or {"error": {"group", "code", "message", "metadata", "status"}}

The endpoint serves the operation only if its node owns the actor (or can take it now);
otherwise it answers ``actor.not_owner`` and the sender looks again. Every request must
carry the cluster's secret (``x-perdure-cluster-secret``: the one the nodes agreed on
with their store, :mod:`perdure.runtime.cluster.secret`); one without it, or with
another, is refused (403 ``actor.forbidden``) before anything is decoded, and so is
every request to a node that has not agreed on a secret yet. The route adds no access
of its own: what a node forwards (an admin repair, ``$destroy``, a call) it has let in
through its own route's rule (the admin surface's, the client token), so the secret is
what keeps anyone else from calling it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import cbor2
import httpx

from perdure._version import __version__
from perdure.client.aio import AsyncActorConnection, AsyncClient
from perdure.errors import (
    ActorUnavailable,
    InvalidRequest,
    NotOwner,
    PeerForbidden,
    PeerUnreachable,
    PerdureError,
    RemoteError,
    status_for,
)
from perdure.handles import LONGEST_WAIT, WORKFLOW_RESULT_ACTION
from perdure.runtime import (
    NO_CONNECTION,
    ActorIdentity,
    ActorRef,
    ActorRuntime,
    Administer,
    CallAction,
    ClusterMember,
    Forwardable,
    PeerNode,
    QueueSendResult,
    RemoteConnection,
    SendMessage,
    Transport,
)
from perdure.server.cluster.peer_http import PeerConnectError, PeerHttpError, PeerHttpPool
from perdure.server.cluster.pipe import SECRET_HEADER, presents_secret
from perdure.server.edge.asgi import Receive, Scope, Send, read_body, send_bytes
from perdure.server.edge.wire_errors import public_error
from perdure.telemetry import NO_OBSERVER, Observer

__all__ = ["FORWARD_PATH", "ForwardEndpoint", "HttpPeers"]

FORWARD_PATH = "/.perdure/forward"
_CBOR = b"application/cbor"
_log = logging.getLogger("perdure.cluster")
# Longer than any action may run (the actor's own timeout answers first).
_READ_TIMEOUT = 120.0
_MAX_FORWARD_BODY = 64 * 1024 * 1024
_CONNECT = 2.0  # seconds to open a TCP connection to a peer
_OPEN_CONNECTION = 10.0  # seconds for an actor connection on a peer to open (its hooks run)


def _held_for(operation: object) -> float:
    """How long the owner may hold its answer on purpose: a waiting send's timeout, a
    workflow result's wait (docs/workflow-control.md)."""
    if isinstance(operation, SendMessage) and operation.wait and operation.timeout:
        return operation.timeout
    if isinstance(operation, CallAction) and operation.action == WORKFLOW_RESULT_ACTION:
        wait = operation.args[0] if operation.args else None
        return float(wait) if isinstance(wait, int | float) else LONGEST_WAIT
    return 0.0


class HttpPeers:
    """The :class:`~perdure.runtime.cluster.member.PeerLink` of a cluster node over HTTP.

    Plain ``http://`` peers are reached with perdure's lean keep-alive client
    (:mod:`perdure.server.cluster.peer_http`, several times cheaper per call than httpx);
    ``https://`` peers, and the in-process transports tests mount, with httpx. Each
    request carries the node's cluster secret, read when it is sent (the node agrees
    on it with its store as it starts).
    """

    def __init__(
        self,
        cluster: ClusterMember,
        *,
        mounts: dict[str, httpx.AsyncBaseTransport] | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        """``mounts``: transports by URL prefix instead of the network (tests serve
        several nodes' apps in one process this way). ``observer``: the runtime's
        observers, asked for the trace context a forwarded request carries along."""
        self._observer = observer
        self._cluster = cluster
        headers = {"content-type": "application/cbor", "x-perdure-node": cluster.node_id}
        self._mounted = bool(mounts)
        self._pool = PeerHttpPool(headers)
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(_READ_TIMEOUT, connect=_CONNECT, pool=5.0),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            trust_env=False,
            mounts=mounts,
        )

    async def perform(
        self, node: PeerNode, actor_id: str, operation: Forwardable, params: Any
    ) -> tuple[Any, ActorIdentity]:
        request = _request(actor_id, operation, params)
        if self._observer.traces:
            # The trace goes along, so that the owner's spans join the caller's trace.
            carrier = self._observer.trace_carrier()
            if carrier is not None:
                request["traceparent"] = carrier
        body = cbor2.dumps(request)
        timeout = _READ_TIMEOUT + _held_for(operation)
        url = node.address.rstrip("/") + FORWARD_PATH
        try:
            status, content = await self._post(url, body, timeout)
        except PeerConnectError as exc:
            # Not delivered: the caller may try again, there or elsewhere.
            raise PeerUnreachable(
                f"Node `{node.node_id}` ({node.address}) is unreachable: {exc}."
            ) from None
        except (PeerHttpError, TimeoutError) as exc:
            # Delivered, perhaps served: the outcome is unknown, so it is not retried.
            raise ActorUnavailable(
                f"Node `{node.node_id}` did not answer the forwarded request "
                f"({type(exc).__name__}); it may or may not have been applied.",
                code="owner_no_answer",
            ) from None
        return _answer(status, content, operation)

    async def _post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        secret = self._cluster.secret
        headers = {SECRET_HEADER: secret} if secret else {}
        if not self._mounted and url.startswith("http://"):
            return await self._pool.post(
                url, body, connect_timeout=_CONNECT, timeout=timeout, headers=headers
            )
        try:
            response = await self._client.post(
                url,
                content=body,
                headers=headers,
                timeout=httpx.Timeout(timeout, connect=_CONNECT, pool=5.0),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise PeerConnectError(type(exc).__name__) from None
        except httpx.HTTPError as exc:
            raise PeerHttpError(type(exc).__name__) from None
        return response.status_code, response.content

    async def connect(
        self, node: PeerNode, actor_id: str, params: Any, transport: Transport
    ) -> RemoteConnection:
        """The network client's connection to the actor on ``node`` (by id, in CBOR),
        adapted to the runtime's connection surface."""
        client = AsyncClient(node.address, encoding="cbor", max_reconnect_delay=1.0)
        connection = client.actor("actor").get_for_id(actor_id).connect(params)
        try:
            await connection.wait_open(timeout=_OPEN_CONNECTION)
        except BaseException:
            await connection.dispose()
            await client.close()
            raise
        return PeerConnection(client, connection, actor_id, params, transport)

    async def close(self) -> None:
        await self._pool.close()
        await self._client.aclose()


class PeerConnection:
    """A connection to an actor on another node, for an in-process caller: the
    network client's connection, with the surface of a local ``ConnectionRef``. Events
    it receives go to the caller's transport; it reconnects by itself (through the node
    it was opened on, which pipes to the actor's node if the actor moves)."""

    def __init__(
        self,
        client: AsyncClient,
        connection: AsyncActorConnection,
        actor_id: str,
        params: Any,
        transport: Transport,
    ) -> None:
        self._client = client
        self._connection = connection
        self._actor_id = actor_id
        self._params = params
        self._transport = transport
        self._offs: dict[str, Callable[[], None]] = {}

    @property
    def id(self) -> str:
        return self._connection.connection_id or ""

    @property
    def actor_id(self) -> str:
        return self._actor_id

    @property
    def params(self) -> Any:
        return self._params

    @property
    def state(self) -> Any:
        """A remote connection's state lives on the actor's node: not visible here."""
        return None

    @property
    def subscriptions(self) -> frozenset[str]:
        return frozenset(self._offs)

    @property
    def subscription_count(self) -> int:
        return len(self._offs)

    def subscribe(self, event: str) -> None:
        if event not in self._offs:
            send = self._transport.send_event
            self._offs[event] = self._connection.on(event, lambda *args: send(event, list(args)))

    def unsubscribe(self, event: str) -> None:
        off = self._offs.pop(event, None)
        if off is not None:
            off()

    def is_subscribed(self, event: str) -> bool:
        return event in self._offs

    async def call(self, action: str, args: list[Any]) -> Any:
        return await self._connection.action(action, *args)

    async def close(self) -> None:
        self._offs.clear()
        try:
            await self._connection.dispose()
        finally:
            await self._client.close()


def _request(actor_id: str, operation: Forwardable, params: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"actor": actor_id}
    if isinstance(operation, CallAction):
        request.update(op="call", action=operation.action, args=operation.args)
    elif isinstance(operation, SendMessage):
        request.update(
            op="send",
            queue=operation.queue,
            body=operation.body,
            wait=operation.wait,
            timeout=operation.timeout,
            validated=operation.validated,
        )
        if operation.delay is not None or operation.at is not None:
            request.update(delay=operation.delay, at=operation.at)
    elif isinstance(operation, Administer):
        request.update(op="admin", kind=operation.kind, argument=operation.argument)
        if operation.values is not None:
            request["values"] = operation.values
    else:
        request["op"] = operation
    if params is not NO_CONNECTION:
        request["params"] = params
    if isinstance(operation, CallAction | SendMessage) and operation.idempotency_key is not None:
        request["key"] = operation.idempotency_key
    return request


def _answer(status: int, content: bytes, operation: Forwardable) -> tuple[Any, ActorIdentity]:
    try:
        answer = cbor2.loads(content)
    except Exception:
        raise ActorUnavailable(
            f"A peer answered the forwarded request with status {status} and an unreadable body.",
            code="owner_no_answer",
        ) from None
    error = answer.get("error") if isinstance(answer, dict) else None
    if error is not None:
        raise _remote_error(error)
    identity = answer.get("identity")
    who = None if identity is None else ActorIdentity(identity[0], tuple(identity[1]), identity[2])
    result = answer.get("result")
    if isinstance(operation, SendMessage):
        result = QueueSendResult(result["status"], result.get("response"))
    return result, who  # type: ignore[return-value]


def _remote_error(error: dict[str, Any]) -> PerdureError:
    if error.get("group") == "actor" and error.get("code") == NotOwner.default_code:
        metadata = error.get("metadata") or {}
        return NotOwner(str(metadata.get("actor_id", "")), metadata.get("owner_node"))
    return RemoteError(error)


class ForwardEndpoint:
    """``POST /.perdure/forward``: serve an operation another node forwarded here, if it
    carries the cluster's secret (always required: see the module docstring)."""

    def __init__(self, runtime: ActorRuntime, cluster: ClusterMember) -> None:
        self.dispatch = runtime.dispatch
        self.observer = runtime.observers
        self.cluster = cluster

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if not presents_secret(scope, self.cluster.secret):
            forbidden = PeerForbidden()
            await _reply(send, 403, {"error": _error_fields(forbidden, forbidden.status)})
            return
        ref: ActorRef | None = None
        try:
            if scope["method"] != "POST":
                raise InvalidRequest("Use POST.")
            request = _decode_request(await read_body(scope, receive, _MAX_FORWARD_BODY))
            ref = self.dispatch.ref(request["actor"], forwarded=True)
            result = await self._serve_traced(ref, request)
        except Exception as exc:
            error = public_error(exc)
            await _reply(send, 200, {"error": _error_fields(error, status_for(error))})
            return
        identity = ref.identity
        who = None
        if identity is not None:
            who = [identity.actor_id, list(identity.key), identity.generation]
        await _reply(send, 200, {"result": result, "identity": who})

    async def _serve_traced(self, ref: ActorRef, request: dict[str, Any]) -> Any:
        """Serve ``request`` inside the trace context the forwarding node sent, if any."""
        carrier = request.get("traceparent")
        if not self.observer.traces or not isinstance(carrier, str):
            return await _serve(ref, request)
        entered = self.observer.enter_trace(carrier, None)
        try:
            return await _serve(ref, request)
        finally:
            if entered is not None:
                entered.end(None)


def _decode_request(body: bytes) -> dict[str, Any]:
    """The forwarded request, or ``actor.invalid_request`` (nothing is performed)."""
    try:
        request = cbor2.loads(body)
    except Exception:
        raise InvalidRequest("The forwarded request is not valid CBOR.") from None
    if not isinstance(request, dict) or not isinstance(request.get("actor"), str):
        raise InvalidRequest("The forwarded request names no actor.")
    return request


async def _serve(ref: ActorRef, request: dict[str, Any]) -> Any:
    op = request.get("op")
    params = request.get("params", NO_CONNECTION)
    if op == "call":
        action = CallAction(request["action"], list(request["args"]), request.get("key"))
        return await ref.perform(action, params=params)
    if op == "send":
        message = SendMessage(
            request["queue"],
            request.get("body"),
            bool(request.get("wait")),
            request.get("timeout"),
            bool(request.get("validated")),
            delay=request.get("delay"),
            at=request.get("at"),
        )
        message.idempotency_key = request.get("key")
        result: QueueSendResult = await ref.perform(message, params=params)
        return result.to_dict()
    if op == "admin":
        kind = request.get("kind")
        if kind not in ("retry", "replay", "fork", "unschedule", "requeue", "drop"):
            raise InvalidRequest(f"Unknown forwarded admin operation `{kind}`.")
        return await ref.administer(
            Administer(kind, request.get("argument"), request.get("values"))
        )
    if op == "$status":
        return await ref.workflow_status()
    if op == "$destroy":
        await ref.destroy()
        return None
    if op == "$sleep":
        await ref.sleep()
        return None
    raise InvalidRequest(f"Unknown forwarded operation `{op}`.")


def _error_fields(error: PerdureError, status: int) -> dict[str, Any]:
    return {
        "group": error.group,
        "code": error.code,
        "message": error.message,
        "metadata": error.metadata,
        "status": status,
    }


async def _reply(send: Send, status: int, answer: dict[str, Any]) -> None:
    headers = [(b"x-perdure-version", __version__.encode())]
    await send_bytes(send, status, cbor2.dumps(answer), _CBOR, headers)

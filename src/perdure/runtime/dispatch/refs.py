"""Refs: one actor, or one open connection to it, as a request's holder sees them.

A :class:`ActorRef` names an actor by id and finds its instance at each request (waking
it, or forwarding the request to the node that owns it in a cluster); a
:class:`ConnectionRef` wraps one open connection. Nothing outside the runtime holds a
live instance.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from perdure.errors import ActorNotFound, ActorUnavailable, InvalidRequest, PerdureError
from perdure.runtime.actor.contexts import check_access
from perdure.runtime.actor.operations import (
    DESTROY,
    NO_CHANNEL,
    NO_CONNECTION,
    STATUS,
    Administer,
    CallAction,
    Forwardable,
    Operation,
    SendMessage,
    perform_on,
)
from perdure.runtime.actor.raw_handlers import serve_raw
from perdure.runtime.cluster.member import PeerNode

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.connections import Connection, Transport
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.cluster.member import RemoteConnection
    from perdure.runtime.dispatch.port import DispatchHost
    from perdure.runtime.events.log import EventSink, Since
    from perdure.runtime.kernel.core import ActorIdentity
    from perdure.runtime.queues.actor_queue import QueueSendResult

__all__ = ["ActorRef", "ConnectionRef", "check_subscription"]

T = TypeVar("T")


class ActorRef:
    """One actor, by id. Each request finds (or wakes) its live instance.

    ``identity`` is set once a request has reached the actor: the id, key and generation
    of the instance that served it, for response headers and error bodies.

    In a cluster (``runtime.placement``), an actor awake on another node is reached by
    forwarding the operation to that node (:mod:`perdure.runtime.dispatch.placement`).
    """

    __slots__ = ("_forwarded", "_refind", "_runtime", "actor_id", "identity")

    def __init__(
        self,
        runtime: DispatchHost,
        actor_id: str,
        forwarded: bool = False,
        *,
        refind: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """``refind``: for a ref whose id came from the runtime's memory of keys, looks
        the key up afresh. Its actor may have been destroyed since (by another node,
        say): if the first request finds no actor, it asks for the key's actor now (a
        getOrCreate creates it). Once a request has found the actor, the ref names
        that actor only (a destroyed actor's ref then answers ``actor.not_found``)."""
        self._runtime = runtime
        self.actor_id = actor_id
        self.identity: ActorIdentity | None = None
        self._forwarded = forwarded
        self._refind = refind

    async def _route(
        self, operation: Forwardable, params: Any = NO_CONNECTION
    ) -> tuple[ActorInstance | None, Any]:
        """``(instance, None)`` to serve here, or ``(None, result)`` from the node that
        owns the actor (looking the key up again, once, if the actor is gone)."""
        return await self._again_if_gone(lambda: self._route_once(operation, params))

    async def _again_if_gone(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``; once more, for the key's actor now, if the actor was not found
        and the ref was resolved by key (see ``refind``)."""
        refind = self._refind
        if refind is None:
            return await attempt()
        try:
            result = await attempt()
        except PerdureError as exc:
            self._refind = None
            if not _not_found(exc):
                raise
            self.actor_id = await refind()
            return await attempt()
        self._refind = None  # found: from now on the ref names this actor, as any other
        return result

    async def _route_once(
        self, operation: Forwardable, params: Any
    ) -> tuple[ActorInstance | None, Any]:
        instance = self._runtime.live_instance(self.actor_id)
        if instance is None:
            placement = self._runtime.placement
            if placement is None:
                instance = await self._runtime.instance(self.actor_id)
            else:
                instance, result, identity = await placement.perform(
                    self.actor_id, operation, params, forwarded=self._forwarded
                )
                if instance is None:
                    self.identity = identity
                    return None, result
        self.identity = instance.identity
        return instance, None

    async def _instance(self) -> ActorInstance:
        instance = await self._runtime.running_instance(self.actor_id)
        self.identity = instance.identity
        return instance

    async def perform(self, operation: Operation, *, params: Any = NO_CONNECTION) -> Any:
        """Perform an operation: an action's output, or a :class:`QueueSendResult`.

        With ``params`` (a stateless request from a client: an HTTP action or queue send)
        the operation runs inside a short-lived connection, as the original server does:
        ``on_before_connect`` sees the params and can refuse it, and an action sees
        ``c.conn``. Without, it runs with no connection (in-process calls, schedules).
        """
        instance, result = await self._route(operation, params)
        if instance is None:
            return result
        try:
            return await perform_on(instance, operation, params)
        except ActorNotFound:
            if self._runtime.placement is None or self._runtime.live_instance(self.actor_id):
                raise
            # In a cluster, a commit refused by the fence means another node took the
            # actor meanwhile (this instance is gone): nothing was applied, so the
            # operation goes to wherever the actor is now, once.
            instance, result = await self._route(operation, params)
            if instance is None:
                return result
            return await perform_on(instance, operation, params)

    async def call(self, action: str, args: list[Any], *, params: Any = NO_CONNECTION) -> Any:
        """Call an action; return its output once its state changes are durable."""
        return await self.perform(CallAction(action, args), params=params)

    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: bool = False,
        timeout: float | None = None,
        params: Any = NO_CONNECTION,
        delay: float | None = None,
        at: int | None = None,
    ) -> QueueSendResult:
        """Send a durable queue message (returns once it is durable and, with ``wait``,
        completed or timed out). ``delay`` seconds or ``at`` (epoch ms): delayed."""
        message = SendMessage(queue, body, wait, timeout, delay=delay, at=at)
        result: QueueSendResult = await self.perform(message, params=params)
        return result

    async def connect(self, params: Any, transport: Transport) -> ConnectionRef | RemoteConnection:
        """Open a connection (``on_before_connect``, ``create_conn_state``,
        ``on_connect``); events reach the client through ``transport``. In a cluster,
        a connection to an actor on another node is opened there (for an in-process
        caller; the server pipes a client's socket instead, see ``remote_owner``)."""
        return await self._again_if_gone(lambda: self._connect(params, transport))

    async def _connect(self, params: Any, transport: Transport) -> ConnectionRef | RemoteConnection:
        placement = self._runtime.placement
        if placement is not None and self._runtime.live_instance(self.actor_id) is None:
            return await placement.connect(self.actor_id, params, transport)
        instance = await self._instance()
        trusted = None if placement is None else placement.trusts
        return ConnectionRef(instance, await instance.connect(params, transport), trusted)

    async def workflow_status(self) -> dict[str, Any]:
        """``{status, error, output}`` of the actor's workflow (waking it)."""
        instance, result = await self._route(STATUS)
        if instance is None:
            status: dict[str, Any] = result
            return status
        return await instance.current_workflow_status()

    async def administer(self, operation: Administer) -> Any:
        """Repair or fork the actor's workflow, cancel one of its schedules or requeue or drop a
        dead letter (waking it): the workflow's status after a repair, the message after
        a requeue, ``None`` otherwise."""
        instance, result = await self._route(operation)
        if instance is None:
            return result
        from perdure.runtime.actor.maintenance import administer

        return await administer(instance, operation)

    async def destroy(self) -> None:
        """Destroy the actor (``on_destroy`` runs, its data is deleted) and wait."""
        instance, _ = await self._route(DESTROY)
        if instance is not None:
            await self._runtime.destroy_actor(self.actor_id)

    async def sleep(self) -> None:
        """Put the actor to sleep now if it is awake, and wait until it is asleep."""
        placement = self._runtime.placement
        if placement is not None and not self._runtime.is_live(self.actor_id):
            if not self._forwarded:
                await placement.sleep_elsewhere(self.actor_id)
            return
        await self._runtime.sleep_actor(self.actor_id)

    async def remote_owner(self) -> PeerNode | None:
        """The node to pipe a connection to when the actor lives on another node of the
        cluster; ``None`` when it is served here (woken if nobody owns it)."""
        placement = self._runtime.placement
        if placement is None or self._runtime.live_instance(self.actor_id) is not None:
            return None
        target = await self._again_if_gone(
            lambda: placement.locate(self.actor_id, forwarded=self._forwarded)
        )
        return target if isinstance(target, PeerNode) else None

    def owner_unreachable(self, node: PeerNode) -> None:
        """The server could not open the connection :meth:`remote_owner` named on
        ``node``: the next :meth:`remote_owner` looks again, avoiding that node."""
        placement = self._runtime.placement
        if placement is not None:
            placement.unreachable(self.actor_id, node.node_id)

    async def raw(
        self,
        hook: str,
        argument: Any,
        *,
        params: Any = NO_CONNECTION,
        ends_normally: tuple[type[BaseException], ...] = (),
    ) -> Any:
        """Serve a raw request or socket (``on_request``/``on_websocket``): the hook is
        called with an action context and ``argument`` (the request or the socket),
        inside a transient connection when ``params`` is given, and what it returns is
        returned. The actor stays awake while it runs, and its state changes are durable
        before this returns (as for an action); ``ends_normally`` is what ends the hook
        as a return would (see :func:`serve_raw`).

        Node-local: the operations path cannot carry a raw exchange (its body and
        frames are the application's own), so the server relays those for an actor
        another node owns to that node (:mod:`perdure.server.cluster.raw_relay`) before they
        get here; reached anyway, this refuses with ``actor.raw_not_local``.
        """
        if await self.remote_owner() is not None:
            raise InvalidRequest(
                "Raw requests and sockets are served only by the node that owns the actor; "
                "it is awake on another node.",
                code="raw_not_local",
            )
        channel = None if params is NO_CONNECTION else (params, NO_CHANNEL)
        return await serve_raw(await self._instance(), hook, argument, channel, ends_normally)

    def __repr__(self) -> str:
        return f"ActorRef({self.actor_id!r})"


class ConnectionRef:
    """One open connection to an actor, as its holder (a socket, a local client) sees it.

    ``trusted(actor_id)`` (on a cluster node) says whether the node still trusts its lease
    on the actor: an action called over the connection is refused when it does not.
    """

    __slots__ = ("_conn", "_instance", "_trusted", "identity")

    def __init__(
        self,
        instance: ActorInstance,
        conn: Connection,
        trusted: Callable[[str], bool] | None = None,
    ) -> None:
        self._instance = instance
        self._conn = conn
        self._trusted = trusted
        self.identity = instance.identity

    @property
    def id(self) -> str:
        """The connection id (sent to the client in ``Init``)."""
        return self._conn.id

    @property
    def actor_id(self) -> str:
        """The id of the connected actor."""
        return self._instance.actor_id

    @property
    def params(self) -> Any:
        """The parameters the client connected with."""
        return self._conn.params

    @property
    def state(self) -> Any:
        """The connection's state (``create_conn_state``), as the actor sees it."""
        return self._conn.state

    @property
    def subscriptions(self) -> frozenset[str]:
        """The event names this connection receives."""
        return frozenset(self._conn.subscriptions)

    def subscribe(self, event: str) -> None:
        """Receive events named ``event``."""
        self._conn.subscriptions.add(event)

    def check_subscription(self, event: str) -> None:
        """Refuse an event the actor does not declare (``actor.unknown_event``)."""
        check_subscription(self._instance.definition, event)

    async def authorize_subscription(self, event: str) -> None:
        """Ask the actor's ``can_subscribe`` hook (``auth.forbidden`` when it refuses)."""
        await check_access(self._instance, self._conn, "can_subscribe", event)

    def unsubscribe(self, event: str) -> None:
        """Stop receiving events named ``event``."""
        self._conn.subscriptions.discard(event)

    async def follow(self, since: Since, sink: EventSink) -> None:
        """Resume the actor's events from ``since`` into ``sink``: each once, in order,
        numbered; a gap first when the log no longer holds it (docs/events.md)."""
        await self._instance.events.follow(self._conn, since, sink)

    def is_subscribed(self, event: str) -> bool:
        """True when the connection receives events named ``event``."""
        return event in self._conn.subscriptions

    @property
    def subscription_count(self) -> int:
        """How many event names the connection receives."""
        return len(self._conn.subscriptions)

    async def call(self, action: str, args: list[Any]) -> Any:
        """Call an action over this connection (the action sees it as ``c.conn``).

        A request on a socket reaches the instance without the placement's look-up, so
        the lease is checked here: a node resumed after a pause past its lease (or cut
        off from the store) may read a queued request before its watchdog has dropped
        the actor, and another node may own it by then. Answering from this instance's
        memory could be stale (a read commits nothing for the fence to refuse), so the
        call is refused, and the check gives the actor up, which closes the connection
        (the client reconnects, to the new owner)."""
        trusted = self._trusted
        if trusted is not None and not trusted(self._instance.actor_id):
            raise ActorUnavailable(
                f"This node no longer holds actor `{self._instance.actor_id}`; reconnect.",
                metadata={"actor_id": self._instance.actor_id},
            )
        return await self._instance.call_action(action, args, self._conn)

    async def close(self) -> None:
        """Forget the connection and run ``on_disconnect`` (once, however often called)."""
        await self._instance.disconnect(self._conn)


def _not_found(error: PerdureError) -> bool:
    """``actor.not_found``, raised here or answered by another node."""
    return error.group == "actor" and error.code == "not_found"


def check_subscription(definition: ActorDefinition, event: str) -> None:
    """Refuse listening to ``event`` when the actor declares its events and not this one:
    such a listener could never be called (a broadcast of it fails), so a typo in an
    event name is an error at once rather than silence. An actor that declares no
    events may broadcast any name, so any subscription is accepted."""
    if definition.events is None or event in definition.events:
        return
    declared = ", ".join(f"`{name}`" for name in sorted(definition.events)) or "none"
    raise InvalidRequest(
        f"Actor `{definition.name}` declares no event `{event}` (declared: {declared}).",
        code="unknown_event",
        metadata={"event": event},
    )

"""The one way into an actor: resolve an address, then act on the actor through a ref.

Every request that comes from outside an actor reaches it here: the HTTP gateway and
WebSocket connections (``perdure.server``), the in-process client (``runtime.client()``
and ``c.client()``), schedule fires and the management API. The sequence is always the
same:

1. :meth:`ActorDispatch.check` refuses a bad operation against the actor's definition
   before anything is created (unknown action, wrong argument count, unknown queue,
   invalid message body) — the definition owns those rules, the dispatch only asks;
2. :meth:`ActorDispatch.resolve` turns an :class:`ActorAddress` (an id, or a name and key
   with ``get``/``getOrCreate``/``create``) into an :class:`ActorRef`;
3. the ref performs the operation (:meth:`ActorRef.call`, :meth:`ActorRef.send`,
   :meth:`ActorRef.connect`, :meth:`ActorRef.destroy` …), waking the actor if it sleeps.

Nothing outside ``perdure.runtime`` holds a live ``ActorInstance``: a ref names an actor
by id and finds its instance at each request, and a :class:`ConnectionRef` wraps one
open connection. That is what lets a later layer forward a request to the node that
owns the actor, or observe every request in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from perdure.errors import ActorNotFound, InvalidRequest, NoRawHandler
from perdure.keys import Key, normalize_key
from perdure.runtime.actor.connections import Connection, Transport
from perdure.runtime.actor.contexts import check_access
from perdure.runtime.actor.raw_handlers import serve_raw
from perdure.runtime.cluster.member import PeerNode, RemoteConnection
from perdure.runtime.kernel.core import ActorIdentity
from perdure.runtime.queues.actor_queue import QueueSendResult

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.events.log import EventSink, Since
    from perdure.runtime.host.actor_runtime import ActorRuntime
    from perdure.store.base import ActorRecord

__all__ = [
    "DESTROY",
    "NO_CONNECTION",
    "SLEEP",
    "STATUS",
    "ActorAddress",
    "ActorDispatch",
    "ActorIdentity",
    "ActorRef",
    "ActorSummary",
    "Administer",
    "CallAction",
    "ConnectionRef",
    "Forwardable",
    "NoRawHandler",
    "Operation",
    "ResolveMethod",
    "SendMessage",
    "check_subscription",
]

ResolveMethod = Literal["get", "getOrCreate", "create"]


_T = TypeVar("_T")


class _NoConnection:
    """Marks a request made without a connection (in-process calls, schedule fires)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_CONNECTION"


NO_CONNECTION: Any = _NoConnection()


@dataclass(frozen=True, slots=True)
class ActorAddress:
    """Which actor a request is for: ``actor_id``, or ``name`` and ``key`` resolved by
    ``method`` (``input`` is given to an actor that the request creates)."""

    actor_id: str | None = None
    name: str = ""
    key: Key = ()
    method: ResolveMethod = "get"
    input: Any = None

    @classmethod
    def by_id(cls, actor_id: str) -> ActorAddress:
        """The actor with this id."""
        return cls(actor_id=actor_id)


# Operations are built for every request: plain slotted dataclasses, because a frozen one
# pays object.__setattr__ per field. Treat them as immutable all the same.
@dataclass(slots=True)
class CallAction:
    """Call action ``action`` with positional ``args``."""

    action: str
    args: list[Any]


@dataclass(slots=True)
class SendMessage:
    """Send ``body`` to queue ``queue``; with ``wait``, wait (up to ``timeout`` seconds)
    for the receiver to complete it. ``validated``: the body has been checked already."""

    queue: str
    body: Any
    wait: bool = False
    timeout: float | None = None
    validated: bool = False


Operation = CallAction | SendMessage


@dataclass(frozen=True, slots=True)
class Administer:
    """An operator's operation on a live actor (the admin API): ``retry`` or ``replay``
    (from ``argument``, a history location) its workflow, ``unschedule`` (the schedule id
    ``argument``), or ``requeue``/``drop`` a dead letter (the message id ``argument``).
    See :mod:`perdure.runtime.actor.operator`."""

    kind: Literal["retry", "replay", "unschedule", "requeue", "drop"]
    argument: str | None = None


# What a ref routes to the actor's node: an operation, or a named one (below).
Forwardable = Operation | Administer | str

# The operations a node forwards besides actions and messages (see ActorRef).
STATUS = "$status"
DESTROY = "$destroy"
SLEEP = "$sleep"


@dataclass(frozen=True, slots=True)
class ActorSummary:
    """A stored actor as the management API shows it."""

    actor_id: str
    name: str
    key: Key
    created_at: int

    @classmethod
    def of(cls, record: ActorRecord) -> ActorSummary:
        """The summary of a stored record."""
        return cls(record.actor_id, record.name, record.key, record.created_at)


class ActorDispatch:
    """The runtime's entry point for requests (``runtime.dispatch``)."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: ActorRuntime) -> None:
        self._runtime = runtime

    # ------------------------------------------------------------ before an actor

    def definition(self, name: str) -> ActorDefinition:
        """The definition of actor ``name``; ``actor.unknown_name`` if not registered."""
        return self._runtime.definition(name)

    def check_subscription(self, name: str, event: str) -> None:
        """Refuse listening to an event that actor ``name`` does not declare
        (``actor.unknown_event``): see :func:`check_subscription`."""
        check_subscription(self.definition(name), event)

    def check(self, name: str, operation: Operation) -> Operation:
        """Refuse ``operation`` if actor ``name`` cannot accept it, before any actor is
        created or woken. Returns the operation to perform: a message comes back with
        its body as the queue's schema coerced it, marked validated, so that the body
        is validated once."""
        definition = self.definition(name)
        if isinstance(operation, CallAction):
            if not definition.is_status_action(operation.action):
                definition.find_action(operation.action, len(operation.args))
            return operation
        body = definition.validate_message(operation.queue, operation.body)
        return SendMessage(operation.queue, body, operation.wait, operation.timeout, True)

    async def resolve(self, address: ActorAddress) -> ActorRef:
        """The ref of the actor ``address`` names (creating it for getOrCreate/create)."""
        if address.actor_id is not None:
            return ActorRef(self._runtime, address.actor_id)
        actor_id = await self._runtime.resolve(
            address.name, address.key, address.method, address.input
        )
        return ActorRef(self._runtime, actor_id)

    async def perform_in(self, instance: ActorInstance, operation: Operation) -> Any:
        """Perform an operation that an actor starts on itself (a schedule fire): the
        same path as a ref's, pinned to that instance, so that a fire racing a stop
        fails with the instance instead of waking a newer one."""
        return await _run(instance, operation, None)

    def ref(self, actor_id: str, *, forwarded: bool = False) -> ActorRef:
        """The ref of the actor with this id (not checked until it is used).

        ``forwarded``: the request was forwarded here by another node of the cluster,
        which found this node owning the actor; it is served here or refused with
        ``actor.not_owner``, never forwarded again.
        """
        return ActorRef(self._runtime, actor_id, forwarded)

    # ------------------------------------------------------------------ directory

    async def find(self, name: str, key: str | Sequence[str] | None) -> ActorSummary | None:
        """The stored actor with this name and key, or ``None``."""
        record = await self._runtime.store.find_actor(name, normalize_key(key))
        return None if record is None else ActorSummary.of(record)

    async def get(self, actor_id: str) -> ActorSummary | None:
        """The actor with this id, or ``None``."""
        record = await self._runtime.store.get_actor(actor_id)
        return None if record is None else ActorSummary.of(record)

    async def list(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorSummary]:
        """Actors ordered by id, optionally of one name, after a given id."""
        records = await self._runtime.store.list_actors(name=name, after=after, limit=limit)
        return [ActorSummary.of(record) for record in records]

    async def count(self, name: str | None = None) -> int:
        """How many actors are stored (of one name, if given), awake or asleep."""
        return await self._runtime.store.count_actors(name=name)

    def awake(self) -> dict[str, int]:
        """How many actors of each name are awake in this process."""
        counts: dict[str, int] = {}
        for instance in self._runtime.live_instances():
            counts[instance.name] = counts.get(instance.name, 0) + 1
        return counts

    async def get_or_create(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> tuple[ActorSummary, bool]:
        """``(actor, created)``: the actor with this name and key, created if new."""
        actor_id, created = await self._runtime.get_or_create_actor(name, key, input)
        return await self._summary(actor_id), created

    async def create(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> ActorSummary:
        """Create a new actor; ``actor.duplicate_key`` if the key exists."""
        return await self._summary(await self._runtime.create_actor(name, key, input))

    async def _summary(self, actor_id: str) -> ActorSummary:
        summary = await self.get(actor_id)
        if summary is None:
            raise ActorNotFound()
        return summary


class ActorRef:
    """One actor, by id. Each request finds (or wakes) its live instance.

    ``identity`` is set once a request has reached the actor: the id, key and generation
    of the instance that served it, for response headers and error bodies.

    In a cluster (``runtime.placement``), an actor awake on another node is reached by
    forwarding the operation to that node (:mod:`perdure.runtime.cluster.placement`).
    """

    __slots__ = ("_forwarded", "_runtime", "actor_id", "identity")

    def __init__(self, runtime: ActorRuntime, actor_id: str, forwarded: bool = False) -> None:
        self._runtime = runtime
        self.actor_id = actor_id
        self.identity: ActorIdentity | None = None
        self._forwarded = forwarded

    async def _route(
        self, operation: Forwardable, params: Any = NO_CONNECTION
    ) -> tuple[ActorInstance | None, Any]:
        """``(instance, None)`` to serve here, or ``(None, result)`` from the node that
        owns the actor."""
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
            return await _run_with(instance, operation, params)
        except ActorNotFound:
            if self._runtime.placement is None or self._runtime.live_instance(self.actor_id):
                raise
            # In a cluster, a commit refused by the fence means another node took the
            # actor meanwhile (this instance is gone): nothing was applied, so the
            # operation goes to wherever the actor is now, once.
            instance, result = await self._route(operation, params)
            if instance is None:
                return result
            return await _run_with(instance, operation, params)

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
    ) -> QueueSendResult:
        """Send a durable queue message (returns once it is durable and, with ``wait``,
        completed or timed out)."""
        result: QueueSendResult = await self.perform(
            SendMessage(queue, body, wait, timeout), params=params
        )
        return result

    async def connect(self, params: Any, transport: Transport) -> ConnectionRef | RemoteConnection:
        """Open a connection (``on_before_connect``, ``create_conn_state``,
        ``on_connect``); events reach the client through ``transport``. In a cluster,
        a connection to an actor on another node is opened there (for an in-process
        caller; the server pipes a client's socket instead, see ``remote_owner``)."""
        placement = self._runtime.placement
        if placement is not None and self._runtime.live_instance(self.actor_id) is None:
            return await placement.connect(self.actor_id, params, transport)
        instance = await self._instance()
        return ConnectionRef(instance, await instance.connect(params, transport))

    async def workflow_status(self) -> dict[str, Any]:
        """``{status, error, output}`` of the actor's workflow (waking it)."""
        instance, result = await self._route(STATUS)
        if instance is None:
            status: dict[str, Any] = result
            return status
        return await instance.current_workflow_status()

    async def administer(self, operation: Administer) -> Any:
        """Repair the actor's workflow, cancel one of its schedules or requeue or drop a
        dead letter (waking it): the workflow's status after a repair, the message after
        a requeue, ``None`` otherwise."""
        instance, result = await self._route(operation)
        if instance is None:
            return result
        from perdure.runtime.actor.operator import administer

        return await administer(instance, operation.kind, operation.argument)

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
        target = await placement.locate(self.actor_id, forwarded=self._forwarded)
        return target if isinstance(target, PeerNode) else None

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
        channel = None if params is NO_CONNECTION else (params, _NO_CHANNEL)
        return await serve_raw(await self._instance(), hook, argument, channel, ends_normally)

    def __repr__(self) -> str:
        return f"ActorRef({self.actor_id!r})"


class ConnectionRef:
    """One open connection to an actor, as its holder (a socket, a local client) sees it."""

    __slots__ = ("_conn", "_instance", "identity")

    def __init__(self, instance: ActorInstance, conn: Connection) -> None:
        self._instance = instance
        self._conn = conn
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
        """Call an action over this connection (the action sees it as ``c.conn``)."""
        return await self._instance.call_action(action, args, self._conn)

    async def close(self) -> None:
        """Forget the connection and run ``on_disconnect`` (once, however often called)."""
        await self._instance.disconnect(self._conn)


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


class _NoChannel:
    """The transport of a stateless request: it has no channel for events."""

    __slots__ = ()

    def send_event(self, name: str, args: list[Any]) -> None:
        """Events sent to a stateless caller's transient connection are dropped."""

    def close(self, code: int, reason: str) -> None:
        """Nothing to close: the response ends the request."""


_NO_CHANNEL = _NoChannel()


async def _run_with(instance: ActorInstance, operation: Operation, params: Any) -> Any:
    """Run ``operation`` on ``instance``, inside a transient connection if ``params``."""
    if params is NO_CONNECTION:
        return await _run(instance, operation, None)
    conn = await instance.connect(params, _NO_CHANNEL)
    try:
        return await _run(instance, operation, conn)
    finally:
        await instance.disconnect(conn)


async def _run(instance: ActorInstance, operation: Operation, conn: Connection | None) -> Any:
    if isinstance(operation, CallAction):
        return await instance.call_action(operation.action, operation.args, conn)
    if conn is not None:  # a client's send (in-process sends are the actor's own business)
        await check_access(instance, conn, "can_publish", operation.queue)
    return await _send(instance, operation)


async def _send(instance: ActorInstance, message: SendMessage) -> QueueSendResult:
    queue = instance.queue
    if queue is None:
        instance.definition.require_queues()  # raises queue.not_configured
        raise AssertionError("an actor with queues has a queue while awake")
    instance.enter()  # a waiting send keeps the actor awake until it is answered
    try:
        return await queue.send(
            message.queue,
            message.body,
            wait=message.wait,
            timeout=message.timeout,
            validated=message.validated,
        )
    finally:
        instance.leave()

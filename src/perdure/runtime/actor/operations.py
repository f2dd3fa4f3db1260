"""The operations a request asks of an actor, and how one is run on a live instance.

Every request that reaches an actor (an HTTP action, a queue send, a schedule fire, an
operator's repair) is one of these plain values. The dispatch
(:mod:`perdure.runtime.dispatch`) routes it to the instance that serves the actor, here or
on another node (which is why they are plain data: a node forwards them), and
:func:`perform_on` runs it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from perdure.keys import Key
from perdure.runtime.actor.contexts import check_access

if TYPE_CHECKING:
    from perdure.runtime.actor.connections import Connection
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.queues.actor_queue import QueueSendResult

__all__ = [
    "DESTROY",
    "NO_CHANNEL",
    "NO_CONNECTION",
    "SLEEP",
    "STATUS",
    "ActorAddress",
    "Administer",
    "CallAction",
    "Forwardable",
    "Operation",
    "ResolveMethod",
    "SendMessage",
    "perform_on",
]

ResolveMethod = Literal["get", "getOrCreate", "create"]


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
    See :mod:`perdure.runtime.actor.maintenance`."""

    kind: Literal["retry", "replay", "unschedule", "requeue", "drop"]
    argument: str | None = None


# What a ref routes to the actor's node: an operation, or a named one (below).
Forwardable = Operation | Administer | str

# The operations a node forwards besides actions and messages (see ActorRef).
STATUS = "$status"
DESTROY = "$destroy"
SLEEP = "$sleep"


class _NoChannel:
    """The transport of a stateless request (:data:`NO_CHANNEL`): it has no channel for
    events."""

    __slots__ = ()

    def send_event(self, name: str, args: list[Any]) -> None:
        """Events sent to a stateless caller's transient connection are dropped."""

    def close(self, code: int, reason: str) -> None:
        """Nothing to close: the response ends the request."""


NO_CHANNEL = _NoChannel()


async def perform_on(instance: ActorInstance, operation: Operation, params: Any) -> Any:
    """Run ``operation`` on ``instance``, inside a transient connection if ``params`` is
    not :data:`NO_CONNECTION` (a stateless request from a client: ``on_before_connect``
    sees the params, an action sees ``c.conn``)."""
    if params is NO_CONNECTION:
        return await _run(instance, operation, None)
    conn = await instance.connect(params, NO_CHANNEL)
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

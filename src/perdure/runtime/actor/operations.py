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

from perdure.handles import WORKFLOW_RESULT_ACTION
from perdure.keys import Key
from perdure.runtime.actor.contexts import check_access
from perdure.runtime.kernel.idempotency import Once, check_key, fingerprint, replay

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
    """Call action ``action`` with positional ``args``; ``idempotency_key``: at most
    once per key (docs/idempotency.md)."""

    action: str
    args: list[Any]
    idempotency_key: str | None = None


@dataclass(slots=True)
class SendMessage:
    """Send ``body`` to queue ``queue``; with ``wait``, wait (up to ``timeout`` seconds)
    for the receiver to complete it. ``validated``: the body has been checked already.
    ``delay`` (seconds) or ``at`` (epoch ms): a delayed send, hidden until due."""

    queue: str
    body: Any
    wait: bool = False
    timeout: float | None = None
    validated: bool = False
    delay: float | None = None
    at: int | None = None
    idempotency_key: str | None = None  # at most once per key (docs/idempotency.md)


Operation = CallAction | SendMessage


@dataclass(frozen=True, slots=True)
class Administer:
    """An operator's operation on a live actor (the admin API): ``retry`` or ``replay``
    (from ``argument``, a history location) its workflow, ``fork`` it from ``argument``
    (``values``: the new run's ``input`` and ``message``, each if given), ``unschedule``
    (the schedule id ``argument``), or ``requeue``/``drop`` a dead letter (the message id
    ``argument``). See :mod:`perdure.runtime.actor.maintenance`."""

    kind: Literal["retry", "replay", "fork", "unschedule", "requeue", "drop"]
    argument: str | None = None
    values: dict[str, Any] | None = None


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
    if _waits_long(instance, operation):
        # Admitted (the connect hooks ran); the wait then holds no connection, which
        # would keep the actor awake for as long as it lasts.
        await instance.disconnect(conn)
        return await _run(instance, operation, None)
    try:
        return await _run(instance, operation, conn)
    finally:
        await instance.disconnect(conn)


def _waits_long(instance: ActorInstance, operation: Operation) -> bool:
    """A wait for the workflow's result (docs/workflow-control.md)."""
    return (
        isinstance(operation, CallAction)
        and operation.action == WORKFLOW_RESULT_ACTION
        and instance.definition.is_workflow_action(operation.action)
    )


async def _run(instance: ActorInstance, operation: Operation, conn: Connection | None) -> Any:
    if operation.idempotency_key is not None:
        return await _run_once(instance, operation, operation.idempotency_key, conn)
    if isinstance(operation, CallAction):
        return await instance.call_action(operation.action, operation.args, conn)
    if conn is not None:  # a client's send (in-process sends are the actor's own business)
        await check_access(instance, conn, "can_publish", operation.queue)
    return await _send(instance, operation)


async def _run_once(
    instance: ActorInstance, operation: Operation, key: str, conn: Connection | None
) -> Any:
    """Run a keyed operation at most once per key (docs/idempotency.md)."""
    keys = instance.core.idempotency
    check_key(key)
    # ``run`` and ``replayed`` return the coroutine to await, not awaiting it themselves:
    # one coroutine fewer on the path of every keyed request.
    if isinstance(operation, CallAction):
        name, args = operation.action, operation.args
        return await keys.perform(
            key,
            fingerprint("call", name, args),
            lambda once: instance.call_action(name, args, conn, once),
            _replay,
        )
    if conn is not None:
        await check_access(instance, conn, "can_publish", operation.queue)
    message = operation
    return await keys.perform(
        key,
        # What a retried send must repeat (its idempotency key aside).
        fingerprint("send", message.queue, message.body, message.wait, message.delay, message.at),
        lambda once: _send(instance, message, once),
        lambda kept: _resend(instance, message, kept),
    )


async def _replay(kept: dict[str, Any]) -> Any:
    """The kept answer of a keyed action call."""
    return replay(kept)


def _send_status(message: SendMessage) -> str:
    """What a keyed send that does not wait answers: ``queued`` when it is delayed."""
    return "completed" if message.delay is None and message.at is None else "queued"


async def _resend(instance: ActorInstance, message: SendMessage, kept: dict[str, Any]) -> Any:
    """The answer of a keyed send applied before: wait again for its completion."""
    from perdure.runtime.queues.actor_queue import QueueSendResult

    if "m" not in kept:
        return replay(kept)
    if not message.wait or instance.queue is None:
        return QueueSendResult(kept.get("s", "completed"))
    instance.enter()
    try:
        return await instance.queue.attach(kept["m"], message.timeout)
    finally:
        instance.leave()


async def _send(
    instance: ActorInstance, message: SendMessage, once: Once | None = None
) -> QueueSendResult:
    queue = instance.queue
    if queue is None:
        instance.definition.require_queues()  # raises queue.not_configured
        raise AssertionError("an actor with queues has a queue while awake")
    instance.enter()  # a waiting send keeps the actor awake until it is answered
    staged = queue.next_id
    if once is not None:  # staged first: the message joins the same commit
        once.enqueued(staged, _send_status(message))
    try:
        return await queue.send(
            message.queue,
            message.body,
            wait=message.wait,
            timeout=message.timeout,
            validated=message.validated,
            delay=message.delay,
            at=message.at,
        )
    except BaseException:
        if once is not None and queue.next_id == staged:
            once.withdraw()  # refused before the message was added: nothing is applied
        raise
    finally:
        instance.leave()

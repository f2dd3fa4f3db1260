"""The one handle API: what every perdure client offers, as typed Protocols.

Four implementations, one surface (see ``docs/clients.md``):

- :class:`perdure.client.AsyncClient` (``create_client``), over HTTP and WebSocket;
- ``runtime.client()``, in process (:mod:`perdure.runtime.local.client`);
- ``c.client()``, from inside an actor (the same in-process client);
- :class:`perdure.client.Client`, the blocking twin: :class:`SyncClient` and friends
  describe it (the same names and arguments, without ``await``).

A client gives accessors (``client.<actor name>`` or ``client.actor(name)``); an
accessor gives handles (``get``, ``get_or_create``, ``get_for_id``, ``create``); a handle
calls actions (``await handle.increment(5)`` or ``handle.action("increment", 5)``),
sends queue messages (:meth:`Handle.send`), reads the workflow's status and opens
connections (:meth:`Handle.connect`, synchronous: the connection opens in the
background, ``await conn.wait_open()`` waits for it).

This module imports nothing of the engine or of the network stack, so that both sides
can name it. Durations are seconds (``float``) or :class:`~datetime.timedelta`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, Self, TypeAlias, TypedDict, overload

from perdure._time import optional_duration
from perdure.errors import IdempotencyError, WorkflowCancelled, WorkflowFailed

__all__ = [
    "FINISHED",
    "LONGEST_WAIT",
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    "Accessor",
    "ActorEvent",
    "Client",
    "CloseEvent",
    "Connection",
    "Duration",
    "EventGap",
    "Handle",
    "IdempotencyKeyed",
    "Instant",
    "ResultWait",
    "SendResult",
    "SyncAccessor",
    "SyncClient",
    "SyncConnection",
    "SyncHandle",
    "WorkflowStatus",
    "check_idempotency_key",
    "result_of",
    "seconds",
]

# The built-in actions of workflow actors (docs/workflow-control.md): the status and the
# controls. The engine serves them (perdure.definition); every client calls them.
WORKFLOW_STATUS_ACTION = "$workflow"
WORKFLOW_CANCEL_ACTION = "$workflow_cancel"
WORKFLOW_PAUSE_ACTION = "$workflow_pause"
WORKFLOW_RESUME_ACTION = "$workflow_resume"
WORKFLOW_RESULT_ACTION = "$workflow_result"
# Between a parent workflow and its children (docs/workflow-children.md): a parent
# records itself in a child's status record, a child tells its parent that it ended.
WORKFLOW_PARENT_ACTION = "$workflow_parent"
WORKFLOW_CHILD_ENDED_ACTION = "$workflow_child_ended"
WORKFLOW_ACTIONS = frozenset(
    {
        WORKFLOW_PARENT_ACTION,
        WORKFLOW_CHILD_ENDED_ACTION,
        WORKFLOW_STATUS_ACTION,
        WORKFLOW_CANCEL_ACTION,
        WORKFLOW_PAUSE_ACTION,
        WORKFLOW_RESUME_ACTION,
        WORKFLOW_RESULT_ACTION,
    }
)

Duration: TypeAlias = float | timedelta
"""A duration: seconds, or a :class:`~datetime.timedelta`."""

Instant: TypeAlias = datetime | int
"""An instant: a timezone-aware :class:`~datetime.datetime`, or epoch milliseconds."""


MAX_IDEMPOTENCY_KEY_LENGTH = 256


def check_idempotency_key(key: Any) -> str:
    """``key`` if it is a valid idempotency key, else ``idempotency.key_invalid``:
    1 to 256 printable ASCII characters (what an HTTP header carries as it is;
    docs/idempotency.md). Checked by every client and by the server."""
    if not isinstance(key, str) or not key:
        raise IdempotencyError("The idempotency key is empty or not a string.")
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        limit = MAX_IDEMPOTENCY_KEY_LENGTH
        raise IdempotencyError(
            f"The idempotency key is {len(key)} characters long; the limit is {limit}.",
            metadata={"length": len(key), "limit": limit},
        )
    if not (key.isascii() and key.isprintable()):
        raise IdempotencyError("The idempotency key must be printable ASCII.")
    return key


class IdempotencyKeyed:
    """What every client's handle shares: :meth:`with_idempotency_key`."""

    _idempotency_key: str | None = None

    def with_idempotency_key(self, key: str) -> Self:
        """This handle, its sends and action calls applied at most once per ``key``
        within the actor's retention window; a retry gets the first answer
        (docs/idempotency.md)."""
        handle = copy.copy(self)
        handle._idempotency_key = check_idempotency_key(key)
        return handle


def seconds(duration: Duration | None, what: str = "timeout") -> float | None:
    """``duration`` in seconds (``None`` stays ``None``: no limit).

    What cannot be a duration (a negative or non-finite number, a bool, a string) fails
    at the call with ``api.invalid_duration`` naming ``what``; an ``int`` in whole
    thousands (``timeout=1000``, RivetKit's milliseconds) logs a warning once.
    """
    return optional_duration(duration, what)


@dataclass(frozen=True, slots=True)
class CloseEvent:
    """Passed to ``on_close`` listeners: the close code and reason of the connection."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class EventGap:
    """Passed to ``on_gap`` listeners (docs/events.md): the events after number ``after``
    and before ``resumed_at`` are no longer in the actor's event log, so they will never
    arrive; re-read the actor's state. Events from ``resumed_at`` on follow."""

    after: int
    resumed_at: int


@dataclass(frozen=True, slots=True)
class ActorEvent:
    """One event of an actor, as ``handle.events()`` yields it: its number in the actor's
    event log (``seq``, from 1), its name and its arguments."""

    seq: int
    name: str
    args: list[Any]


class WorkflowStatus(TypedDict):
    """A workflow's status (:meth:`Handle.workflow_status`, the ``$workflow`` action)."""

    status: Literal[
        "pending",
        "running",
        "paused",
        "waiting_for_version",
        "completed",
        "failed",
        "cancelled",
    ]
    error: Any
    output: Any


class SendResult(dict[str, Any]):
    """What ``send(..., wait=True)`` returns: ``status`` (``"completed"`` or
    ``"timedOut"``) and the receiver's ``response``.

    It is the wire's ``{"status", "response"}`` object (what the TypeScript client
    returns), readable as attributes too: ``result.status == result["status"]``.
    """

    def __init__(self, status: Literal["completed", "timedOut"], response: Any = None) -> None:
        super().__init__(status=status, response=response)

    @property
    def status(self) -> Literal["completed", "timedOut"]:
        """``"completed"`` or ``"timedOut"``."""
        value: Literal["completed", "timedOut"] = self["status"]
        return value

    @property
    def response(self) -> Any:
        """The receiver's response (``None`` when timed out)."""
        return self["response"]

    def __repr__(self) -> str:
        return f"SendResult(status={self.status!r}, response={self.response!r})"


# -- asyncio --------------------------------------------------------------------------


class Connection(Protocol):
    """A live connection to one actor: events, and actions over it."""

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Call ``callback(*args)`` on each broadcast of ``event``; returns a function
        that removes the listener. An event the actor does not declare is refused:
        at once in process, by the server (``actor.unknown_event`` to ``on_error``)
        over the network."""
        ...

    def once(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Like :meth:`on`, for the next broadcast only."""
        ...

    def off(self, event: str, callback: Callable[..., Any] | None = None) -> None:
        """Remove ``callback`` (every listener of ``event`` if ``None``)."""
        ...

    def on_error(self, callback: Callable[[Exception], Any]) -> Callable[[], None]:
        """Call ``callback(error)`` for errors of the connection itself."""
        ...

    def action(self, name: str, *args: Any) -> Awaitable[Any]:
        """Call action ``name`` over the connection."""
        ...

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        """Unknown attributes are actions: ``await conn.increment(5)``."""
        ...

    @property
    def actor_id(self) -> str | None:
        """The actor's id, once the connection has opened."""
        ...

    @property
    def is_connected(self) -> bool:
        """Whether the connection is open."""
        ...

    async def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Wait until the connection is open (raises the refusal, or a timeout)."""
        ...

    async def dispose(self) -> None:
        """Close the connection for good."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...


class Handle(Protocol):
    """Calls one actor."""

    def action(self, name: str, *args: Any) -> Awaitable[Any]:
        """Call action ``name`` with ``args``; its output."""
        ...

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        """Unknown attributes are actions: ``await handle.increment(5)``."""
        ...

    @overload
    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[False] = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> None: ...

    @overload
    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult: ...

    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: bool = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult | None:
        """Send ``body`` to queue ``queue`` (durable on return). With ``wait``, wait up
        to ``timeout`` for the receiver to complete it: a :class:`SendResult`. With
        ``delay`` (a duration) or ``at`` (an aware ``datetime`` or epoch ms) the message
        is stored now and received only from then on (docs/queues.md, "Delayed sends");
        a delayed send cannot wait. With ``idempotency_key`` it is applied at most once
        per key, and a retry gets the first answer (docs/idempotency.md)."""
        ...

    def with_idempotency_key(self, key: str) -> Self:
        """This handle, its sends and action calls applied at most once per ``key``
        within the actor's retention window; a retry gets the first answer
        (docs/idempotency.md)."""
        ...

    def events(
        self, since: int | None = None, *, params: Any = None
    ) -> AsyncIterator[ActorEvent | EventGap]:
        """Every event of the actor after number ``since`` (``None``: from now), each
        once and in order, as :class:`ActorEvent` items; an :class:`EventGap` where the
        actor's event log no longer holds what was asked for (docs/events.md)."""
        ...

    def connect(self, params: Any = None) -> Connection:
        """Open a connection in the background (``await conn.wait_open()``)."""
        ...

    async def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        ...

    async def workflow_status(self) -> WorkflowStatus:
        """The status of the actor's workflow (the ``$workflow`` action)."""
        ...

    async def workflow_result(self, timeout: Duration | None = None) -> Any:
        """Wait for the actor's workflow to end and return its output; raises
        :class:`~perdure.errors.WorkflowFailed` or :class:`~perdure.errors.WorkflowCancelled`
        for a run that did not complete, ``TimeoutError`` after ``timeout``. Pushed: one
        request waits for the end (docs/workflow-control.md)."""
        ...

    async def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """Cancel the workflow's run at its next durable point; the status after the
        cancel is recorded (``workflow.not_running`` if the run has ended)."""
        ...

    async def pause_workflow(self) -> WorkflowStatus:
        """Hold the run before its next step, durably, until :meth:`resume_workflow`."""
        ...

    async def resume_workflow(self) -> WorkflowStatus:
        """Let a paused run go on."""
        ...


class Accessor(Protocol):
    """Handles to the actors of one name (``client.<name>``)."""

    def get(self, key: Any = None, *, params: Any = None) -> Handle:
        """A handle to an existing actor (``actor.not_found`` if there is none)."""
        ...

    def get_or_create(self, key: Any = None, *, input: Any = None, params: Any = None) -> Handle:
        """A handle that creates the actor (with ``input``) on first use."""
        ...

    def get_for_id(self, actor_id: str, *, params: Any = None) -> Handle:
        """A handle to the actor with this id."""
        ...

    async def create(self, key: Any = None, *, input: Any = None, params: Any = None) -> Handle:
        """Create the actor now (``actor.duplicate_key`` if the key is taken)."""
        ...


class Client(Protocol):
    """``client.<actor name>`` (or ``client.actor(name)``) gives an :class:`Accessor`."""

    def actor(self, name: str) -> Accessor:
        """The accessor for actors named ``name``."""
        ...

    def __getattr__(self, name: str) -> Accessor: ...


# -- blocking -------------------------------------------------------------------------


class SyncConnection(Protocol):
    """:class:`Connection` without ``await`` (the blocking client)."""

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]: ...

    def once(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]: ...

    def off(self, event: str, callback: Callable[..., Any] | None = None) -> None: ...

    def on_error(self, callback: Callable[[Exception], Any]) -> Callable[[], None]: ...

    def action(self, name: str, *args: Any) -> Any: ...

    def __getattr__(self, name: str) -> Callable[..., Any]: ...

    @property
    def actor_id(self) -> str | None: ...

    @property
    def is_connected(self) -> bool: ...

    def wait_open(self, timeout: Duration | None = 10.0) -> None: ...

    def dispose(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class SyncHandle(Protocol):
    """:class:`Handle` without ``await`` (the blocking client)."""

    def action(self, name: str, *args: Any) -> Any: ...

    def __getattr__(self, name: str) -> Callable[..., Any]: ...

    @overload
    def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[False] = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> None: ...

    @overload
    def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult: ...

    def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: bool = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult | None: ...

    def with_idempotency_key(self, key: str) -> Self: ...

    def events(
        self, since: int | None = None, *, params: Any = None
    ) -> Iterator[ActorEvent | EventGap]:
        """:meth:`Handle.events`, blocking for each item."""
        ...

    def connect(self, params: Any = None) -> SyncConnection: ...

    def resolve(self) -> str: ...

    def workflow_status(self) -> WorkflowStatus: ...

    def workflow_result(self, timeout: Duration | None = None) -> Any: ...

    def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus: ...

    def pause_workflow(self) -> WorkflowStatus: ...

    def resume_workflow(self) -> WorkflowStatus: ...


class SyncAccessor(Protocol):
    """:class:`Accessor` without ``await``."""

    def get(self, key: Any = None, *, params: Any = None) -> SyncHandle: ...

    def get_or_create(
        self, key: Any = None, *, input: Any = None, params: Any = None
    ) -> SyncHandle: ...

    def get_for_id(self, actor_id: str, *, params: Any = None) -> SyncHandle: ...

    def create(self, key: Any = None, *, input: Any = None, params: Any = None) -> SyncHandle: ...


class SyncClient(Protocol):
    """:class:`Client` without ``await``."""

    def actor(self, name: str) -> SyncAccessor: ...

    def __getattr__(self, name: str) -> SyncAccessor: ...


# ------------------------------------------------------------ a workflow's result
# The server answers one ``$workflow_result`` call when the run ends (pushed: the call
# waits, nothing polls), or after at most five minutes with the status as it stands; a
# client then asks again, until the run has ended or the caller's own ``timeout`` has
# passed. ResultWait keeps that loop's books for every client.

FINISHED = frozenset({"completed", "failed", "cancelled"})
"""The statuses of a run that has ended."""

LONGEST_WAIT = 300.0
"""The longest one server call waits (seconds): the server's own bound."""


def result_of(status: Mapping[str, Any]) -> Any:
    """The output of a run that completed; :class:`WorkflowFailed` (with the stored error)
    or :class:`WorkflowCancelled` (with the reason) for one that did not."""
    if status["status"] == "completed":
        return status.get("output")
    error = status.get("error") or {}
    if status["status"] == "cancelled":
        reason = (error.get("metadata") or {}).get("reason")
        raise WorkflowCancelled(reason)
    raise WorkflowFailed(error)


class ResultWait:
    """One caller's wait for a run's result, over as many server calls as it takes."""

    __slots__ = ("_deadline", "_limit")

    def __init__(self, timeout: Any) -> None:
        self._limit = optional_duration(timeout, "workflow_result() timeout")
        self._deadline = None if self._limit is None else time.monotonic() + self._limit

    def seconds(self) -> float:
        """How long the next server call may wait."""
        if self._deadline is None:
            return LONGEST_WAIT
        return min(LONGEST_WAIT, max(0.0, self._deadline - time.monotonic()))

    def settle(self, status: Mapping[str, Any]) -> tuple[bool, Any]:
        """``(True, output)`` once the run has ended (its failure raised), ``(False,
        None)`` to ask again; ``TimeoutError`` once the caller's timeout has passed."""
        if status["status"] in FINISHED:
            return True, result_of(status)
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise TimeoutError(
                f"The workflow had not ended after {self._limit:g} s (status: {status['status']})."
            )
        return False, None

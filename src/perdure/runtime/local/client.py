"""The in-process client: the one handle API of :mod:`perdure.handles`, without the network.

``runtime.client()`` (tests, benchmarks, scripts hosting a runtime) and ``c.client()``
(an actor calling another) return a :class:`LocalClient`::

    client = runtime.client()
    counter = client.counter.get_or_create(["main"])
    await counter.increment(5)  # unknown attributes are actions
    conn = counter.connect()  # opens in the background
    conn.on("newCount", print)
    await conn.wait_open()
    await counter.send("jobs", {"value": 5}, wait=True, timeout=timedelta(seconds=5))

Everything a request carries is checked as over the network (unknown action, argument
count, queue name and body, event names) before an actor is created.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from perdure._time import send_delay
from perdure.handles import (
    WORKFLOW_CANCEL_ACTION,
    WORKFLOW_PAUSE_ACTION,
    WORKFLOW_RESULT_ACTION,
    WORKFLOW_RESUME_ACTION,
    WORKFLOW_STATUS_ACTION,
    ActorEvent,
    Duration,
    EventGap,
    IdempotencyKeyed,
    Instant,
    ResultWait,
    SendResult,
    WorkflowStatus,
    check_idempotency_key,
    seconds,
)
from perdure.keys import normalize_key
from perdure.runtime.actor.operations import ActorAddress, CallAction, SendMessage
from perdure.runtime.dispatch.refs import ActorRef
from perdure.runtime.local.connection import ActionRef, LocalConnection
from perdure.runtime.local.events import follow_events

if TYPE_CHECKING:
    from perdure import handles
    from perdure.runtime.actor.operations import Operation, ResolveMethod
    from perdure.runtime.dispatch.dispatcher import ActorDispatch

__all__ = ["ActionRef", "LocalAccessor", "LocalClient", "LocalConnection", "LocalHandle"]

KeyArg = str | Sequence[str] | None


class LocalClient:
    """``client.<actor name>`` gives an accessor with ``get``/``get_or_create``/…

    Like the network client it may be used as ``async with`` (or closed with
    :meth:`close`), which disposes the connections opened through it; the actors
    themselves belong to the runtime.
    """

    def __init__(self, dispatch: ActorDispatch) -> None:
        self._dispatch = dispatch
        self._connections: weakref.WeakSet[LocalConnection] = weakref.WeakSet()

    def actor(self, name: str) -> LocalAccessor:
        """The accessor for actor ``name``."""
        return LocalAccessor(self._dispatch, name, self._connections)

    async def close(self) -> None:
        """Dispose every connection opened through this client (idempotent)."""
        connections = list(self._connections)
        self._connections.clear()
        await asyncio.gather(*(conn.dispose() for conn in connections))

    dispose = close

    async def __aenter__(self) -> LocalClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __getattr__(self, name: str) -> LocalAccessor:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)


class LocalAccessor:
    """Handles to actors of one name. ``params`` are the default connection params of
    a handle's connections (in-process actions run without a connection)."""

    def __init__(
        self,
        dispatch: ActorDispatch,
        name: str,
        connections: weakref.WeakSet[LocalConnection] | None = None,
    ) -> None:
        self._dispatch = dispatch
        self.name = name
        self._connections = weakref.WeakSet() if connections is None else connections

    def get(self, key: KeyArg = None, *, params: Any = None) -> LocalHandle:
        """A handle to an existing actor (``actor.not_found`` on first use if absent)."""
        return self._handle(key, "get", None, params)

    def get_or_create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> LocalHandle:
        """A handle that creates the actor on first use, with ``input``."""
        return self._handle(key, "getOrCreate", input, params)

    def _handle(self, key: KeyArg, method: ResolveMethod, input: Any, params: Any) -> LocalHandle:
        handle = LocalHandle(self._dispatch, self.name, key, method, input, params)
        handle._connections = self._connections
        return handle

    async def create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> LocalHandle:
        """Create the actor now (``actor.duplicate_key`` if the key exists) and return a
        handle bound to it."""
        actor = await self._dispatch.create(self.name, key, input)
        return self.get_for_id(actor.actor_id, params=params)

    def get_for_id(self, actor_id: str, *, params: Any = None) -> LocalHandle:
        """A handle bound to an actor id."""
        handle = self._handle(None, "get", None, params)
        handle._ref = self._dispatch.ref(actor_id)
        return handle


class LocalHandle(IdempotencyKeyed):
    """Calls one actor; unknown attributes are actions (``await h.increment(1)``); an
    action named like a method (``send``, ``connect`` …) is ``h.action("send", …)``."""

    def __init__(
        self,
        dispatch: ActorDispatch,
        name: str,
        key: KeyArg,
        method: ResolveMethod,
        input: Any = None,
        params: Any = None,
    ) -> None:
        self._dispatch = dispatch
        self._name = name
        self._key = key
        self._method = method
        self._input = input
        self._params = params
        self._ref: ActorRef | None = None
        # The client's connections (disposed when it closes).
        self._connections: weakref.WeakSet[LocalConnection] = weakref.WeakSet()

    async def resolve(self) -> str:
        """The actor id (creating the actor if this is a get-or-create handle)."""
        return (await self._resolved()).actor_id

    async def _resolved(self) -> ActorRef:
        if self._ref is None:
            address = ActorAddress(
                name=self._name,
                key=normalize_key(self._key),
                method=self._method,
                input=self._input,
            )
            self._ref = await self._dispatch.resolve(address)
        return self._ref

    async def _perform(self, operation: Operation) -> Any:
        if self._ref is None and self._method != "get":
            # Checked before the first use can create the actor, as over the network.
            operation = self._dispatch.check(self._name, operation)
        if self._idempotency_key is not None and operation.idempotency_key is None:
            operation.idempotency_key = self._idempotency_key
        return await (await self._resolved()).perform(operation)

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args``."""
        return await self._perform(CallAction(name, list(args)))

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
        """Send a durable message to ``queue`` (durable on return). With ``wait``, wait
        up to ``timeout`` (seconds or a ``timedelta``) until the receiver completes it:
        a :class:`~perdure.handles.SendResult` (``completed`` or ``timedOut``).
        ``delay``/``at``: a delayed send (docs/queues.md, "Delayed sends").
        ``idempotency_key``: applied at most once per key (docs/idempotency.md)."""
        delay_s, at_ms = send_delay(delay, at, wait=wait)
        message = SendMessage(
            queue, body, wait, seconds(timeout, "send() timeout"), delay=delay_s, at=at_ms
        )
        if idempotency_key is not None:
            message.idempotency_key = check_idempotency_key(idempotency_key)
        result = await self._perform(message)
        return SendResult(result.status, result.response) if wait else None

    async def workflow_status(self) -> WorkflowStatus:
        """The actor's workflow status ``{status, error, output}`` (``$workflow``)."""
        status: WorkflowStatus = await self.action(WORKFLOW_STATUS_ACTION)
        return status

    async def workflow_result(self, timeout: Duration | None = None) -> Any:
        """Wait for the workflow to end; its output (see :meth:`Handle.workflow_result`)."""
        wait = ResultWait(timeout)
        while True:
            status = await self.action(WORKFLOW_RESULT_ACTION, wait.seconds())
            done, output = wait.settle(status)
            if done:
                return output

    async def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """Cancel the workflow's run at its next durable point (``$workflow_cancel``)."""
        status: WorkflowStatus = await self.action(WORKFLOW_CANCEL_ACTION, reason)
        return status

    async def pause_workflow(self) -> WorkflowStatus:
        """Hold the run before its next step until resumed (``$workflow_pause``)."""
        status: WorkflowStatus = await self.action(WORKFLOW_PAUSE_ACTION)
        return status

    async def resume_workflow(self) -> WorkflowStatus:
        """Let a paused run go on (``$workflow_resume``)."""
        status: WorkflowStatus = await self.action(WORKFLOW_RESUME_ACTION)
        return status

    def __getattr__(self, name: str) -> ActionRef:
        if name.startswith("_"):
            raise AttributeError(name)
        return ActionRef(self.action, name)

    async def events(
        self, since: int | None = None, *, params: Any = None
    ) -> AsyncIterator[ActorEvent | EventGap]:
        """Every event of the actor after number ``since`` (``None``: from now), each
        once and in order (docs/events.md); an :class:`EventGap` where the log no
        longer holds what was asked for."""
        ref = await self._resolved()
        chosen = params if params is not None else self._params
        async for item in follow_events(ref, chosen, since):
            yield item

    def connect(self, params: Any = None) -> LocalConnection:
        """Open a connection in the background (needs a running event loop): ``await
        conn.wait_open()`` waits for it, and ``conn = await handle.connect()`` also
        works. ``params`` default to the handle's."""
        conn = LocalConnection(
            self._resolved,
            params if params is not None else self._params,
            lambda event: self._dispatch.check_subscription(self._name, event),
        )
        self._connections.add(conn)
        return conn


if TYPE_CHECKING:
    # The in-process client implements the one handle API (checked by mypy).
    _client: type[handles.Client] = LocalClient
    _accessor: type[handles.Accessor] = LocalAccessor
    _handle: type[handles.Handle] = LocalHandle
    _connection: type[handles.Connection] = LocalConnection

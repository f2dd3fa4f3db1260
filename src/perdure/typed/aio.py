"""The asyncio typed client: it wraps any client of the one handle API
(:class:`perdure.handles.Client`): the network :class:`~perdure.client.AsyncClient`,
``runtime.client()``, ``c.client()`` and ``ActorTestEnv.client``.

The classes here are the bases of the classes ``perdure types`` writes (see
:mod:`perdure.typed`): each forwards to the untyped object it wraps, and adds nothing at
run time but the conversion of typed results.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Literal, Self, TypeVar, overload

from perdure import handles
from perdure.handles import ActorEvent, Duration, EventGap, Instant, SendResult, WorkflowStatus
from perdure.typed._actions import Caller, WorkflowCaller, untyped_output
from perdure.typed._shared import AccessorMethods, ConnectionMethods, HandleMethods, Key

__all__ = [
    "Key",
    "TypedAccessor",
    "TypedClient",
    "TypedConnection",
    "TypedHandle",
    "TypedWorkflowHandle",
]

E = TypeVar("E", bound=str)  # the names of an actor's events
Q = TypeVar("Q", bound=str)  # the names of an actor's queues
B = TypeVar("B")  # what its queues take
I = TypeVar("I")  # noqa: E741 (its create input)
H = TypeVar("H", bound="TypedHandle[Any, Any]")


class TypedConnection(ConnectionMethods[handles.Connection, E], Caller):
    """A connection (:class:`perdure.handles.Connection`) whose event names are ``E``;
    the generated subclass adds the actor's actions."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Awaitable[Any]:
        return self._conn.action(name, *args)

    async def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Wait until the connection is open (raises the refusal, or a timeout)."""
        await self._conn.wait_open(timeout)

    async def dispose(self) -> None:
        """Close the connection for good."""
        await self._conn.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.dispose()


class TypedHandle(HandleMethods[handles.Handle], Caller, Generic[Q, B]):
    """A handle (:class:`perdure.handles.Handle`) whose queues are named ``Q`` and take
    ``B``; the generated subclass adds the actor's actions and its typed ``connect``."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Awaitable[Any]:
        return self._handle.action(name, *args)

    @overload
    async def send(
        self,
        queue: Q,
        body: B,
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
        queue: Q,
        body: B,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult: ...

    async def send(
        self,
        queue: Q,
        body: B,
        *,
        wait: bool = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult | None:
        """See :meth:`perdure.handles.Handle.send`."""
        if wait:
            return await self._handle.send(
                queue, body, wait=True, timeout=timeout, idempotency_key=idempotency_key
            )
        await self._handle.send(
            queue, body, timeout=timeout, delay=delay, at=at, idempotency_key=idempotency_key
        )
        return None

    def events(
        self, since: int | None = None, *, params: Any = None
    ) -> AsyncIterator[ActorEvent | EventGap]:
        """See :meth:`perdure.handles.Handle.events`."""
        return self._handle.events(since, params=params)

    def connect(self, params: Any = None) -> TypedConnection[Any]:
        """A connection, opened in the background (``await conn.wait_open()``)."""
        return TypedConnection(self._handle.connect(params))

    async def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        return await self._handle.resolve()


class TypedWorkflowHandle(TypedHandle[Q, B], WorkflowCaller):
    """The handle of a workflow actor: also its status, output and controls. The
    generated subclass types ``workflow_result`` as its ``run`` returns."""

    __slots__ = ()

    workflow_result = untyped_output()

    def _output(self, timeout: Duration | None) -> Awaitable[Any]:
        return self._handle.workflow_result(timeout)

    async def workflow_status(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.workflow_status`."""
        return await self._handle.workflow_status()

    async def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.cancel_workflow`."""
        return await self._handle.cancel_workflow(reason)

    async def pause_workflow(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.pause_workflow`."""
        return await self._handle.pause_workflow()

    async def resume_workflow(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.resume_workflow`."""
        return await self._handle.resume_workflow()


class TypedAccessor(AccessorMethods[handles.Accessor, handles.Handle, H, I]):
    """Handles of type ``H`` to the actors of one name, created with an input ``I``."""

    __slots__ = ()

    async def create(self, key: Key = None, *, input: I | None = None, params: Any = None) -> H:
        """Create the actor now (``actor.duplicate_key`` if the key is taken)."""
        return self._typed(await self._accessor.create(key, input=input, params=params))


class TypedClient:
    """A client of the one handle API, typed: the generated subclass has one property
    per actor (``client.counter``) and nothing else, so a misspelt name is an error."""

    __slots__ = ("_client",)

    def __init__(self, client: handles.Client) -> None:
        self._client = client

    @property
    def untyped(self) -> handles.Client:
        """The client this one wraps (``client.untyped.actor(name)`` for any name)."""
        return self._client

    def _accessor(self, name: str, handle: Callable[[handles.Handle], H]) -> TypedAccessor[H, Any]:
        return TypedAccessor(self._client.actor(name), handle)

    async def close(self) -> None:
        """Close the wrapped client (network clients close their HTTP pool and
        connections; in process, the connections opened through it)."""
        close = getattr(self._client, "close", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

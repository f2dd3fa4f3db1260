"""The blocking typed client: it wraps a client of the blocking handle API
(:class:`perdure.handles.SyncClient`), the network :class:`~perdure.client.Client`.

The twin of :mod:`perdure.typed.aio`, without ``await``: the same classes, prefixed
``Sync``, bases of the ``Sync…`` classes ``perdure types`` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Literal, Self, TypeVar, overload

from perdure import handles
from perdure.handles import ActorEvent, Duration, EventGap, Instant, SendResult, WorkflowStatus
from perdure.typed._actions import SyncCaller, SyncWorkflowCaller, untyped_output
from perdure.typed._shared import AccessorMethods, ConnectionMethods, HandleMethods, Key

__all__ = [
    "SyncTypedAccessor",
    "SyncTypedClient",
    "SyncTypedConnection",
    "SyncTypedHandle",
    "SyncTypedWorkflowHandle",
]

E = TypeVar("E", bound=str)
Q = TypeVar("Q", bound=str)
B = TypeVar("B")
I = TypeVar("I")  # noqa: E741
H = TypeVar("H", bound="SyncTypedHandle[Any, Any]")


class SyncTypedConnection(ConnectionMethods[handles.SyncConnection, E], SyncCaller):
    """:class:`~perdure.typed.TypedConnection` without ``await``."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        return self._conn.action(name, *args)

    def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Block until the connection is open (raises the refusal, or a timeout)."""
        self._conn.wait_open(timeout)

    def dispose(self) -> None:
        """Close the connection for good."""
        self._conn.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()


class SyncTypedHandle(HandleMethods[handles.SyncHandle], SyncCaller, Generic[Q, B]):
    """:class:`~perdure.typed.TypedHandle` without ``await``."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        return self._handle.action(name, *args)

    @overload
    def send(
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
    def send(
        self,
        queue: Q,
        body: B,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> SendResult: ...

    def send(
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
            return self._handle.send(
                queue, body, wait=True, timeout=timeout, idempotency_key=idempotency_key
            )
        self._handle.send(
            queue, body, timeout=timeout, delay=delay, at=at, idempotency_key=idempotency_key
        )
        return None

    def events(
        self, since: int | None = None, *, params: Any = None
    ) -> Iterator[ActorEvent | EventGap]:
        """See :meth:`perdure.handles.SyncHandle.events`."""
        return self._handle.events(since, params=params)

    def connect(self, params: Any = None) -> SyncTypedConnection[Any]:
        """A connection, opened in the background (``conn.wait_open()``)."""
        return SyncTypedConnection(self._handle.connect(params))

    def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        return self._handle.resolve()


class SyncTypedWorkflowHandle(SyncTypedHandle[Q, B], SyncWorkflowCaller):
    """:class:`~perdure.typed.TypedWorkflowHandle` without ``await``."""

    __slots__ = ()

    workflow_result = untyped_output()

    def _output(self, timeout: Duration | None) -> Any:
        return self._handle.workflow_result(timeout)

    def workflow_status(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.workflow_status`."""
        return self._handle.workflow_status()

    def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.cancel_workflow`."""
        return self._handle.cancel_workflow(reason)

    def pause_workflow(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.pause_workflow`."""
        return self._handle.pause_workflow()

    def resume_workflow(self) -> WorkflowStatus:
        """See :meth:`perdure.handles.Handle.resume_workflow`."""
        return self._handle.resume_workflow()


class SyncTypedAccessor(AccessorMethods[handles.SyncAccessor, handles.SyncHandle, H, I]):
    """:class:`~perdure.typed.TypedAccessor` without ``await``."""

    __slots__ = ()

    def create(self, key: Key = None, *, input: I | None = None, params: Any = None) -> H:
        """Create the actor now (``actor.duplicate_key`` if the key is taken)."""
        return self._typed(self._accessor.create(key, input=input, params=params))


class SyncTypedClient:
    """:class:`~perdure.typed.TypedClient` without ``await``."""

    __slots__ = ("_client",)

    def __init__(self, client: handles.SyncClient) -> None:
        self._client = client

    @property
    def untyped(self) -> handles.SyncClient:
        """The client this one wraps."""
        return self._client

    def _accessor(
        self, name: str, handle: Callable[[handles.SyncHandle], H]
    ) -> SyncTypedAccessor[H, Any]:
        return SyncTypedAccessor(self._client.actor(name), handle)

    def close(self) -> None:
        """Close the wrapped client (its HTTP pool and connections)."""
        close = getattr(self._client, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

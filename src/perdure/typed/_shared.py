"""What the asyncio and the blocking typed classes share: the methods that forward to the
wrapped object without waiting. The rest, in :mod:`~perdure.typed.aio` and
:mod:`~perdure.typed.sync`, awaits or blocks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Self, TypeVar, cast

from perdure import handles

__all__ = ["AccessorMethods", "ConnectionMethods", "HandleMethods", "Key"]

Key = str | Sequence[str] | None
"""An actor's key: a string, a list of strings, or ``None`` (the empty key)."""

RawConnection = TypeVar("RawConnection", bound="handles.Connection | handles.SyncConnection")
RawHandle = TypeVar("RawHandle", bound="handles.Handle | handles.SyncHandle")
RawAccessor = TypeVar("RawAccessor", bound="handles.Accessor | handles.SyncAccessor")
E = TypeVar("E", bound=str)  # the names of an actor's events
H = TypeVar("H")  # the typed handle
I = TypeVar("I")  # noqa: E741 (the create input)


class ConnectionMethods(Generic[RawConnection, E]):
    """A typed connection's listeners and state, its events named ``E``."""

    __slots__ = ("_conn",)

    def __init__(self, conn: RawConnection) -> None:
        self._conn = conn

    @property
    def untyped(self) -> RawConnection:
        """The connection this one wraps (every action by name, untyped)."""
        return self._conn

    def on(self, event: E, callback: Callable[..., Any]) -> Callable[[], None]:
        """See :meth:`perdure.handles.Connection.on`."""
        return self._conn.on(event, callback)

    def once(self, event: E, callback: Callable[..., Any]) -> Callable[[], None]:
        """See :meth:`perdure.handles.Connection.once`."""
        return self._conn.once(event, callback)

    def off(self, event: E, callback: Callable[..., Any] | None = None) -> None:
        """See :meth:`perdure.handles.Connection.off`."""
        self._conn.off(event, callback)

    def on_error(self, callback: Callable[[Exception], Any]) -> Callable[[], None]:
        """See :meth:`perdure.handles.Connection.on_error`."""
        return self._conn.on_error(callback)

    @property
    def actor_id(self) -> str | None:
        """The actor's id, once the connection has opened."""
        return self._conn.actor_id

    @property
    def is_connected(self) -> bool:
        """Whether the connection is open."""
        return self._conn.is_connected


class HandleMethods(Generic[RawHandle]):
    """What a typed handle does without calling the actor."""

    __slots__ = ("_handle",)

    def __init__(self, handle: RawHandle) -> None:
        self._handle = handle

    @property
    def untyped(self) -> RawHandle:
        """The handle this one wraps (every action by name, untyped)."""
        return self._handle

    def with_idempotency_key(self, key: str) -> Self:
        """This handle, its sends and action calls applied at most once per ``key``
        within the actor's retention window (docs/idempotency.md)."""
        # The wrapped handle's own kind comes back (its method returns Self); mypy sees
        # only the bound of RawHandle.
        keyed = cast(RawHandle, self._handle.with_idempotency_key(key))
        return type(self)(keyed)


class AccessorMethods(Generic[RawAccessor, RawHandle, H, I]):
    """Typed handles ``H`` to the actors of one name, created with an input ``I``."""

    __slots__ = ("_accessor", "_handle")

    def __init__(self, accessor: RawAccessor, handle: Callable[[RawHandle], H]) -> None:
        self._accessor = accessor
        self._handle = handle

    @property
    def untyped(self) -> RawAccessor:
        """The accessor this one wraps."""
        return self._accessor

    def _typed(self, handle: handles.Handle | handles.SyncHandle) -> H:
        # A wrapped accessor gives handles of its own kind (RawHandle); mypy sees only
        # the bound of RawAccessor.
        return self._handle(cast(RawHandle, handle))

    def get(self, key: Key = None, *, params: Any = None) -> H:
        """A handle to an existing actor (``actor.not_found`` if there is none)."""
        return self._typed(self._accessor.get(key, params=params))

    def get_or_create(self, key: Key = None, *, input: I | None = None, params: Any = None) -> H:
        """A handle that creates the actor (with ``input``) on first use."""
        return self._typed(self._accessor.get_or_create(key, input=input, params=params))

    def get_for_id(self, actor_id: str, *, params: Any = None) -> H:
        """A handle to the actor with this id."""
        return self._typed(self._accessor.get_for_id(actor_id, params=params))

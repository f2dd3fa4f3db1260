"""Connections: a client's live link to one actor (actions over the socket, and events)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "Connection",
    "RequestInfo",
    "Transport",
    "bind_request",
    "current_request",
    "inherit_request",
]


class Transport(Protocol):
    """How the runtime reaches a connected client (a WebSocket, or an in-process queue)."""

    def send_event(self, name: str, args: list[Any]) -> None:
        """Queue an event for the client. Must not block."""
        ...

    def close(self, code: int, reason: str) -> None:
        """Close the link (idempotent). Must not block."""
        ...


class Connection:
    """One connected client. ``params`` come from the client; ``state`` is per connection."""

    __slots__ = ("id", "params", "state", "subscriptions", "transport")

    def __init__(
        self,
        conn_id: str,
        params: Any,
        state: Any,
        transport: Transport,
    ) -> None:
        self.id = conn_id
        self.params = params
        self.state = state
        self.transport = transport
        self.subscriptions: set[str] = set()

    def send(self, name: str, *args: Any) -> None:
        """Send an event to this connection only (whether or not it subscribed)."""
        self.transport.send_event(name, list(args))

    def is_subscribed(self, name: str) -> bool:
        """True when the client asked for events of this name."""
        return name in self.subscriptions

    def disconnect(self, reason: str | None = None) -> None:
        """Close this connection from the actor's side."""
        self.transport.close(1000, reason or "disconnected")

    def __repr__(self) -> str:
        return f"Connection({self.id!r})"


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """The client request behind a call, read-only (``c.request``): ``headers`` (names
    lower-case; repeated headers joined with ``", "``), ``origin`` (the ``Origin``
    header, or ``None``), ``client_host``/``client_port`` (the peer address as the
    server sees it: behind a proxy, the proxy's), ``method``, ``path``, and
    ``transport`` (``"http"`` or ``"websocket"``)."""

    headers: Mapping[str, str]
    origin: str | None
    client_host: str | None
    client_port: int | None
    method: str
    path: str
    transport: Literal["http", "websocket"]


@dataclass(frozen=True, slots=True)
class _Bound:
    """A request bound to the task serving it, for one actor. ``make`` builds the
    :class:`RequestInfo` when an actor asks (most never do: no cost on the hot path)."""

    actor_id: str
    task: asyncio.Task[Any] | None
    make: Callable[[], RequestInfo]


# A task the runtime starts while serving a request (a wake, a schedule loop) inherits
# the variable but is not the bound task, so it sees no request.
_current: ContextVar[_Bound | None] = ContextVar("perdure_request", default=None)


def bind_request(actor_id: str, make: Callable[[], RequestInfo]) -> None:
    """Make the request ``make`` describes the running task's request for ``actor_id``
    (the server calls this once it knows the actor)."""
    _current.set(_Bound(actor_id, asyncio.current_task(), make))


def inherit_request() -> None:
    """Bind the request the running task inherited from its parent to this task too (a
    WebSocket connection's action tasks: each serves the connection's request)."""
    bound = _current.get()
    if bound is not None:
        _current.set(_Bound(bound.actor_id, asyncio.current_task(), bound.make))


def current_request(actor_id: str) -> RequestInfo | None:
    """The request the running task serves for actor ``actor_id``, or ``None`` (in-process
    calls to other actors, schedule fires, background tasks)."""
    bound = _current.get()
    if bound is None or bound.task is not asyncio.current_task() or bound.actor_id != actor_id:
        return None
    return bound.make()

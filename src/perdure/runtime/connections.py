"""Connections: a client's live link to one actor (actions over the socket, and events)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from perdure.runtime.instance import ActorInstance

__all__ = ["Connection", "Transport"]


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

    __slots__ = ("_instance", "id", "params", "state", "subscriptions", "transport")

    def __init__(
        self,
        conn_id: str,
        params: Any,
        state: Any,
        transport: Transport,
        instance: ActorInstance,
    ) -> None:
        self.id = conn_id
        self.params = params
        self.state = state
        self.transport = transport
        self.subscriptions: set[str] = set()
        self._instance = instance

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

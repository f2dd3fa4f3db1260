"""The part of a connection's API that is the same in the async and blocking clients:
its state, and event and lifecycle listeners (all of it bookkeeping in the core)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal

from perdure.client._connstate import ConnectionCore, Effect, Status

__all__ = ["ConnectionView"]

Lifecycle = Literal["open", "close", "error", "status"]


class ConnectionView:
    """State and listeners of a connection. Subclasses apply the core's effects (sending
    frames, settling futures, running callbacks) and may guard the core with a lock."""

    _core: ConnectionCore[Any]

    def _apply(self, effects: list[Effect]) -> None:
        raise NotImplementedError

    def _guard(self) -> contextlib.AbstractContextManager[Any]:
        """Held around every change to the core (a lock in the threaded client)."""
        return contextlib.nullcontext()

    # -- state --------------------------------------------------------------------------

    @property
    def status(self) -> Status:
        """``"idle"``, ``"connecting"``, ``"connected"`` or ``"disconnected"``."""
        return self._core.status

    @property
    def is_connected(self) -> bool:
        """Whether the connection is open (``status == "connected"``)."""
        return self._core.status == "connected"

    @property
    def actor_id(self) -> str | None:
        """The actor's id, once the connection has opened."""
        return self._core.actor_id

    @property
    def connection_id(self) -> str | None:
        """The server's id of the current connection, once open."""
        return self._core.connection_id

    # -- listeners ----------------------------------------------------------------------

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Call ``callback(*args)`` on each broadcast of ``event``; returns a function
        that removes this listener. The first listener of an event subscribes to it."""
        return self._listen(event, callback, once=False)

    def once(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Like :meth:`on`, for the next broadcast only."""
        return self._listen(event, callback, once=True)

    def off(self, event: str, callback: Callable[..., Any] | None = None) -> None:
        """Remove ``callback`` (every listener of ``event`` if ``None``)."""
        with self._guard():
            self._apply(self._core.off(event, callback))

    def _listen(
        self, event: str, callback: Callable[..., Any], *, once: bool
    ) -> Callable[[], None]:
        with self._guard():
            token, effects = self._core.add_listener(event, callback, once=once)
            self._apply(effects)

        def unsubscribe() -> None:
            with self._guard():
                self._apply(self._core.remove_listener(event, token))

        return unsubscribe

    def on_open(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback()`` each time the connection opens (also after a reconnect);
        if it is open already (the socket may open before this line runs), once right
        away as well."""
        with self._guard():
            remove = self._lifecycle("open", callback)
            self._apply(self._core.open_now(callback))
        return remove

    def on_close(self, callback: Callable[..., Any]) -> Callable[[], None]:
        """Call ``callback(CloseEvent(code, reason))`` each time an open socket closes."""
        return self._lifecycle("close", callback)

    def on_error(self, callback: Callable[[Exception], Any]) -> Callable[[], None]:
        """Call ``callback(error)`` for connection errors: an
        :class:`~perdure.client.ActorError` the server closed with or refused the
        connection with, or a :class:`~perdure.client.TransportError`."""
        return self._lifecycle("error", callback)

    def on_status_change(self, callback: Callable[[Status], Any]) -> Callable[[], None]:
        """Call ``callback(status)`` on each later status change (read :attr:`status`
        for the current one)."""
        return self._lifecycle("status", callback)

    def _lifecycle(self, kind: Lifecycle, callback: Callable[..., Any]) -> Callable[[], None]:
        with self._guard():
            token = self._core.add_lifecycle(kind, callback)

        def remove() -> None:
            with self._guard():
                self._core.remove_lifecycle(kind, token)

        return remove

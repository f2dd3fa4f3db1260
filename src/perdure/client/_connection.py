"""What the asyncio and the threaded connection share above the socket: everything but
the I/O.

:class:`ConnectionBase` owns the :class:`~perdure.client._connstate.ConnectionCore`, the
upgrade plan, the state and listener API, and one method per step of a connection's
life (an action starts, ``wait_open`` waits, a socket opens, a frame arrives, the socket
fails or closes, the user disposes), each feeding the core and applying its effects. The
subclasses in :mod:`~perdure.client.aio` and :mod:`~perdure.client.sync` supply the I/O:
the future type, how a frame is sent and a callback run, how to wait for a future, and
the reader loop that opens sockets and sleeps between attempts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar

from perdure.client._base import Target
from perdure.client._connstate import (
    Backoff,
    Call,
    ConnectionCore,
    Effect,
    Reject,
    Resolve,
    Send,
    Status,
)
from perdure.client._errors import ActorError, TransportTimeout
from perdure.client._frames import SocketPlan, decode_frame, plan_socket, session_error
from perdure.client._shared import ActionAttributes, ClientBase
from perdure.handles import EventGap
from perdure.protocol.messages import ToServer
from perdure.protocol.resume import resume_protocol

__all__ = ["ConnectionBase"]

F = TypeVar("F")
R = TypeVar("R")
Lifecycle = Literal["open", "close", "error", "status", "gap"]
# Events emitted this long before the first socket opens, counted back from when it is
# asked for, still reach a new connection: they cover the time the upgrade request takes
# to reach the server, so an event emitted after connect() returned is never missed.
_FIRST_OPEN_MARGIN_MS = 1000


class ConnectionBase(ActionAttributes[R], Generic[F, R]):
    """A connection without its I/O. ``F`` is the future type the core settles
    (asyncio or concurrent), ``R`` what :meth:`action` returns (an awaitable or the
    output). Subclasses implement :meth:`_new_future`, :meth:`_send`, :meth:`_call`,
    and may guard the core with a lock (:meth:`_guard`)."""

    def __init__(self, client: ClientBase[Any, Any, Any, Any], target: Target, params: Any) -> None:
        client._check_open()
        self._client = client
        self._config = client.config
        self._plan: SocketPlan = plan_socket(client.config, target, params)
        self._core: ConnectionCore[F] = ConnectionCore(
            Backoff(maximum=self._config.max_reconnect_delay)
        )
        # Whether the current socket received Init (its close then goes to on_close).
        self._opened = False
        # connect() was called now: the first socket asks for the events since then.
        self._started = time.monotonic()

    # -- the I/O, supplied by subclasses ------------------------------------------------

    def _new_future(self) -> F:
        raise NotImplementedError

    def _send(self, message: ToServer) -> None:
        """Send ``message`` on the current socket, if any (called under the guard)."""
        raise NotImplementedError

    def _call(self, effect: Call) -> None:
        """Run listeners (called under the guard, in the order the core decided)."""
        raise NotImplementedError

    def _guard(self) -> contextlib.AbstractContextManager[Any]:
        """Held around every change to the core (a lock in the threaded client)."""
        return contextlib.nullcontext()

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self._send(effect.message)
            elif isinstance(effect, Resolve):
                if not effect.future.done():
                    effect.future.set_result(effect.value)
            elif isinstance(effect, Reject):
                if not effect.future.done():
                    effect.future.set_exception(effect.error)
            elif isinstance(effect, Call):
                self._call(effect)

    # -- waiting callers ----------------------------------------------------------------

    @contextlib.contextmanager
    def _calling(self, name: str, args: Sequence[Any]) -> Iterator[F]:
        """An action in flight: the future its answer settles, forgotten on exit (answered,
        timed out or cancelled)."""
        future = self._new_future()
        with self._guard():
            action_id, effects = self._core.request_action(name, list(args), future)
            self._apply(effects)
        try:
            yield future
        finally:
            with self._guard():
                self._core.abandon_action(action_id)

    @contextlib.contextmanager
    def _opening(self) -> Iterator[F]:
        """A ``wait_open`` caller: the future the next open (or a refusal) settles."""
        future = self._new_future()
        with self._guard():
            self._apply(self._core.add_open_waiter(future))
        try:
            yield future
        finally:
            with self._guard():
                self._core.remove_open_waiter(future)

    def _action_timeout(self, name: str) -> TransportTimeout:
        return TransportTimeout(
            f"Action {name!r} got no answer within {self._config.timeout} s "
            f"(connection status: {self.status})."
        )

    @staticmethod
    def _open_timeout(timeout: float | None) -> TransportTimeout:
        return TransportTimeout(f"The connection did not open within {timeout} s.")

    # -- a socket's life ----------------------------------------------------------------

    def _socket_options(self) -> dict[str, Any]:
        """The options of the next socket: rivet's, and where its events resume from
        (after the last one received, else since ``connect()``; docs/events.md)."""
        options = self._plan.connect_options()
        with self._guard():
            cursor = self._core.event_cursor
        age = int((time.monotonic() - self._started) * 1000) + _FIRST_OPEN_MARGIN_MS
        options["subprotocols"] = [*options["subprotocols"], resume_protocol(cursor, age)]
        return options

    def _connecting(self) -> None:
        """A socket is about to be opened."""
        with self._guard():
            self._opened = False
            self._apply(self._core.connecting())

    def _received(self, frame: str | bytes) -> None:
        """A frame arrived on the current socket."""
        with self._guard():
            effects, is_init = decode_frame(self._core, frame, self._config.encoding)
            self._opened = self._opened or is_init
            self._apply(effects)

    def _session_failed(self, exc: Exception) -> None:
        """The socket could not be opened, was refused, or the reader broke."""
        with self._guard():
            self._apply(session_error(self._core, exc, self._plan.url, self._config.encoding))

    def _session_ended(self, code: int, reason: str) -> float | None:
        """The socket is gone: the delay before the next attempt, or ``None`` once the
        connection is disposed."""
        with self._guard():
            self._apply(self._core.socket_closed(code, reason, opened=self._opened))
            if self._core.disposed:
                return None
            return self._core.next_reconnect_delay()

    def _dispose_core(self) -> bool:
        """Fail everything pending; ``False`` if the connection was already disposed."""
        with self._guard():
            if self._core.disposed:
                return False
            self._apply(self._core.dispose())
            return True

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

    def on_gap(self, callback: Callable[[EventGap], Any]) -> Callable[[], None]:
        """Call ``callback(EventGap(after, resumed_at))`` when a reconnect finds that the
        actor's event log no longer holds every event the connection missed while away
        (retention, docs/events.md): those events will never arrive, so re-read the
        actor's state. Every other event arrives exactly once, in order."""
        return self._lifecycle("gap", callback)

    def _follow(self, tap: Callable[[Any], Any], since: int | None) -> None:
        """For ``handle.events()``: every numbered event and gap goes to ``tap``, and so
        does an ``ActorError`` that refuses or ends the connection; the first socket
        resumes after event ``since`` (if given). Called before the first socket."""

        def refused(error: Exception) -> None:
            if isinstance(error, ActorError):
                tap(error)

        with self._guard():
            self._core.tap = tap
            self._core.add_lifecycle("error", refused)
            if since is not None:
                self._core.event_cursor = since

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

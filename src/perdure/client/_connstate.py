"""The connection state machine, without I/O.

:class:`ConnectionCore` knows everything a connection decides: its status, the event
listeners and which ``SubscriptionRequest`` to send when, which actions are in flight or
waiting for the socket, and the reconnect backoff. Each entry point takes what happened
(the user called ``on``, a frame arrived, the socket closed …) and returns a list of
*effects* for the I/O layer to carry out in order: send a message, resolve or reject a
pending future, call listeners. The asyncio and the threaded connection are thin shells
around it, so they behave the same.

Futures are opaque here (``F``): asyncio futures for the async client, concurrent ones
for the blocking client.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from perdure.client._errors import (
    ActorError,
    ConnectionDisposed,
    TransportError,
    error_from_close,
)
from perdure.handles import ActorEvent, CloseEvent, EventGap
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    ErrorMessage,
    Event,
    Init,
    SubscriptionRequest,
    ToClient,
    ToServer,
)
from perdure.protocol.resume import CONTROL_EVENT

__all__ = [
    "Backoff",
    "Call",
    "CloseEvent",
    "ConnectionCore",
    "Effect",
    "Reject",
    "Resolve",
    "Send",
    "Status",
]

Status: TypeAlias = Literal["idle", "connecting", "connected", "disconnected"]
logger = logging.getLogger("perdure.client")
F = TypeVar("F")
Callback: TypeAlias = Callable[..., Any]


# -- effects ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``message`` on the current socket."""

    message: ToServer


@dataclass(frozen=True, slots=True)
class Resolve(Generic[F]):
    """Complete ``future`` with ``value``."""

    future: F
    value: Any


@dataclass(frozen=True, slots=True)
class Reject(Generic[F]):
    """Fail ``future`` with ``error``."""

    future: F
    error: BaseException


@dataclass(frozen=True, slots=True)
class Call:
    """Call each of ``callbacks`` with ``args`` (listeners; they may be async)."""

    callbacks: tuple[Callback, ...]
    args: tuple[Any, ...]


Effect: TypeAlias = Send | Resolve[Any] | Reject[Any] | Call


def _refused_event(error: ActorError) -> str | None:
    """The event a subscription refusal names (``actor.unknown_event`` with
    ``{"event": name}``), or ``None`` for any other error."""
    if (error.group, error.code) != ("actor", "unknown_event"):
        return None
    event = error.metadata.get("event") if isinstance(error.metadata, dict) else None
    return event if isinstance(event, str) else None


# -- backoff ------------------------------------------------------------------------------


@dataclass
class Backoff:
    """Reconnect delays: ``initial`` doubling up to ``maximum``, each shortened by a
    random fraction up to ``jitter`` so many clients do not reconnect in lockstep."""

    initial: float = 0.25
    maximum: float = 30.0
    jitter: float = 0.25
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt (and count the attempt)."""
        base = min(self.maximum, self.initial * 2.0 ** min(self.attempt, 32))
        self.attempt += 1
        factor: float = 1.0 - self.jitter * self.rng.random()
        return base * factor

    def reset(self) -> None:
        """Start again from ``initial`` (after a successful open)."""
        self.attempt = 0


# -- listeners ----------------------------------------------------------------------------


class _Listener:
    """One registration (the same callback may be registered twice)."""

    __slots__ = ("callback", "once")

    def __init__(self, callback: Callback, once: bool) -> None:
        self.callback = callback
        self.once = once


@dataclass
class _Pending(Generic[F]):
    request: ActionRequest
    future: F


class ConnectionCore(Generic[F]):
    """What a connection knows and decides; see the module docstring."""

    def __init__(self, backoff: Backoff | None = None) -> None:
        self.status: Status = "idle"
        self.actor_id: str | None = None
        self.connection_id: str | None = None
        self.disposed = False
        self.backoff = backoff or Backoff()
        self._events: dict[str, list[_Listener]] = {}
        self._lifecycle: dict[str, list[_Listener]] = {
            "open": [],
            "close": [],
            "error": [],
            "status": [],
            "gap": [],
        }
        self._next_id = 0
        self._in_flight: dict[int, _Pending[F]] = {}
        self._queued: list[_Pending[F]] = []
        self._open_waiters: list[F] = []
        # Whether the current socket already reported its error (an Error frame comes
        # before the close whose reason repeats it).
        self._error_reported = False
        # Events the server refused to subscribe to (the actor does not declare them):
        # listening to one again raises at once.
        self._refused: dict[str, ActorError] = {}
        # Resumable events (docs/events.md): the number of the last event received (the
        # next socket resumes after it), and whether this socket numbers its events
        # (the server said so right after Init).
        self.event_cursor: int | None = None
        self._numbered = False
        # handle.events(): told of every numbered event (ActorEvent) and gap (EventGap),
        # whatever the listeners.
        self.tap: Callback | None = None

    # -- status -------------------------------------------------------------------------

    def _set_status(self, status: Status) -> list[Effect]:
        if status == self.status:
            return []
        self.status = status
        return self._lifecycle_call("status", status)

    def _lifecycle_call(self, kind: str, *args: Any) -> list[Effect]:
        listeners = self._lifecycle[kind]
        if not listeners:
            return []
        return [Call(tuple(entry.callback for entry in listeners), args)]

    def add_lifecycle(
        self, kind: Literal["open", "close", "error", "status", "gap"], cb: Callback
    ) -> Any:
        """Register an ``on_open``/``on_close``/``on_error``/``on_status_change``/
        ``on_gap`` callback; returns the token :meth:`remove_lifecycle` takes."""
        entry = _Listener(cb, once=False)
        self._lifecycle[kind].append(entry)
        return entry

    def open_now(self, cb: Callback) -> list[Effect]:
        """For an ``on_open`` callback registered while the connection is already open:
        call it once now, so registering right after ``connect()`` never misses the first
        open (the blocking client's socket may open before the registration)."""
        return [Call((cb,), ())] if self.status == "connected" else []

    def remove_lifecycle(
        self, kind: Literal["open", "close", "error", "status", "gap"], token: Any
    ) -> None:
        """Undo :meth:`add_lifecycle` (idempotent)."""
        entries = self._lifecycle[kind]
        if token in entries:
            entries.remove(token)

    # -- events -------------------------------------------------------------------------

    def add_listener(
        self, event: str, cb: Callback, *, once: bool = False
    ) -> tuple[Any, list[Effect]]:
        """Register a listener; the first one of ``event`` subscribes (now if connected,
        otherwise when the connection opens). Returns a token for :meth:`remove_listener`.

        Raises the server's ``actor.unknown_event`` at once for an event it already
        refused on this connection."""
        refused = self._refused.get(event)
        if refused is not None:
            raise refused
        entry = _Listener(cb, once)
        entries = self._events.setdefault(event, [])
        entries.append(entry)
        effects: list[Effect] = []
        if len(entries) == 1 and self.status == "connected":
            effects.append(Send(SubscriptionRequest(event, True)))
        return entry, effects

    def remove_listener(self, event: str, token: Any) -> list[Effect]:
        """Remove one registration; removing the last one of ``event`` unsubscribes."""
        entries = self._events.get(event)
        if not entries or token not in entries:
            return []
        entries.remove(token)
        return self._after_removal(event)

    def off(self, event: str, cb: Callback | None = None) -> list[Effect]:
        """Remove every registration of ``cb`` for ``event`` (all of them if ``cb`` is None)."""
        entries = self._events.get(event)
        if not entries:
            return []
        kept = [] if cb is None else [entry for entry in entries if entry.callback != cb]
        if len(kept) == len(entries):
            return []
        self._events[event] = kept
        return self._after_removal(event)

    def _after_removal(self, event: str) -> list[Effect]:
        if self._events.get(event):
            return []
        self._events.pop(event, None)
        if self.status == "connected":
            return [Send(SubscriptionRequest(event, False))]
        return []

    def subscribed_events(self) -> list[str]:
        """Events that have listeners (what is (re)subscribed when the socket opens)."""
        return list(self._events)

    # -- actions ------------------------------------------------------------------------

    def request_action(self, name: str, args: list[Any], future: F) -> tuple[int, list[Effect]]:
        """Start an action call; it is sent now if connected, else when the socket opens.
        Returns its id (for :meth:`abandon_action`)."""
        if self.disposed:
            return -1, [Reject(future, ConnectionDisposed("The connection is disposed."))]
        action_id = self._next_id
        self._next_id += 1
        pending = _Pending(ActionRequest(action_id, name, args), future)
        if self.status == "connected":
            self._in_flight[action_id] = pending
            return action_id, [Send(pending.request)]
        self._queued.append(pending)
        return action_id, []

    def abandon_action(self, action_id: int) -> None:
        """Forget an action the caller stopped waiting for (timeout, cancellation)."""
        self._in_flight.pop(action_id, None)
        self._queued = [p for p in self._queued if p.request.id != action_id]

    def pending_count(self) -> int:
        """Actions sent and not answered, plus actions waiting for the socket."""
        return len(self._in_flight) + len(self._queued)

    # -- opening ------------------------------------------------------------------------

    def add_open_waiter(self, future: F) -> list[Effect]:
        """A caller waits for the connection to open (``wait_open``)."""
        if self.disposed:
            return [Reject(future, ConnectionDisposed("The connection is disposed."))]
        if self.status == "connected":
            return [Resolve(future, None)]
        self._open_waiters.append(future)
        return []

    def remove_open_waiter(self, future: F) -> None:
        """The caller of ``wait_open`` gave up."""
        if future in self._open_waiters:
            self._open_waiters.remove(future)

    def connecting(self) -> list[Effect]:
        """A socket is being opened."""
        if self.disposed:
            return []
        self._error_reported = False
        return self._set_status("connecting")

    # -- frames -------------------------------------------------------------------------

    def receive(self, message: ToClient) -> list[Effect]:
        """A frame from the server."""
        if self.disposed:
            return []
        if isinstance(message, Init):
            return self._on_init(message)
        if isinstance(message, ActionResponse):
            pending = self._in_flight.pop(message.id, None)
            return [] if pending is None else [Resolve(pending.future, message.output)]
        if isinstance(message, Event):
            return self._on_event(message)
        return self._on_error(message)

    def _on_init(self, message: Init) -> list[Effect]:
        self.actor_id = message.actor_id
        self.connection_id = message.connection_id
        self._numbered = False
        self.backoff.reset()
        effects = self._set_status("connected")
        # The server accepts subscriptions only after Init; then the actions that
        # waited for the socket, in the order they were made.
        effects.extend(Send(SubscriptionRequest(event, True)) for event in self._events)
        for pending in self._queued:
            self._in_flight[pending.request.id] = pending
            effects.append(Send(pending.request))
        self._queued = []
        effects.extend(Resolve(waiter, None) for waiter in self._open_waiters)
        self._open_waiters = []
        effects.extend(self._lifecycle_call("open"))
        return effects

    def _on_event(self, message: Event) -> list[Effect]:
        args = message.args
        if message.name == CONTROL_EVENT and args and args[0] == -1:
            return self._on_control(args)
        if self._numbered:
            seq = args[0] if args else None
            if isinstance(seq, int) and seq > 0:
                if self.event_cursor is not None and seq <= self.event_cursor:
                    return []  # had it already
                self.event_cursor = seq
                args = args[1:]
                if self.tap is not None:
                    return [Call((self.tap,), (ActorEvent(seq, message.name, list(args)),))]
            elif seq == 0:
                args = args[1:]  # sent to this connection alone (conn.send)
        entries = self._events.get(message.name)
        if not entries:
            return []
        callbacks = tuple(entry.callback for entry in entries)
        effects: list[Effect] = [Call(callbacks, tuple(args))]
        if any(entry.once for entry in entries):
            self._events[message.name] = [entry for entry in entries if not entry.once]
            effects.extend(self._after_removal(message.name))
        return effects

    def _on_control(self, args: list[Any]) -> list[Effect]:
        """A frame of the resumable-events extension (protocol/resume.py)."""
        kind = args[1] if len(args) > 1 else None
        if kind == "numbered":
            self._numbered = True
            return []
        if kind == "resumed" and len(args) > 2 and isinstance(args[2], int):
            self._numbered = True
            self.event_cursor = args[2]
            return []
        if kind == "gap" and len(args) > 3 and isinstance(args[3], int):
            self.event_cursor = args[3] - 1
            gap = EventGap(int(args[2]), args[3])
            if self.tap is not None:
                return [Call((self.tap,), (gap,))]
            return self._lifecycle_call("gap", gap)
        return []

    def _on_error(self, message: ErrorMessage) -> list[Effect]:
        error = ActorError(
            message.group, message.code, message.message, message.metadata, message.actor
        )
        if message.action_id is not None:
            pending = self._in_flight.pop(message.action_id, None)
            return [] if pending is None else [Reject(pending.future, error)]
        event = _refused_event(error)
        if event is not None:
            return self._subscription_refused(event, error)
        # A connection-level error: the server closes the socket right after.
        return self.connection_error(error)

    def _subscription_refused(self, event: str, error: ActorError) -> list[Effect]:
        """The server refused to subscribe to ``event`` (the actor does not declare it):
        its listeners are dropped, ``on_error`` hears why, and listening to it again
        raises. The connection itself stays open."""
        logger.warning("The server refused the subscription to %r: %s", event, error)
        self._refused[event] = error
        self._events.pop(event, None)
        return self._lifecycle_call("error", error)

    def connection_error(self, error: ActorError) -> list[Effect]:
        """The server refused or ended the connection with ``error``.

        It goes to ``on_error``; actions waiting for the socket and ``wait_open`` callers
        fail with it rather than wait for a reconnect the server already refused once.
        """
        self._error_reported = True
        effects: list[Effect] = [Reject(p.future, error) for p in self._queued]
        self._queued = []
        effects.extend(Reject(waiter, error) for waiter in self._open_waiters)
        self._open_waiters = []
        effects.extend(self._lifecycle_call("error", error))
        return effects

    def transport_error(self, error: Exception) -> list[Effect]:
        """A socket could not be opened or broke; it goes to ``on_error`` only (the
        connection keeps retrying and waiting callers keep waiting)."""
        if self.disposed:
            return []
        return self._lifecycle_call("error", error)

    # -- closing ------------------------------------------------------------------------

    def socket_closed(self, code: int, reason: str, *, opened: bool) -> list[Effect]:
        """The current socket is gone (``opened``: it had received ``Init``).

        Actions already sent fail: their response can never arrive and re-sending could
        run them twice. Actions not yet sent keep waiting for the next socket. A close
        reason ``"group.code"`` is a connection error (see :meth:`connection_error`).
        """
        error = error_from_close(code, reason)
        lost: Exception = error or TransportError(
            f"The connection closed ({code} {reason!r}) before the action was answered."
        )
        effects: list[Effect] = [Reject(p.future, lost) for p in self._in_flight.values()]
        self._in_flight.clear()
        if self.disposed:
            return effects
        if error is not None and not self._error_reported:
            effects.extend(self.connection_error(error))
        effects.extend(self._set_status("disconnected"))
        if opened:
            effects.extend(self._lifecycle_call("close", CloseEvent(code, reason)))
        return effects

    def next_reconnect_delay(self) -> float:
        """How long to wait before the next attempt."""
        return self.backoff.next_delay()

    def dispose(self) -> list[Effect]:
        """The user disposed the connection: everything pending fails."""
        if self.disposed:
            return []
        self.disposed = True
        error = ConnectionDisposed("The connection was disposed.")
        effects: list[Effect] = [Reject(p.future, error) for p in self._in_flight.values()]
        effects.extend(Reject(p.future, error) for p in self._queued)
        effects.extend(Reject(waiter, error) for waiter in self._open_waiters)
        self._in_flight.clear()
        self._queued = []
        self._open_waiters = []
        was_open = self.status == "connected"
        effects.extend(self._set_status("disconnected"))
        if was_open:
            effects.extend(self._lifecycle_call("close", CloseEvent(1000, "Disposed")))
        self._events.clear()
        return effects

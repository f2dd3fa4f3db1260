"""What the engine reports about its work: the one seam metrics, traces and the
inspector's live feed observe.

The runtime, the workflow engine and the stores call an :class:`Observer` at each point
worth seeing: an action or queue send performed through the dispatch seam, a workflow
step, a store commit, an event sent, a connection opened, an alarm fired. The default
observer does nothing (each hook is one method call), so an engine nobody watches pays
almost nothing. ``perdure.observe`` holds the observers perdure ships (Prometheus
metrics, OpenTelemetry traces, the inspector's feed); :class:`Observers` fans one report
out to several.

Hooks that time work return a :class:`Span` (or ``None`` when the observer does not time
that kind of work); the caller ends it with the error that ended the work, if any.
Point hooks return nothing. No hook may raise: an observer that fails must not fail the
work it watches (:class:`Observers` logs and swallows, a single observer must do the
same).

This module is part of the shared base: it imports no layer, so the stores and the
workflow engine can report through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

__all__ = ["NO_OBSERVER", "ActorFacts", "Observer", "Observers", "Span"]

_log = logging.getLogger("perdure.telemetry")


class ActorFacts(Protocol):
    """The actor a report is about (a live instance, or its workflow's host)."""

    @property
    def actor_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> Sequence[str]: ...


class Span(Protocol):
    """Timed work in progress; ``end`` once, with the exception that ended it, if any."""

    def end(self, error: BaseException | None = None) -> None: ...


class Observer:
    """Receives the engine's reports. Every hook here does nothing; override the ones
    you watch. Hooks must be cheap and must not raise."""

    #: True for an observer that follows W3C trace contexts: only then does the server
    #: read a request's ``traceparent`` header, does a queue message store its sender's
    #: context and does the workflow engine report the contexts of what it receives (the
    #: three trace-context hooks below), so that nobody else pays for them.
    traces: bool = False

    # -------------------------------------------------------------- timed work

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        """An action is about to run on ``actor`` (through dispatch, a connection or a
        schedule). The span ends when its output is durable, or with its error."""
        return None

    def queue_send(self, actor: ActorFacts, queue: str) -> Span | None:
        """A message is about to be sent to ``actor``'s ``queue``; the span ends once it
        is durable (and answered, for a waiting send)."""
        return None

    def step(self, actor: ActorFacts, location: str, attempt: int) -> Span | None:
        """Attempt ``attempt`` (1-based) of the workflow step at ``location`` starts."""
        return None

    def commit(self, batch: int) -> Span | None:
        """The store writes ``batch`` actor commits in one transaction."""
        return None

    # ------------------------------------------------------------ point events

    def step_failed(self, actor: ActorFacts, location: str, attempt: int, will_retry: bool) -> None:
        """A step attempt failed; ``will_retry`` is False when its retries are spent
        (or the failure is terminal)."""

    def workflow_status(self, actor: ActorFacts, status: str) -> None:
        """The actor's workflow is now ``running``, ``completed`` or ``failed``."""

    def history_changed(
        self, actor: ActorFacts, changed: Sequence[str], deleted: Sequence[str]
    ) -> None:
        """Workflow history entries were written (``changed``) or pruned (``deleted``)
        in a commit that is now durable."""

    def message_consumed(self, actor: ActorFacts, queue: str, count: int) -> None:
        """``count`` messages of ``queue`` were taken from ``actor``'s queue."""

    def state_changed(self, actor: ActorFacts) -> None:
        """``actor``'s state changed in a commit that is now durable."""

    def event_sent(self, actor: ActorFacts, name: str, args: list[Any], recipients: int) -> None:
        """``actor`` emitted event ``name`` to ``recipients`` subscribed connections."""

    def connection_opened(self, actor: ActorFacts, conn_id: str) -> None:
        """A client connected to ``actor``."""

    def connection_closed(self, actor: ActorFacts, conn_id: str) -> None:
        """A client's connection to ``actor`` ended."""

    def actor_woke(self, actor: ActorFacts) -> None:
        """``actor`` is awake in this process."""

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        """``actor`` left this process: ``reason`` is ``sleep``, ``destroy``, ``shutdown``
        or ``lost`` (its lease was)."""

    def alarm_fired(self, actor: ActorFacts, kind: str, lateness_ms: int) -> None:
        """A timer of ``actor`` fired ``lateness_ms`` after it was due: ``kind`` is
        ``schedule`` (a one-shot, cron or interval job) or ``workflow`` (a workflow sleep
        or retry deadline)."""

    def store_error(self, operation: str, error: BaseException) -> None:
        """A store ``operation`` (``commit``, ``read``, ``lease`` …) failed."""

    # ----------------------------------------------------------- trace context
    # Called only when ``traces`` is true (see above).

    def enter_trace(self, traceparent: str, tracestate: str | None) -> Span | None:
        """A client sent this W3C trace context with a request (HTTP) or a connection
        (WebSocket): make it current in this task, for the work the request starts,
        until the returned span's ``end``."""
        return None

    def trace_carrier(self) -> str | None:
        """The trace context current in this task as a W3C ``traceparent``, to store
        with a queue message sent now; ``None`` if none (the first observer to give one
        wins)."""
        return None

    def workflow_received(self, actor: ActorFacts, traces: Sequence[str | None]) -> None:
        """``actor``'s workflow received messages (now, or replayed from its history)
        that were sent with these trace contexts (``None`` for an untraced sender): the
        steps that follow are their consequence."""


NO_OBSERVER = Observer()


class _Spans:
    """Several observers' spans for one piece of work, ended together."""

    __slots__ = ("_spans",)

    def __init__(self, spans: list[Span]) -> None:
        self._spans = spans

    def end(self, error: BaseException | None = None) -> None:
        for span in reversed(self._spans):
            try:
                span.end(error)
            except Exception:
                _log.exception("an observer failed to end a span")


_TIMED = frozenset({"action", "queue_send", "step", "commit", "enter_trace"})
# Not fanned out hook by hook: a flag, and a hook whose answer is the first one given.
_OWN = frozenset({"traces", "trace_carrier"})


def _nothing(*args: Any) -> None:
    """A hook no observer watches."""
    return None


def _dispatcher(hook: str, calls: tuple[Callable[..., Any], ...]) -> Callable[..., Any]:
    """The fan-out of ``hook`` to ``calls`` (the observers that watch it), each guarded
    so that a failing observer is logged and neither stops the others nor the work."""
    if not calls:
        return _nothing
    if len(calls) == 1:
        (call,) = calls

        def one(*args: Any) -> Any:
            try:
                return call(*args)
            except Exception:
                _log.exception("an observer failed in %s", hook)
                return None

        return one
    if hook in _TIMED:

        def timed(*args: Any) -> Span | None:
            spans: list[Span] = []
            for each in calls:
                try:
                    span = each(*args)
                except Exception:
                    _log.exception("an observer failed in %s", hook)
                    continue
                if span is not None:
                    spans.append(span)
            if not spans:
                return None
            return spans[0] if len(spans) == 1 else _Spans(spans)

        return timed

    def point(*args: Any) -> None:
        for each in calls:
            try:
                each(*args)
            except Exception:
                _log.exception("an observer failed in %s", hook)

    return point


class Observers(Observer):
    """Fans every report out to several observers (in order); one failing observer
    neither stops the others nor the work.

    Each hook is rebuilt whenever an observer is added or removed, as a plain function
    over just the observers that override it: a hook nobody watches costs an empty call,
    a hook one observer watches costs that observer's method and a guard.
    """

    follows_changes: bool = False

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self.observers: list[Observer] = list(observers)
        self._calls: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._update()

    def add(self, observer: Observer) -> None:
        """Watch with ``observer`` too."""
        self.observers.append(observer)
        self._update()

    def remove(self, observer: Observer) -> None:
        """Stop reporting to ``observer`` (no error if it was not added)."""
        if observer in self.observers:
            self.observers.remove(observer)
        self._update()

    def watches(self, hook: str) -> bool:
        """True when some observer does something in ``hook``."""
        return bool(self._calls.get(hook))

    def _update(self) -> None:
        self._calls = {
            hook: tuple(getattr(each, hook) for each in self.observers if _watches(each, hook))
            for hook in _HOOKS
        }
        for hook, calls in self._calls.items():
            setattr(self, hook, _dispatcher(hook, calls))
        # Read at every request and send: kept as a plain attribute, not computed.
        self.traces = any(watcher.traces for watcher in self.observers)
        # Read at every commit: whether anyone wants the durable state and history
        # changes (the inspector's feed does; metrics do not), so that a commit
        # nobody follows does not even register a callback for them.
        self.follows_changes = self.watches("state_changed") or self.watches("history_changed")

    def trace_carrier(self) -> str | None:
        """The first trace context an observer gives (see :meth:`Observer.trace_carrier`)."""
        for observer in self.observers:
            try:
                carrier = observer.trace_carrier()
            except Exception:
                _log.exception("observer %r failed in trace_carrier", observer)
                continue
            if carrier is not None:
                return carrier
        return None


def _watches(observer: Observer, hook: str) -> bool:
    """True when ``observer`` does something in ``hook``."""
    if isinstance(observer, Observers):
        return observer.watches(hook)
    return getattr(type(observer), hook) is not getattr(Observer, hook)


_HOOKS = tuple(
    name
    for name, value in vars(Observer).items()
    if callable(value) and not name.startswith("_") and name not in _OWN
)

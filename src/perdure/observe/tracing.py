"""OpenTelemetry traces of one runtime: :class:`TracingObserver`, :func:`enable_tracing`.

Needs the ``otel`` extra (``pip install 'perdure[otel]'``); nothing else in perdure
imports this module unless tracing is asked for. docs/tracing.md tells the whole story;
in short, the observer makes these spans from what the telemetry seam reports
(:mod:`perdure.telemetry`):

- ``action {actor}.{action}``: one per action call. Its parent is the span current
  where the call runs: a client's W3C ``traceparent`` (HTTP header of an action request,
  or of a WebSocket connection's opening request; the server makes it current through
  :meth:`TracingObserver.enter_trace`), else the step or action that made the call. Kind
  ``SERVER`` when the parent came from a client, ``INTERNAL`` otherwise.
- ``queue_send {actor}.{queue}`` (kind ``PRODUCER``): one per message sent, parented the
  same way. The message stores its context (:meth:`TracingObserver.trace_carrier`).
- ``step {actor}.{name}``: one per attempt of a workflow step; a failed attempt ends
  with status ``ERROR`` and the exception recorded. Its parent is the span that sent the
  message the workflow received last (:meth:`TracingObserver.workflow_received`, told
  again when a workflow replays its history after a restart), the other messages of a
  batch are links; before any traced message, each step attempt starts a trace of its
  own. The waking request's context, which the workflow's task inherits, is never used.
- ``commit``: one per store transaction (a batch of actor commits). A commit written
  where the work runs (the memory store; SQLite's inline path, taken when its writer is
  idle) is a child of the span it makes durable. A batch written by the SQLite writer's
  thread or the PostgreSQL writer's task, where no context is current, is the root of
  a trace of its own: a batch holds the commits of many requests.

Action, queue-send and step spans are current while their work runs, so that the spans
(and the messages) that work starts are their children. Spans end once the work is
durable, as the seam's spans do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from perdure._version import __version__
from perdure.errors import PerdureError
from perdure.telemetry import ActorFacts, Observer, Span

if TYPE_CHECKING:
    from perdure.telemetry import Observers

__all__ = ["TracingObserver", "enable_tracing"]

_log = logging.getLogger("perdure.tracing")
_PROPAGATOR = TraceContextTextMapPropagator()
_ROOT = Context()  # no parent: the span starts a trace


class _Traced:
    """A span made current in this task: ended (and no longer current) by ``end``."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span, *, current: bool = True) -> None:
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span)) if current else None

    def end(self, error: BaseException | None = None) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
        span = self._span
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, _describe(error)))
            if isinstance(error, PerdureError):
                span.set_attribute("error.type", error.identifier)
            else:
                span.set_attribute("error.type", type(error).__qualname__)
        span.end()


class _Entered:
    """A client's trace context, current in this task until ``end``."""

    __slots__ = ("_token",)

    def __init__(self, parent: Context) -> None:
        self._token = otel_context.attach(parent)

    def end(self, error: BaseException | None = None) -> None:
        otel_context.detach(self._token)


class _Cause:
    """What a workflow's next steps follow from: the parent and the other senders."""

    __slots__ = ("links", "parent")

    def __init__(self, parent: Context, links: list[Link]) -> None:
        self.parent = parent
        self.links = links


class TracingObserver(Observer):
    """Makes OpenTelemetry spans of a runtime's work (see the module docstring).

    ``tracer_provider``: where the spans go (default: OpenTelemetry's global provider).
    """

    traces = True

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer: Tracer = provider.get_tracer("perdure", __version__)
        # Actor id → the messages its workflow received last (see workflow_received);
        # only awake actors are kept.
        self._causes: dict[str, _Cause] = {}

    # ---------------------------------------------------------------- timed work

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        parent = otel_context.get_current()
        span = self.tracer.start_span(
            f"action {actor.name}.{action}",
            parent,
            kind=SpanKind.SERVER if _from_client(parent) else SpanKind.INTERNAL,
            attributes={**_actor_attributes(actor), "perdure.action": action},
        )
        return _Traced(span)

    def queue_send(self, actor: ActorFacts, queue: str) -> Span | None:
        span = self.tracer.start_span(
            f"queue_send {actor.name}.{queue}",
            kind=SpanKind.PRODUCER,
            attributes={**_actor_attributes(actor), "perdure.queue": queue},
        )
        return _Traced(span)

    def step(self, actor: ActorFacts, location: str, attempt: int) -> Span | None:
        cause = self._causes.get(actor.actor_id)
        span = self.tracer.start_span(
            f"step {actor.name}.{location.rpartition('/')[2]}",
            _ROOT if cause is None else cause.parent,
            links=None if cause is None else cause.links,
            attributes={
                **_actor_attributes(actor),
                "perdure.step.location": location,
                "perdure.step.attempt": attempt,
            },
        )
        return _Traced(span)

    def commit(self, batch: int) -> Span | None:
        # Maybe on the SQLite writer's thread: never made current (nothing runs inside).
        span = self.tracer.start_span("commit", attributes={"perdure.commit.batch": batch})
        return _Traced(span, current=False)

    # ------------------------------------------------------------- trace context

    def enter_trace(self, traceparent: str, tracestate: str | None) -> Span | None:
        headers = {"traceparent": traceparent}
        if tracestate:
            headers["tracestate"] = tracestate
        parent = _PROPAGATOR.extract(headers)
        if not trace.get_current_span(parent).get_span_context().is_valid:
            return None  # a malformed header is ignored, as W3C Trace Context says
        return _Entered(parent)

    def trace_carrier(self) -> str | None:
        return _traceparent(trace.get_current_span().get_span_context())

    def workflow_received(self, actor: ActorFacts, traces: Sequence[str | None]) -> None:
        senders = [context for context in map(_span_context, traces) if context is not None]
        if not senders:
            self._causes.pop(actor.actor_id, None)
            return
        parent = trace.set_span_in_context(trace.NonRecordingSpan(senders[0]), _ROOT)
        self._causes[actor.actor_id] = _Cause(parent, [Link(s) for s in senders[1:]])

    # ----------------------------------------------------------------- lifecycle

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        self._causes.pop(actor.actor_id, None)


def enable_tracing(
    runtime: Any, tracer_provider: trace.TracerProvider | None = None
) -> TracingObserver:
    """Trace ``runtime``'s work (an :class:`~perdure.runtime.host.actor_runtime.ActorRuntime`) into
    ``tracer_provider`` (default: OpenTelemetry's global one); returns the observer
    (``runtime.observers.remove(observer)`` stops it)."""
    observer = TracingObserver(tracer_provider)
    observers: Observers = runtime.observers
    observers.add(observer)
    return observer


def _actor_attributes(actor: ActorFacts) -> dict[str, Any]:
    return {
        "perdure.actor.name": actor.name,
        "perdure.actor.key": list(actor.key),
        "perdure.actor.id": actor.actor_id,
    }


def _from_client(parent: Context) -> bool:
    """True when ``parent`` came from outside this process (a client's header)."""
    return trace.get_current_span(parent).get_span_context().is_remote


def _traceparent(span_context: SpanContext) -> str | None:
    if not span_context.is_valid:
        return None
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}"
        f"-{int(span_context.trace_flags):02x}"
    )


def _span_context(traceparent: str | None) -> SpanContext | None:
    """The sender's span context stored with a message (``None`` if none or malformed)."""
    if not traceparent:
        return None
    found = trace.get_current_span(_PROPAGATOR.extract({"traceparent": traceparent}))
    span_context = found.get_span_context()
    return span_context if span_context.is_valid else None


def _describe(error: BaseException) -> str:
    if isinstance(error, PerdureError):
        return f"{error.identifier}: {error.message}"
    return f"{type(error).__qualname__}: {error}"

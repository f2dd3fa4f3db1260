"""Prometheus metrics of one runtime: :class:`MetricsObserver`.

The observer counts and times what the engine reports through the telemetry seam
(:mod:`perdure.telemetry`): actions, queue sends and consumption, workflow steps and
their retries, store commits, events, wake-ups and sleeps, alarms, store errors. What is
awake right now (awake, stored and sleeping actors, open connections, queued messages)
is read from the runtime when Prometheus scrapes (:meth:`MetricsObserver.refresh`), so
no hook keeps a running total that could drift.

Each observer owns its :class:`~prometheus_client.CollectorRegistry`, never the
process-wide default one: tests (and embedders) run several runtimes in one process.

Labels are actor *type* names and the action, queue and event names of their
definitions — never actor ids or keys — so the number of series stays bounded. Hooks on
the hot path (actions, queue sends, steps, commits) look their labelled children up in a
dict instead of calling ``.labels()`` each time. ``commit`` runs on the SQLite writer
thread; prometheus_client's values are thread-safe. docs/metrics.md lists every metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Sized
from time import perf_counter
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from perdure.errors import PerdureError
from perdure.telemetry import ActorFacts, Observer, Span

__all__ = [
    "BATCH_BUCKETS",
    "DURATION_BUCKETS",
    "LATENESS_BUCKETS",
    "MetricsObserver",
    "RuntimeView",
    "error_code",
]

# Seconds: a SQLite commit takes tens of microseconds to a millisecond, an action or a
# step from microseconds up to whatever its code awaits, so the buckets run from 100 µs
# to a minute.
DURATION_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
# Actor commits per store transaction (group commit): 1 when idle, hundreds under load.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# Seconds an alarm fired after it was due: the timer's own jitter is milliseconds; a
# hibernated actor woken late, or a server that was down, is seconds to minutes.
LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0)

INTERNAL_ERROR = "actor.internal_error"


def error_code(error: BaseException) -> str:
    """The ``group.code`` an error is counted under: a perdure error's own, else the
    generic internal error's (the code a remote caller would see)."""
    return error.identifier if isinstance(error, PerdureError) else INTERNAL_ERROR


# ------------------------------------------------------------ what a scrape reads


class _LiveActor(Protocol):
    """An actor awake in this process, as a scrape sees it."""

    @property
    def name(self) -> str: ...

    @property
    def conns(self) -> Sized: ...

    @property
    def queue(self) -> Sized | None: ...


class _Directory(Protocol):
    """The runtime's dispatch seam: how many actors are awake here, and stored."""

    def awake(self) -> Mapping[str, int]: ...

    async def count(self, name: str | None = None) -> int: ...


class RuntimeView(Protocol):
    """What :meth:`MetricsObserver.refresh` reads from a runtime (``ActorRuntime`` has it)."""

    @property
    def dispatch(self) -> _Directory: ...

    def live_instances(self) -> Sequence[_LiveActor]: ...


# ------------------------------------------------------------------------ spans


class _TimedSpan:
    """Work that is counted and timed (a step attempt, a store commit)."""

    __slots__ = ("_count", "_seconds", "_started")

    def __init__(self, count: Counter, seconds: Histogram) -> None:
        self._count = count
        self._seconds = seconds
        self._started = perf_counter()

    def end(self, error: BaseException | None = None) -> None:
        self._seconds.observe(perf_counter() - self._started)
        self._count.inc()


class _ActionSpan(_TimedSpan):
    """One action: counted and timed whatever its outcome; its error counted by code."""

    __slots__ = ("_errors", "_labels")

    def __init__(
        self, count: Counter, seconds: Histogram, errors: Counter, labels: tuple[str, str]
    ) -> None:
        super().__init__(count, seconds)
        self._errors = errors
        self._labels = labels

    def end(self, error: BaseException | None = None) -> None:
        super().end(error)
        if error is not None:
            self._errors.labels(*self._labels, error_code(error)).inc()


class _SendSpan:
    """One queue send: counted once durable; a refused send is counted by its code."""

    __slots__ = ("_errors", "_labels", "_sent")

    def __init__(self, sent: Counter, errors: Counter, labels: tuple[str, str]) -> None:
        self._sent = sent
        self._errors = errors
        self._labels = labels

    def end(self, error: BaseException | None = None) -> None:
        if error is None:
            self._sent.inc()
        else:
            self._errors.labels(*self._labels, error_code(error)).inc()


# --------------------------------------------------------------------- observer


class MetricsObserver(Observer):
    """Prometheus metrics of one runtime, in a registry of its own (:attr:`registry`).

    ``actor_names``: the registry's actor types, so that the scrape-time gauges show a
    zero for a type with nothing awake instead of no series at all.
    """

    def __init__(self, actor_names: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.actor_names = list(actor_names)
        self._define_work()
        self._define_points()
        self._define_gauges()
        # Labelled children of the hot-path metrics, by label values (see the docstring).
        self._actions: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self._sends: dict[tuple[str, str], Counter] = {}
        self._steps: dict[str, tuple[Counter, Histogram]] = {}

    # ------------------------------------------------------------- definitions

    def _counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, labels: Sequence[str], buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(name, doc, labels, registry=self.registry, buckets=buckets)

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, ["actor"], registry=self.registry)

    def _define_work(self) -> None:
        """The metrics of timed work: actions, queue sends, steps, commits."""
        action = ["actor", "action"]
        self.actions = self._counter("perdure_actions", "Actions run, failed or not.", action)
        self.action_seconds = self._histogram(
            "perdure_action_duration_seconds",
            "Time from an action's start until its output was durable (or it failed).",
            action,
            DURATION_BUCKETS,
        )
        self.action_errors = self._counter(
            "perdure_action_errors", "Actions that failed, by error code.", [*action, "code"]
        )
        queue = ["actor", "queue"]
        self.sent = self._counter("perdure_queue_messages_sent", "Queue messages sent.", queue)
        self.send_errors = self._counter(
            "perdure_queue_send_errors", "Queue sends refused, by error code.", [*queue, "code"]
        )
        self.consumed = self._counter(
            "perdure_queue_messages_consumed", "Queue messages taken by a receiver.", queue
        )
        self.steps = self._counter(
            "perdure_workflow_steps", "Workflow step attempts run (a retry counts).", ["actor"]
        )
        self.step_seconds = self._histogram(
            "perdure_workflow_step_duration_seconds",
            "Time a step attempt took, its commit included.",
            ["actor"],
            DURATION_BUCKETS,
        )
        self.commits = self._counter("perdure_store_commits", "Store write transactions.")
        self.commit_seconds = self._histogram(
            "perdure_store_commit_duration_seconds",
            "Time a store write transaction took.",
            (),
            DURATION_BUCKETS,
        )
        self.commit_batch = self._histogram(
            "perdure_store_commit_batch_size",
            "Actor commits written in one store transaction (group commit).",
            (),
            BATCH_BUCKETS,
        )

    def _define_points(self) -> None:
        """The metrics of point events: retries, workflow outcomes, events, alarms …"""
        self.step_retries = self._counter(
            "perdure_workflow_step_retries", "Step attempts that failed and will retry.", ["actor"]
        )
        self.step_failures = self._counter(
            "perdure_workflow_step_failures",
            "Steps that failed for good (retries spent, or a terminal error).",
            ["actor"],
        )
        self.workflows_completed = self._counter(
            "perdure_workflows_completed", "Workflow runs that completed.", ["actor"]
        )
        self.workflows_failed = self._counter(
            "perdure_workflows_failed", "Workflow runs that ended failed.", ["actor"]
        )
        event = ["actor", "event"]
        self.events = self._counter("perdure_events_sent", "Events emitted.", event)
        self.recipients = self._counter(
            "perdure_event_recipients", "Deliveries of events to subscribed connections.", event
        )
        self.wakes = self._counter("perdure_actor_wakes", "Actors woken here.", ["actor"])
        self.sleeps = self._counter(
            "perdure_actor_sleeps", "Actors that left this process, by reason.", ["actor", "reason"]
        )
        self.alarms = self._counter(
            "perdure_alarms_fired",
            "Timers fired (schedules, workflow deadlines).",
            ["actor", "kind"],
        )
        self.lateness = self._histogram(
            "perdure_alarm_lateness_seconds",
            "How long after it was due a timer fired.",
            ["kind"],
            LATENESS_BUCKETS,
        )
        self.store_errors = self._counter(
            "perdure_store_errors", "Failed store operations.", ["operation"]
        )

    def _define_gauges(self) -> None:
        """The gauges a scrape computes (:meth:`refresh`)."""
        self.awake = self._gauge("perdure_actors_awake", "Actors awake in this process.")
        self.stored = self._gauge("perdure_actors_stored", "Actors in the store, awake or not.")
        self.sleeping = self._gauge(
            "perdure_actors_sleeping", "Stored actors not awake in this process."
        )
        self.connections = self._gauge(
            "perdure_connections", "Client connections open to actors awake here."
        )
        self.depth = self._gauge(
            "perdure_queue_depth",
            "Messages in the queues of actors awake here (received, uncompleted ones too).",
        )

    # ---------------------------------------------------------------- timed work

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        labels = (actor.name, action)
        children = self._actions.get(labels)
        if children is None:
            children = (self.actions.labels(*labels), self.action_seconds.labels(*labels))
            self._actions[labels] = children
        return _ActionSpan(children[0], children[1], self.action_errors, labels)

    def queue_send(self, actor: ActorFacts, queue: str) -> Span | None:
        labels = (actor.name, queue)
        sent = self._sends.get(labels)
        if sent is None:
            sent = self._sends[labels] = self.sent.labels(*labels)
        return _SendSpan(sent, self.send_errors, labels)

    def step(self, actor: ActorFacts, location: str, attempt: int) -> Span | None:
        # By actor type only: a location names loop iterations, so it is unbounded.
        children = self._steps.get(actor.name)
        if children is None:
            children = (self.steps.labels(actor.name), self.step_seconds.labels(actor.name))
            self._steps[actor.name] = children
        return _TimedSpan(*children)

    def commit(self, batch: int) -> Span | None:
        # Called on the SQLite writer thread: unlabelled metrics, no shared dict.
        self.commit_batch.observe(batch)
        return _TimedSpan(self.commits, self.commit_seconds)

    # ------------------------------------------------------------- point events

    def step_failed(self, actor: ActorFacts, location: str, attempt: int, will_retry: bool) -> None:
        (self.step_retries if will_retry else self.step_failures).labels(actor.name).inc()

    def workflow_status(self, actor: ActorFacts, status: str) -> None:
        if status == "completed":
            self.workflows_completed.labels(actor.name).inc()
        elif status == "failed":
            self.workflows_failed.labels(actor.name).inc()

    def message_consumed(self, actor: ActorFacts, queue: str, count: int) -> None:
        self.consumed.labels(actor.name, queue).inc(max(count, 0))

    def event_sent(self, actor: ActorFacts, name: str, args: list[Any], recipients: int) -> None:
        self.events.labels(actor.name, name).inc()
        if recipients > 0:
            self.recipients.labels(actor.name, name).inc(recipients)

    def actor_woke(self, actor: ActorFacts) -> None:
        self.wakes.labels(actor.name).inc()

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        self.sleeps.labels(actor.name, reason).inc()

    def alarm_fired(self, actor: ActorFacts, kind: str, lateness_ms: int) -> None:
        self.alarms.labels(actor.name, kind).inc()
        self.lateness.labels(kind).observe(max(lateness_ms, 0) / 1000)

    def store_error(self, operation: str, error: BaseException) -> None:
        self.store_errors.labels(operation).inc()

    # -------------------------------------------------------------------- scrape

    async def refresh(self, runtime: RuntimeView) -> None:
        """Set the gauges from what ``runtime`` has awake and stored, right now."""
        awake = runtime.dispatch.awake()
        names = [*self.actor_names, *(name for name in awake if name not in self.actor_names)]
        connections = dict.fromkeys(names, 0)
        depth = dict.fromkeys(names, 0)
        for instance in runtime.live_instances():
            connections[instance.name] = connections.get(instance.name, 0) + len(instance.conns)
            queue = instance.queue
            if queue is not None:
                depth[instance.name] = depth.get(instance.name, 0) + len(queue)
        for name in names:
            stored = await runtime.dispatch.count(name)
            here = awake.get(name, 0)
            self.awake.labels(name).set(here)
            self.stored.labels(name).set(stored)
            # Awake ones created since ``awake`` was read may outnumber the count: never < 0.
            self.sleeping.labels(name).set(max(stored - here, 0))
            self.connections.labels(name).set(connections.get(name, 0))
            self.depth.labels(name).set(depth.get(name, 0))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (``CONTENT_TYPE_LATEST``)."""
        return generate_latest(self.registry)

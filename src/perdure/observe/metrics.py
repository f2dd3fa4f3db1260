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
definitions — never actor ids or keys — so the number of series stays bounded. Hooks
add to plain numbers (:mod:`perdure.observe._series`: no lock, no ``.labels()``; the
hot paths keep their series in a dict by label values); ``commit`` runs on the SQLite
writer thread, the only thread that writes the commit series. docs/metrics.md lists
every metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Sized
from time import perf_counter
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest

from perdure.errors import PerdureError
from perdure.observe._series import CounterFamily, Families, Series
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


class _LiveQueue(Protocol):
    """An awake actor's queue: its depth, and its limited queues' counts."""

    def __len__(self) -> int: ...

    def limit_counts(self) -> Mapping[str, tuple[int, int]]: ...


class _LiveActor(Protocol):
    """An actor awake in this process, as a scrape sees it."""

    @property
    def name(self) -> str: ...

    @property
    def conns(self) -> Sized: ...

    @property
    def queue(self) -> _LiveQueue | None: ...

    @property
    def waiting_for_version(self) -> str | None: ...


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
    """Work that is timed into one histogram series (its count counts it)."""

    __slots__ = ("_series", "_started")

    def __init__(self, series: Series) -> None:
        self._series = series
        self._started = perf_counter()

    def end(self, error: BaseException | None = None) -> None:
        self._series.observe(perf_counter() - self._started)


class _ActionSpan(_TimedSpan):
    """One action: counted and timed whatever its outcome; its error counted by code."""

    __slots__ = ("_errors", "_labels")

    def __init__(self, series: Series, errors: CounterFamily, labels: tuple[str, str]) -> None:
        # Not super().__init__: the hot path of every action, and that call costs.
        self._series = series
        self._errors = errors
        self._labels = labels
        self._started = perf_counter()

    def end(self, error: BaseException | None = None) -> None:
        self._series.observe(perf_counter() - self._started)
        if error is not None:
            self._errors.inc((*self._labels, error_code(error)))


class _SendSpan:
    """One queue send: counted once durable; a refused send is counted by its code."""

    __slots__ = ("_labels", "_metrics")

    def __init__(self, metrics: MetricsObserver, labels: tuple[str, str]) -> None:
        self._metrics = metrics
        self._labels = labels

    def end(self, error: BaseException | None = None) -> None:
        if error is None:
            self._metrics.sent.inc(self._labels)
        else:
            self._metrics.send_errors.inc((*self._labels, error_code(error)))


# --------------------------------------------------------------------- observer


class MetricsObserver(Observer):
    """Prometheus metrics of one runtime, in a registry of its own (:attr:`registry`).

    ``actor_names``: the registry's actor types, so that the scrape-time gauges show a
    zero for a type with nothing awake instead of no series at all.
    """

    def __init__(self, actor_names: Iterable[str] = ()) -> None:
        self.actor_names = list(actor_names)
        self.families = Families()
        self._define_work()
        self._define_points()
        self._define_gauges()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.families)
        # The series of the hot paths, by label values (one dict lookup per report).
        self._actions: dict[tuple[str, str], Series] = {}
        self._steps: dict[str, Series] = {}
        self._commit_seconds = self.commit_seconds.get(())
        self._commit_batch = self.commit_batch.get(())

    # ------------------------------------------------------------- definitions

    def _define_work(self) -> None:
        """The metrics of timed work: actions, queue sends, steps, commits."""
        new = self.families
        action = ["actor", "action"]
        self.action_seconds = new.histogram(
            "perdure_action_duration_seconds",
            "Time from an action's start until its output was durable (or it failed).",
            action,
            DURATION_BUCKETS,
        )
        new.totals("perdure_actions", "Actions run, failed or not.", self.action_seconds)
        self.action_errors = new.counter(
            "perdure_action_errors", "Actions that failed, by error code.", [*action, "code"]
        )
        queue = ["actor", "queue"]
        self.sent = new.counter("perdure_queue_messages_sent", "Queue messages sent.", queue)
        self.send_errors = new.counter(
            "perdure_queue_send_errors", "Queue sends refused, by error code.", [*queue, "code"]
        )
        self.consumed = new.counter(
            "perdure_queue_messages_consumed", "Queue messages taken by a receiver.", queue
        )
        self.step_seconds = new.histogram(
            "perdure_workflow_step_duration_seconds",
            "Time a step attempt took, its commit included.",
            ["actor"],
            DURATION_BUCKETS,
        )
        new.totals(
            "perdure_workflow_steps", "Step attempts run (a retry counts).", self.step_seconds
        )
        self.commit_seconds = new.histogram(
            "perdure_store_commit_duration_seconds",
            "Time a store write transaction took.",
            (),
            DURATION_BUCKETS,
        )
        new.totals("perdure_store_commits", "Store write transactions.", self.commit_seconds)
        self.commit_batch = new.histogram(
            "perdure_store_commit_batch_size",
            "Actor commits written in one store transaction (group commit).",
            (),
            BATCH_BUCKETS,
        )

    def _define_points(self) -> None:
        """The metrics of point events: retries, workflow outcomes, events, alarms …"""
        new = self.families
        self.step_retries = new.counter(
            "perdure_workflow_step_retries", "Step attempts that failed and will retry.", ["actor"]
        )
        self.step_failures = new.counter(
            "perdure_workflow_step_failures",
            "Steps that failed for good (retries spent, or a terminal error).",
            ["actor"],
        )
        self.workflows_completed = new.counter(
            "perdure_workflows_completed", "Workflow runs that completed.", ["actor"]
        )
        self.workflows_failed = new.counter(
            "perdure_workflows_failed", "Workflow runs that ended failed.", ["actor"]
        )
        event = ["actor", "event"]
        self.events = new.counter("perdure_events_sent", "Events emitted.", event)
        self.recipients = new.counter(
            "perdure_event_recipients", "Deliveries of events to subscribed connections.", event
        )
        self.wakes = new.counter("perdure_actor_wakes", "Actors woken here.", ["actor"])
        self.sleeps = new.counter(
            "perdure_actor_sleeps", "Actors that left this process, by reason.", ["actor", "reason"]
        )
        self.alarms = new.counter(
            "perdure_alarms_fired",
            "Timers fired (schedules, workflow deadlines).",
            ["actor", "kind"],
        )
        self.lateness = new.histogram(
            "perdure_alarm_lateness_seconds",
            "How long after it was due a timer fired.",
            ["kind"],
            LATENESS_BUCKETS,
        )
        self.store_errors = new.counter(
            "perdure_store_errors", "Failed store operations.", ["operation"]
        )

    def _define_gauges(self) -> None:
        """The gauges a scrape computes (:meth:`refresh`)."""
        new = self.families
        actor = ["actor"]
        self.awake = new.gauge("perdure_actors_awake", "Actors awake in this process.", actor)
        self.stored = new.gauge(
            "perdure_actors_stored", "Actors in the store, awake or not.", actor
        )
        self.sleeping = new.gauge(
            "perdure_actors_sleeping", "Stored actors not awake in this process.", actor
        )
        self.connections = new.gauge(
            "perdure_connections", "Client connections open to actors awake here.", actor
        )
        self.depth = new.gauge(
            "perdure_queue_depth",
            "Messages in the queues of actors awake here (received, uncompleted ones too).",
            actor,
        )
        self.waiting_for_version = new.gauge(
            "perdure_workflows_waiting_for_version",
            "Workflow runs held here because no live node runs the code version they "
            "started on and their history does not replay on this node's (a cluster).",
            actor,
        )
        queue = ["actor", "queue"]
        self.in_progress = new.gauge(
            "perdure_queue_in_progress",
            "Messages of limited queues in progress (leased or held), actors awake here.",
            queue,
        )
        self.waiting_for_slot = new.gauge(
            "perdure_queue_waiting_for_slot",
            "Visible messages of limited queues passed over: their key is at its limit.",
            queue,
        )

    # ---------------------------------------------------------------- timed work

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        labels = (actor.name, action)
        series = self._actions.get(labels)
        if series is None:
            series = self._actions[labels] = self.action_seconds.get(labels)
        return _ActionSpan(series, self.action_errors, labels)

    def queue_send(self, actor: ActorFacts, queue: str) -> Span | None:
        return _SendSpan(self, (actor.name, queue))

    def step(self, actor: ActorFacts, location: str, attempt: int) -> Span | None:
        # By actor type only: a location names loop iterations, so it is unbounded.
        series = self._steps.get(actor.name)
        if series is None:
            series = self._steps[actor.name] = self.step_seconds.get((actor.name,))
        return _TimedSpan(series)

    def commit(self, batch: int) -> Span | None:
        # On the SQLite writer thread: only series made in __init__, no shared dict.
        self._commit_batch.observe(batch)
        return _TimedSpan(self._commit_seconds)

    # ------------------------------------------------------------- point events

    def step_failed(self, actor: ActorFacts, location: str, attempt: int, will_retry: bool) -> None:
        (self.step_retries if will_retry else self.step_failures).inc((actor.name,))

    def workflow_status(self, actor: ActorFacts, status: str) -> None:
        if status == "completed":
            self.workflows_completed.inc((actor.name,))
        elif status == "failed":
            self.workflows_failed.inc((actor.name,))

    def message_consumed(self, actor: ActorFacts, queue: str, count: int) -> None:
        self.consumed.inc((actor.name, queue), max(count, 0))

    def event_sent(self, actor: ActorFacts, name: str, args: list[Any], recipients: int) -> None:
        labels = (actor.name, name)
        self.events.inc(labels)
        if recipients > 0:
            self.recipients.inc(labels, recipients)

    def actor_woke(self, actor: ActorFacts) -> None:
        self.wakes.inc((actor.name,))

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        self.sleeps.inc((actor.name, reason))

    def alarm_fired(self, actor: ActorFacts, kind: str, lateness_ms: int) -> None:
        self.alarms.inc((actor.name, kind))
        self.lateness.get((kind,)).observe(max(lateness_ms, 0) / 1000)

    def store_error(self, operation: str, error: BaseException) -> None:
        self.store_errors.inc((operation,))

    # -------------------------------------------------------------------- scrape

    async def refresh(self, runtime: RuntimeView) -> None:
        """Set the gauges from what ``runtime`` has awake and stored, right now."""
        awake = runtime.dispatch.awake()
        names = [*self.actor_names, *(name for name in awake if name not in self.actor_names)]
        connections = dict.fromkeys(names, 0)
        depth = dict.fromkeys(names, 0)
        held = dict.fromkeys(names, 0)
        limited: dict[tuple[str, str], tuple[int, int]] = {}
        for instance in runtime.live_instances():
            connections[instance.name] = connections.get(instance.name, 0) + len(instance.conns)
            if instance.waiting_for_version is not None:
                held[instance.name] = held.get(instance.name, 0) + 1
            queue = instance.queue
            if queue is not None:
                depth[instance.name] = depth.get(instance.name, 0) + len(queue)
                for name, (busy, waiting) in queue.limit_counts().items():
                    before = limited.get((instance.name, name), (0, 0))
                    limited[instance.name, name] = (before[0] + busy, before[1] + waiting)
        stored = {name: await runtime.dispatch.count(name) for name in names}
        here = {name: awake.get(name, 0) for name in names}
        self.awake.replace({(name,): here[name] for name in names})
        self.stored.replace({(name,): stored[name] for name in names})
        # Awake ones created since ``awake`` was read may outnumber the count: never < 0.
        self.sleeping.replace({(name,): max(stored[name] - here[name], 0) for name in names})
        self.connections.replace({(name,): connections.get(name, 0) for name in names})
        self.depth.replace({(name,): depth.get(name, 0) for name in names})
        self.waiting_for_version.replace({(name,): held.get(name, 0) for name in names})
        # Per queue, summed over the actors and their keys: never a series per key.
        self.in_progress.replace({labels: counts[0] for labels, counts in limited.items()})
        self.waiting_for_slot.replace({labels: counts[1] for labels, counts in limited.items()})

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (``CONTENT_TYPE_LATEST``)."""
        return generate_latest(self.registry)

"""The event log of one live actor (docs/events.md).

Every event the actor broadcasts gets the next number of the actor (``seq``, from 1) and
is staged in the actor's pending commit, so it is written in the same transaction as
the change that emitted it. It is delivered to connections only once that commit is
durable (the commit pipeline calls :meth:`EventLog.durable`): a client never sees an
event that a crash takes back, and a number, once seen, always names the same event.

A connection that negotiated resumption (a *follower*: the perdure clients, the SSE
route) gets every event after its cursor exactly once, in order: first the backlog (from
the recent events kept in memory, or from the store), then live ones, which are held
back while the backlog is read. When retention has removed part of what it asked for,
it is told first (a *gap*), so that it can re-read the actor's state.

Retention: at most ``event_log_max_events`` events younger than ``event_log_max_age``
are readable. Pruning rides on a commit every ``max_events // 8`` events (one range
delete, bounded by the log's size); reads apply the bounds exactly meanwhile.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from perdure.errors import InvalidRequest
from perdure.store.base import EventRecord
from perdure.store.encoding import decode_value, encode_value

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from perdure.runtime.kernel.core import ActorCore

__all__ = [
    "EventLog",
    "EventSink",
    "EventTransport",
    "LoggedEvent",
    "Since",
    "Subscriber",
    "parse_since",
]

# Recent durable events kept in memory: most resumes (a reconnect) are served from here.
_RECENT = 256
# Events read first from the store for a first open (by time), before the whole log.
_TAIL = 16
_SINCE = re.compile(r"(?:s(?P<seq>\d{1,18})|a(?P<age>\d{1,12}))")


@dataclass(frozen=True, slots=True)
class Since:
    """Where a follower starts: after event ``seq``, or (a first open, ``seq`` None) with
    the events emitted in the last ``age_ms`` milliseconds."""

    seq: int | None = None
    age_ms: int = 0


def parse_since(text: str) -> Since:
    """``"s42"`` (after event 42) or ``"a1500"`` (the last 1.5 s); a plain number is a
    sequence number too (``Last-Event-ID``). Anything else: ``events.invalid_since``."""
    if text.isdigit() and len(text) <= 18:
        return Since(seq=int(text))
    match = _SINCE.fullmatch(text)
    if match is None:
        raise InvalidRequest(
            f"Cannot resume events from {text[:40]!r}: expected a sequence number.",
            code="invalid_since",
            group="events",
            metadata={"since": text[:40]},
        )
    seq = match.group("seq")
    return Since(seq=int(seq)) if seq is not None else Since(age_ms=int(match.group("age")))


class LoggedEvent(NamedTuple):
    """A numbered event with its plain arguments."""

    seq: int
    name: str
    args: list[Any]
    emitted_at: int


class EventSink(Protocol):
    """Where a follower's events go (a socket, an SSE stream, an in-process queue)."""

    def event(self, event: LoggedEvent) -> None:
        """Send a numbered event. Must not block."""
        ...

    def resumed(self, start: int) -> None:
        """The events after number ``start`` follow (sent first)."""
        ...

    def gap(self, after: int, resumed_at: int) -> None:
        """Events after ``after`` and before ``resumed_at`` are no longer in the log."""
        ...


class EventTransport(Protocol):
    """How an event reaches a connected client."""

    def send_event(self, name: str, args: list[Any]) -> None:
        """Queue an event for the client. Must not block."""
        ...


class Subscriber(Protocol):
    """A connection as the event log sees it: who it is, the event names it subscribed
    to, and its way to the client."""

    @property
    def id(self) -> str: ...

    @property
    def subscriptions(self) -> Collection[str]: ...

    @property
    def transport(self) -> EventTransport: ...


class _Follower:
    """One resuming connection: its cursor, and what arrives while its backlog is read."""

    __slots__ = ("buffer", "conn", "cursor", "filtered", "sink")

    def __init__(self, conn: Subscriber, sink: EventSink, filtered: bool) -> None:
        self.conn = conn
        self.sink = sink
        # With a can_subscribe hook (the actor's or an event's), only names the
        # connection subscribed to (and so was allowed) are sent; otherwise a
        # follower gets every event of the actor.
        self.filtered = filtered
        self.cursor = 0
        self.buffer: list[LoggedEvent] | None = []

    def push(self, event: LoggedEvent) -> None:
        if self.buffer is not None:
            self.buffer.append(event)
        else:
            self.send(event)

    def send(self, event: LoggedEvent) -> None:
        if event.seq <= self.cursor:
            return  # already sent (the backlog and the held-back events overlap)
        self.cursor = event.seq
        if not self.filtered or event.name in self.conn.subscriptions:
            self.sink.event(event)


class EventLog:
    """Numbers, logs and delivers one live actor's events (see the module docstring)."""

    __slots__ = (
        "_conns",
        "_core",
        "_first_seq",
        "_pending",
        "_prune_every",
        "_pruned_at",
        "_recent",
        "_woke_at",
        "durable_seq",
        "followers",
        "max_age_ms",
        "max_events",
        "seq",
    )

    def __init__(self, core: ActorCore, conns: Mapping[str, Subscriber], seq: int) -> None:
        """``conns``: the actor's open connections, by id; ``seq``: the last number given
        (stored with the actor)."""
        self._core = core
        self._conns = conns
        options = core.options
        self.max_events = options.event_log_max_events
        self.max_age_ms = int(options.event_log_max_age * 1000)
        self._prune_every = max(1, self.max_events // 8)
        self.seq = seq  # the last number given
        self.durable_seq = seq  # the last number whose commit is durable
        self._pruned_at = seq
        # What this instance emitted since it woke is all in _recent while it begins
        # with the first number given here: a first open then needs no store read.
        self._first_seq = seq + 1
        self._woke_at = core.clock.now_ms()
        # Made on the first event: most awake actors of a large fleet never emit one,
        # and two deques cost each of them about 1.5 KB.
        self._pending: deque[LoggedEvent] | None = None
        self._recent: deque[LoggedEvent] | None = None
        self.followers: dict[str, _Follower] = {}

    # ------------------------------------------------------------------ emitting

    def emit(self, name: str, args: list[Any]) -> None:
        """Number an event (validated, plain) and stage it in the pending commit."""
        core = self._core
        seq = self.seq + 1
        now = core.clock.now_ms()
        data = encode_value(args, what=f"event `{name}`", owner=core.label)
        self.seq = seq
        prune = None
        if seq - self._pruned_at >= self._prune_every:
            self._pruned_at = seq
            prune = (seq - self.max_events, now - self.max_age_ms)
        core.commits.put_event(EventRecord(seq, name, data, now), prune)
        pending = self._pending
        if pending is None:
            pending = self._pending = deque()
        pending.append(LoggedEvent(seq, name, args, now))

    def durable(self, through: int) -> None:
        """The commit carrying events up to ``through`` is durable: deliver them."""
        pending = self._pending
        if not pending:
            return
        recent = self._recent
        if recent is None:
            recent = self._recent = deque(maxlen=min(self.max_events, _RECENT))
        while pending and pending[0].seq <= through:
            event = pending.popleft()
            recent.append(event)
            self.durable_seq = event.seq
            self._deliver(event)

    def _deliver(self, event: LoggedEvent) -> None:
        followers = self.followers
        recipients = 0
        for conn in self._conns.values():
            follower = followers.get(conn.id) if followers else None
            if follower is not None:
                follower.push(event)
                recipients += 1
            elif event.name in conn.subscriptions:
                conn.transport.send_event(event.name, event.args)
                recipients += 1
        core = self._core
        core.observer.event_sent(core, event.name, event.args, recipients)

    # ----------------------------------------------------------------- following

    async def follow(self, conn: Subscriber, since: Since, sink: EventSink) -> None:
        """Make ``conn`` a follower: send its backlog (or its gap), then live events."""
        filtered = self._core.definition.subscriptions_guarded
        follower = _Follower(conn, sink, filtered)
        self.followers[conn.id] = follower
        try:
            backlog, gap, start = await self._backlog(since)
        except BaseException:
            self.followers.pop(conn.id, None)
            raise
        sink.resumed(start)
        if gap is not None:
            sink.gap(*gap)
        follower.cursor = start
        for event in backlog:
            follower.send(event)
        held, follower.buffer = follower.buffer or [], None
        for event in held:
            follower.send(event)

    def unfollow(self, conn_id: str) -> None:
        """Forget a follower (its connection closed)."""
        self.followers.pop(conn_id, None)

    async def _backlog(self, since: Since) -> tuple[list[LoggedEvent], tuple[int, int] | None, int]:
        """The readable events a follower from ``since`` has not had, its gap, and the
        number its cursor starts at (the backlog follows it)."""
        durable = self.durable_seq
        now = self._core.clock.now_ms()
        oldest_time = now - self.max_age_ms
        window = max(durable - self.max_events, 0)  # readable: seq > window
        if since.seq is None and since.age_ms <= 0:
            return [], None, durable  # from now
        if since.seq is None:
            recent_time = max(oldest_time, now - since.age_ms)
            events = await self._since_time(recent_time, window, durable)
            return events, None, (events[0].seq - 1 if events else durable)
        after = since.seq
        if after > self.seq:
            # Numbers this actor never gave (its log was reset): start from now.
            return [], (after, durable + 1), durable
        if after >= durable:
            return [], None, after
        events = await self._read(max(after, window), durable)
        events = [e for e in events if e.emitted_at >= oldest_time]
        first = events[0].seq if events else durable + 1
        if first > after + 1:
            return events, (after, first), first - 1
        return events, None, after

    async def _since_time(self, since: int, window: int, through: int) -> list[LoggedEvent]:
        """Durable readable events emitted at or after ``since`` (epoch ms)."""
        recent = self._recent or ()
        # Awake for the whole span: its events are in memory if the memory reaches back
        # to the instance's first event or to before the span.
        if self._woke_at <= since and (
            not recent or recent[0].seq == self._first_seq or recent[0].emitted_at < since
        ):
            return [e for e in recent if e.emitted_at >= since and e.seq <= through]
        # Else the store: the last few events first, which usually reach back far enough.
        tail = max(window, through - _TAIL)
        events = await self._read(tail, through)
        if tail > window and (not events or events[0].emitted_at >= since):
            events = await self._read(window, through)
        return [e for e in events if e.emitted_at >= since]

    async def _read(self, after: int, through: int) -> list[LoggedEvent]:
        """Durable events with ``after < seq <= through``: from memory when it holds
        them all, else from the store."""
        recent = self._recent
        if recent and recent[0].seq <= after + 1:
            return [e for e in recent if after < e.seq <= through]
        core = self._core
        records = await core.store.load_events(core.actor_id, after, max(through - after, 0))
        return [
            LoggedEvent(r.seq, r.name, list(decode_value(r.args)), r.emitted_at)
            for r in records
            if r.seq <= through
        ]

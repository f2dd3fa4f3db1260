"""The commit pipeline of one live actor: every durable write goes through it.

Writes are staged in one pending :class:`~perdure.store.base.ActorCommit` (built here
and nowhere else) and go out with the next *flush*. A flush serialises the state once,
compares it with the last bytes written, and submits what changed together with the
staged queue, history, schedule and alarm writes. Flushes requested in one event-loop
tick share one commit; several commits may be in flight, the store applies them in
submission order (DESIGN §8). So 32 concurrent callers cost one serialisation and one
commit per round, and a read-only action still waits for the commit of any state it
might have read.

A state with a schema (docs/models.md) is validated as a whole and stored in its plain
form; a state that does not fit (``state.invalid``) is refused like one that cannot be
encoded. A failed write (or a state that cannot be encoded or is invalid) *poisons* the
pipeline: every waiter of that commit gets the error and the owner is told once, to drop
the instance (memory is ahead of the store; the next call wakes it from the stored state).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from perdure.errors import ActorAborted, PerdureError
from perdure.schemas import storable_state
from perdure.store.base import (
    ActorCommit,
    EventRecord,
    IdempotencyRecord,
    QueueMessageRecord,
    ScheduleFireRecord,
    ScheduleRecord,
)
from perdure.store.encoding import encode_value
from perdure.store.kv import DB_PAGE_TAG
from perdure.telemetry import ActorFacts, Observers

__all__ = ["CommitPipeline", "CommitSink", "KvSettled", "StateOwner"]

_log = logging.getLogger("perdure.actor")


class CommitSink(Protocol):
    """Where commits go (the store's ``submit``)."""

    def submit(self, commit: ActorCommit) -> asyncio.Future[None]:
        """Queue ``commit``; the future resolves once it is durable."""
        ...


class KvSettled(Protocol):
    """The actor's KV space, as the pipeline tells it which writes are durable."""

    def mark(self) -> int:
        """The number of the last write staged (taken as a commit is submitted)."""
        ...

    def settle(self, mark: int) -> None:
        """The writes numbered up to ``mark`` are durable."""
        ...


class StateOwner(ActorFacts, Protocol):
    """Whose state the commits carry (the live actor)."""

    state: Any
    """The state, encoded at every flush."""

    @property
    def label(self) -> str:
        """Names the actor in the error of a state that cannot be encoded."""
        ...

    observer: Observers
    """Told when a commit made a state or history change durable."""


class CommitPipeline:
    """Stages one actor's writes and submits them as commits (see the module docstring).

    ``state_written`` (if any) is told when a commit carries a changed state;
    ``on_failure`` is told (once) when a write failed. ``state_schema`` (if any) is the
    state's declared type: it is checked and stored in its plain form.
    """

    # One per awake actor: slots instead of a dict (see bench/README.md, memory).
    __slots__ = (
        "_actor_id",
        "_closed",
        "_events_durable",
        "_fence",
        "_kv_settled",
        "_last_commit",
        "_last_state",
        "_next_flush",
        "_on_failure",
        "_owner",
        "_pages",
        "_pending",
        "_poisoned",
        "_state_schema",
        "_state_warning",
        "_state_written",
        "_store",
    )

    def __init__(
        self,
        store: CommitSink,
        actor_id: str,
        owner: StateOwner,
        *,
        last_state: bytes | None,
        fence: int | None,
        state_written: Callable[[], None] | None,
        on_failure: Callable[[BaseException], None],
        state_schema: Any = None,
        events_durable: Callable[[int], None] | None = None,
        state_warning: int = 0,
    ) -> None:
        self._store = store
        # Bytes of encoded state past which one warning is logged; 0 once it has been.
        self._state_warning = state_warning
        self._actor_id = actor_id
        self._owner = owner
        self._state_written = state_written
        self._on_failure = on_failure
        self._state_schema = state_schema
        # Told the last event number of each commit that carried events, once durable.
        self._events_durable = events_durable
        # Every commit after the generation is stored carries it as its fence, so a
        # newer instance elsewhere (one that claimed the actor since) refuses our writes.
        self._fence = fence
        self._last_state = last_state
        self._pending = ActorCommit(actor_id, fence=fence)
        self._pages = 0  # of the pending KV writes, how many are c.db's pages
        self._next_flush: asyncio.Future[None] | None = None
        self._last_commit: asyncio.Future[None] | None = None
        self._closed = False
        self._poisoned = False
        # Told the write mark of each commit that carried KV writes, once durable.
        self._kv_settled: KvSettled | None = None

    def on_events_durable(self, callback: Callable[[int], None]) -> None:
        """Tell ``callback`` the last event number of each commit that carried events,
        once durable (the event log, which is built after the pipeline)."""
        self._events_durable = callback

    # ------------------------------------------------------------------ staging

    def mark_initialized(self) -> None:
        """The actor's first start completed (create_state, on_create)."""
        self._pending.initialized = True

    def store_generation(self, generation: int) -> None:
        """Write ``generation`` with the next commit (unfenced) and fence every later one:
        an actor this runtime has just created is not claimed in the store."""
        self._pending.generation = generation
        self._fence = generation

    def set_wake_at(self, at: int | None) -> None:
        """Write the actor's alarm (``None`` clears it)."""
        pending = self._pending
        pending.set_wake_at = True
        pending.wake_at = at

    def put_message(self, record: QueueMessageRecord, next_id: int) -> None:
        """Add a queue message; ``next_id`` is the id the next one will get."""
        pending = self._pending
        pending.queue_put.append(record)
        pending.queue_next_id = next_id

    def delete_message(self, message_id: int) -> None:
        """Remove a queue message (a put still staged is simply dropped)."""
        self._pending.delete_message(message_id)

    def update_message(self, record: QueueMessageRecord) -> None:
        """Write a queue message's new lease or dead-letter state (a put of the record)."""
        self._pending.update_message(record)

    def write_history(self, puts: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        """Write workflow history entries (encoded, by location); delete locations."""
        pending = self._pending
        pending.history_put.update(puts)
        for location in deletes:
            pending.history_put.pop(location, None)
            pending.history_delete.append(location)

    def put_schedule(self, record: ScheduleRecord) -> None:
        """Insert or replace a schedule (undoing a staged delete of the same id)."""
        pending = self._pending
        pending.schedule_put[record.id] = record
        if record.id in pending.schedule_delete:
            pending.schedule_delete.remove(record.id)

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (dropping a staged put of the same id)."""
        pending = self._pending
        pending.schedule_put.pop(schedule_id, None)
        pending.schedule_delete.append(schedule_id)

    def put_fire(self, fire: ScheduleFireRecord) -> None:
        """Insert or replace a fire record of a recurring job."""
        self._pending.fire_put.append(fire)

    def prune_fires(self, name: str, up_to_seq: int) -> None:
        """Drop job ``name``'s fires with ``seq <= up_to_seq``, staged ones included."""
        pending = self._pending
        # The store applies prunes before puts; a staged put this prune covers must go.
        pending.fire_put = [
            fire for fire in pending.fire_put if fire.name != name or fire.seq > up_to_seq
        ]
        pending.fire_prune.append((name, up_to_seq))

    def put_event(self, record: EventRecord, prune: tuple[int, int] | None) -> None:
        """Log an event (numbered by the caller); ``prune`` is a retention bound."""
        pending = self._pending
        pending.event_put.append(record)
        pending.event_seq = record.seq
        if prune is not None:
            pending.event_prune = prune
            # The store prunes before it puts: staged events already out of the window
            # (a burst in one commit) must not be written either.
            if pending.event_put[0].seq <= prune[0]:
                pending.event_put = [e for e in pending.event_put if e.seq > prune[0]]

    def put_key(self, record: IdempotencyRecord, prune_before: int | None) -> None:
        """Write an idempotency key's record with the effects staged beside it
        (docs/idempotency.md); ``prune_before``: also drop the keys created before it."""
        pending = self._pending
        pending.key_put.append(record)
        if prune_before is not None:
            pending.key_prune = prune_before

    def drop_key(self, key: str) -> None:
        """Unstage idempotency key ``key`` (its request was refused before any effect)."""
        pending = self._pending
        pending.key_put = [record for record in pending.key_put if record.key != key]

    def put_kv(self, key: bytes, value: bytes) -> None:
        """Write a KV record (a staged delete of the key is undone)."""
        pending = self._pending
        pending.kv_delete.discard(key)
        pending.kv_put[key] = value

    def delete_kv(self, key: bytes) -> None:
        """Delete a KV record (a staged put of the key is dropped)."""
        pending = self._pending
        pending.kv_put.pop(key, None)
        pending.kv_delete.add(key)

    def delete_kv_range(self, start: bytes, end: bytes | None) -> None:
        """Delete the KV records in ``[start, end)``; the store applies ranges before
        deletes and puts, so staged ones inside the range must go."""
        pending = self._pending

        def inside(key: bytes) -> bool:
            return key >= start and (end is None or key < end)

        pending.kv_put = {k: v for k, v in pending.kv_put.items() if not inside(k)}
        pending.kv_delete = {k for k in pending.kv_delete if not inside(k)}
        pending.kv_delete_range.append((start, end))

    def put_page(self, key: bytes, value: bytes) -> None:
        """Write a page of the actor's database (a KV record of its own tag)."""
        if key not in self._pending.kv_put:
            self._pages += 1
        self.put_kv(key, value)

    def delete_pages(self, start: bytes, end: bytes) -> None:
        """Delete the database's pages in ``[start, end)`` (it shrank)."""
        self.delete_kv_range(start, end)
        pending = self._pending
        self._pages = sum(1 for key in pending.kv_put if key[:1] == DB_PAGE_TAG) + sum(
            1 for low, _ in pending.kv_delete_range if low[:1] == DB_PAGE_TAG
        )

    def kv_writes(self) -> int:
        """How many of the user's KV writes the next commit carries so far (the
        database's pages aside: ``kv.too_many_writes`` bounds what ``c.kv`` stages)."""
        pending = self._pending
        staged = len(pending.kv_put) + len(pending.kv_delete) + len(pending.kv_delete_range)
        return staged - self._pages

    def on_kv_settled(self, callback: KvSettled) -> None:
        """Tell ``callback`` what each commit that carried KV writes settled, once
        durable: the actor's KV space (made at first use) forgets those writes then."""
        self._kv_settled = callback

    # ----------------------------------------------------------------- flushing

    def close(self) -> None:
        """Refuse every later flush with ``ActorAborted``: the instance has stopped, and
        another may own the actor by now, whose newer data this one must not overwrite."""
        self._closed = True

    def request_flush(self) -> asyncio.Future[None]:
        """A future that resolves when everything done so far is durable.

        Flushes requested in the same event-loop tick share one commit.
        """
        if self._next_flush is None:
            loop = asyncio.get_running_loop()
            self._next_flush = loop.create_future()
            loop.call_soon(self._start_flush)
        return self._next_flush

    def flush_now(self) -> asyncio.Future[None]:
        """Like :meth:`request_flush`, but submit at once (a workflow step's commit).

        With no tick-end flush pending, the store's own future is returned: one future
        and one callback fewer on the hot path of every workflow step.
        """
        if self._next_flush is not None:
            waiter = self._next_flush
            self._start_flush()
            return waiter
        loop = asyncio.get_running_loop()
        if self._closed:
            return _failed(loop, ActorAborted())
        try:
            future = self._submit_pending()
        except Exception as exc:
            return _failed(loop, exc)
        if future is not None:
            return future
        previous = self._last_commit
        if previous is not None and not previous.done():
            return previous  # nothing new, but what the caller did may still be in flight
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    def _start_flush(self) -> None:
        waiter, self._next_flush = self._next_flush, None
        if waiter is None:
            return
        if self._closed:
            # A late flush (an action that outlived the grace period).
            _fail(waiter, ActorAborted())
            return
        try:
            future = self._submit_pending()
        except Exception as exc:
            _fail(waiter, exc)
            return
        if future is None:
            # Nothing new to write, but what the caller read may still be in flight.
            future = self._last_commit
            if future is None or future.done():
                if not waiter.done():
                    waiter.set_result(None)
                return
        future.add_done_callback(functools.partial(_settle, waiter))

    def _submit_pending(self) -> asyncio.Future[None] | None:
        """Submit the pending writes (and the state, if it changed) as one commit.

        Returns the store's future, or ``None`` when there is nothing to write. A state
        that cannot be encoded, or a store that refuses the commit, raises (and poisons
        the pipeline).
        """
        commit, self._pending = self._pending, ActorCommit(self._actor_id, fence=self._fence)
        pages, self._pages = self._pages, 0
        try:
            self._add_state(commit)
        except PerdureError as exc:
            self._pending = commit  # nothing was written: keep its other writes for later
            self._pages = pages
            self._poison(exc)
            raise
        if commit.is_empty():
            return None
        if commit.state is not None:
            self._last_state = commit.state
        try:
            future = self._store.submit(commit)
        except Exception as exc:
            self._poison(exc)
            raise
        # Several commits may be in flight: the store applies them in submission order.
        self._last_commit = future
        future.add_done_callback(self._after_commit)
        settled = self._kv_settled
        if settled is not None and (commit.kv_put or commit.kv_delete or commit.kv_delete_range):
            future.add_done_callback(functools.partial(_after_kv, settled, settled.mark()))
        if commit.event_seq is not None and self._events_durable is not None:
            # Before the callers' callbacks: an action's events precede its response.
            future.add_done_callback(
                functools.partial(_after_events, self._events_durable, commit.event_seq)
            )
        if self._owner.observer.follows_changes and (
            commit.state is not None or commit.history_put or commit.history_delete
        ):
            future.add_done_callback(functools.partial(self._report, commit))
        return future

    def _report(self, commit: ActorCommit, future: asyncio.Future[None]) -> None:
        """Tell the observers what a commit made durable (the inspector's live feed)."""
        if future.cancelled() or future.exception() is not None:
            return
        owner = self._owner
        if commit.history_put or commit.history_delete:
            owner.observer.history_changed(owner, list(commit.history_put), commit.history_delete)
        if commit.state is not None:
            owner.observer.state_changed(owner)

    def _add_state(self, commit: ActorCommit) -> None:
        data = self._encode_state()
        if 0 < self._state_warning < len(data):
            self._warn_large_state(len(data))
        if data != self._last_state:
            commit.state = data
            if self._state_written is not None:
                self._state_written()
                # A change the hook itself made goes into this same commit and does not
                # fire the hook again (as in rivetkit: no endless on_state_change loop).
                after = self._encode_state()
                if after != data:
                    commit.state = after

    def _warn_large_state(self, size: int) -> None:
        """Say once, while the actor is awake, that its state costs every commit."""
        _log.warning(
            "actor %s: its state is %.1f MiB encoded, past state_size_warning (%d bytes); "
            "every commit encodes all of it, so keep large or growing data in c.kv "
            "(perdure docs storage, 'Where to keep an actor's data')",
            self._owner.label,
            size / 1_048_576,
            self._state_warning,
        )
        self._state_warning = 0

    def _encode_state(self) -> bytes:
        owner = self._owner
        if self._state_schema is None:
            return encode_value(owner.state, what="state", owner=owner.label)
        state = owner.state
        if state is not None:
            state = storable_state(self._state_schema, state, owner.label)
        return encode_value(state, what="state", owner=owner.label)

    def _after_commit(self, future: asyncio.Future[None]) -> None:
        if future is self._last_commit:
            self._last_commit = None  # nothing in flight: an idle actor keeps no future
        error = ActorAborted() if future.cancelled() else future.exception()
        if error is not None:
            if not isinstance(error, ActorAborted):
                self._owner.observer.store_error("commit", error)
            self._poison(error)

    def _poison(self, error: BaseException) -> None:
        if not self._poisoned:
            self._poisoned = True
            self._on_failure(error)


def _settle(waiter: asyncio.Future[None], future: asyncio.Future[None]) -> None:
    """Pass a commit's outcome on to a flush's waiter."""
    error = ActorAborted() if future.cancelled() else future.exception()
    if error is None:
        if not waiter.done():
            waiter.set_result(None)
        return
    _fail(waiter, error)


def _after_events(durable: Callable[[int], None], seq: int, future: asyncio.Future[None]) -> None:
    """Deliver a commit's events once it is durable (a failed one drops the instance)."""
    if not future.cancelled() and future.exception() is None:
        durable(seq)


def _after_kv(settled: KvSettled, mark: int, future: asyncio.Future[None]) -> None:
    """Let the KV space forget the writes a durable commit carried."""
    if not future.cancelled() and future.exception() is None:
        settled.settle(mark)


def _fail(waiter: asyncio.Future[None], exc: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(exc if isinstance(exc, Exception) else ActorAborted())


def _failed(loop: asyncio.AbstractEventLoop, error: BaseException) -> asyncio.Future[None]:
    future: asyncio.Future[None] = loop.create_future()
    future.set_exception(error)
    return future

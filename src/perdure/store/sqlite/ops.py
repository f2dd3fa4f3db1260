"""The SQLite write operations of a group commit, and the merged way to apply a batch.

Each :class:`WriteOp` is built on the event loop thread (its rows copied out of the
caller's objects at submission) and applied by :class:`~perdure.store.sqlite.writer.
GroupCommitWriter` inside a transaction it owns.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

from perdure.errors import ActorAlreadyExists
from perdure.keys import serialize_key
from perdure.store._shared import actor_id_taken, actor_missing, message_row
from perdure.store.base import ActorCommit, ActorRecord, ScheduleFireRecord, ScheduleRecord

__all__ = [
    "CallOp",
    "CommitOp",
    "CreateOp",
    "DeleteOp",
    "MissingActor",
    "WriteOp",
    "apply_merged",
]

_SQLITE_CONSTRAINT_UNIQUE = 2067
_SQLITE_CONSTRAINT_PRIMARYKEY = 1555


class WriteOp:
    """One operation of a group commit; ``apply`` runs on the writer thread."""

    __slots__ = ("error", "future", "result")

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self, db: sqlite3.Connection) -> None:
        """Reset the outcome (an op may be replayed alone) and apply the op."""
        self.result = None
        self.error = None
        self.apply(db)

    def apply(self, db: sqlite3.Connection) -> None:
        """Write the op inside the current transaction.

        Expected failures are stored in ``error``; unexpected ones are raised, which makes
        the writer roll back and replay the batch one op at a time.
        """
        raise NotImplementedError


_INSERT_ACTOR = (
    "INSERT INTO actors (actor_id, name, key, created_at, generation, initialized,"
    " input, state, wake_at, queue_next_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class CreateOp(WriteOp):
    """Insert an actor row. Parameters are built at submission: a snapshot of ``record``."""

    __slots__ = ("key", "name", "params")

    def __init__(self, future: asyncio.Future[Any], record: ActorRecord) -> None:
        super().__init__(future)
        self.name = record.name
        self.key = tuple(record.key)
        self.params = (
            record.actor_id,
            record.name,
            serialize_key(self.key),
            record.created_at,
            record.generation,
            1 if record.initialized else 0,
            record.input,
            record.state,
            record.wake_at,
            record.queue_next_id,
        )

    def apply(self, db: sqlite3.Connection) -> None:
        try:
            db.execute(_INSERT_ACTOR, self.params)
        except sqlite3.IntegrityError as exc:
            if exc.sqlite_errorcode == _SQLITE_CONSTRAINT_UNIQUE:
                self.error = ActorAlreadyExists(self.name, self.key)
            elif exc.sqlite_errorcode == _SQLITE_CONSTRAINT_PRIMARYKEY:
                self.error = actor_id_taken(str(self.params[0]))
            else:
                raise


_UPDATE_SQL: dict[tuple[tuple[str, ...], bool], str] = {}
_EXISTS_SQL = "SELECT 1 FROM actors WHERE actor_id = ?"
_EXISTS_FENCED_SQL = "SELECT 1 FROM actors WHERE actor_id = ? AND generation = ?"
_QUEUE_PUT_SQL = (
    "INSERT OR REPLACE INTO queue_messages (actor_id, id, name, body, created_at, trace,"
    " attempts, visible_at, dead_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_QUEUE_DELETE_SQL = "DELETE FROM queue_messages WHERE actor_id = ? AND id = ?"
_HISTORY_PUT_SQL = (
    "INSERT INTO workflow_history (actor_id, location, entry) VALUES (?, ?, ?)"
    " ON CONFLICT (actor_id, location) DO UPDATE SET entry = excluded.entry"
)
_HISTORY_DELETE_SQL = "DELETE FROM workflow_history WHERE actor_id = ? AND location = ?"
_SCHEDULE_PUT_SQL = (
    "INSERT OR REPLACE INTO schedules (actor_id, id, kind, action, args, run_at, created_at,"
    " name, expression, timezone, interval_ms, max_history, last_run_at, fire_seq,"
    " running_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SCHEDULE_DELETE_SQL = "DELETE FROM schedules WHERE actor_id = ? AND id = ?"
_FIRE_PUT_SQL = (
    "INSERT OR REPLACE INTO schedule_fires (actor_id, name, seq, action, scheduled_at,"
    " fired_at, result, finished_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_FIRE_PRUNE_SQL = "DELETE FROM schedule_fires WHERE actor_id = ? AND name = ? AND seq <= ?"
_EVENT_PUT_SQL = (
    "INSERT OR REPLACE INTO actor_events (actor_id, seq, name, args, emitted_at)"
    " VALUES (?, ?, ?, ?, ?)"
)
# Retention: one range of the actor's rows (the log is bounded, so is the scan).
_EVENT_PRUNE_SQL = "DELETE FROM actor_events WHERE actor_id = ? AND (seq <= ? OR emitted_at < ?)"
_KEY_PUT_SQL = (
    "INSERT OR REPLACE INTO idempotency_keys (actor_id, key, fingerprint, created_at, answer)"
    " VALUES (?, ?, ?, ?, ?)"
)
_KEY_PRUNE_SQL = "DELETE FROM idempotency_keys WHERE actor_id = ? AND created_at < ?"
_KV_DELETE_RANGE_SQL = "DELETE FROM actor_kv WHERE actor_id = ? AND key >= ? AND key < ?"
_KV_DELETE_FROM_SQL = "DELETE FROM actor_kv WHERE actor_id = ? AND key >= ?"
_KV_DELETE_SQL = "DELETE FROM actor_kv WHERE actor_id = ? AND key = ?"
_KV_PUT_SQL = "INSERT OR REPLACE INTO actor_kv (actor_id, key, value) VALUES (?, ?, ?)"


def _update_sql(columns: tuple[str, ...], fenced: bool) -> str:
    """``UPDATE actors SET …`` for these columns (and ``AND generation = ?`` if fenced);
    cached, at most 128 variants exist."""
    sql = _UPDATE_SQL.get((columns, fenced))
    if sql is None:
        assignments = ", ".join(f"{column} = ?" for column in columns)
        sql = f"UPDATE actors SET {assignments} WHERE actor_id = ?"
        if fenced:
            sql += " AND generation = ?"
        _UPDATE_SQL[(columns, fenced)] = sql
    return sql


class CommitOp(WriteOp):
    """Apply one :class:`ActorCommit`; its rows are copied out at submission."""

    __slots__ = (
        "actor_id",
        "event_prune",
        "event_put",
        "exists_params",
        "exists_sql",
        "history_delete",
        "history_put",
        "key_prune",
        "key_put",
        "kv_delete",
        "kv_delete_from",
        "kv_delete_range",
        "kv_put",
        "queue_delete",
        "queue_put",
        "schedule_writes",
        "update_params",
        "update_sql",
    )

    def __init__(self, future: asyncio.Future[Any], commit: ActorCommit) -> None:
        super().__init__(future)
        actor_id = self.actor_id = commit.actor_id
        columns, values = _actor_changes(commit)
        fence = commit.fence
        self.update_sql = _update_sql(columns, fence is not None) if columns else None
        key = (actor_id,) if fence is None else (actor_id, fence)
        self.update_params = (*values, *key)
        self.exists_sql = _EXISTS_SQL if fence is None else _EXISTS_FENCED_SQL
        self.exists_params = key
        # Most commits leave most of these empty: skip building what would stay empty.
        put, delete = commit.queue_put, commit.queue_delete
        self.queue_put = [(actor_id, *message_row(m)) for m in put] if put else ()
        self.queue_delete = [(actor_id, message_id) for message_id in delete] if delete else ()
        history, gone = commit.history_put, commit.history_delete
        self.history_put = [(actor_id, loc, e) for loc, e in history.items()] if history else ()
        self.history_delete = [(actor_id, loc) for loc in gone] if gone else ()
        self.schedule_writes = _schedule_writes(commit)
        events, prune = commit.event_put, commit.event_prune
        self.event_put = (
            [(actor_id, e.seq, e.name, e.args, e.emitted_at) for e in events] if events else ()
        )
        self.event_prune = () if prune is None else [(actor_id, *prune)]
        keys, bound = commit.key_put, commit.key_prune
        self.key_put = (
            [(actor_id, k.key, k.fingerprint, k.created_at, k.answer) for k in keys] if keys else ()
        )
        self.key_prune = () if bound is None else [(actor_id, bound)]
        self._kv_rows(commit)

    def _kv_rows(self, commit: ActorCommit) -> None:
        """The KV rows of the commit: ranges, then deletes, then puts (the contract's
        order, kept by the order of ``_SEGMENT_ROWS`` too)."""
        actor_id = commit.actor_id
        ranges, gone, put = commit.kv_delete_range, commit.kv_delete, commit.kv_put
        self.kv_delete_range = [(actor_id, s, e) for s, e in ranges if e is not None]
        self.kv_delete_from = [(actor_id, s) for s, e in ranges if e is None]
        self.kv_delete = [(actor_id, key) for key in gone] if gone else ()
        self.kv_put = [(actor_id, key, value) for key, value in put.items()] if put else ()

    def apply(self, db: sqlite3.Connection) -> None:
        # The actor row goes first: if it is missing, nothing of this commit is written.
        if self.update_sql is not None:
            found = db.execute(self.update_sql, self.update_params).rowcount > 0
        else:
            found = bool(db.execute(self.exists_sql, self.exists_params).fetchall())
        if not found:
            self.error = actor_missing(self.actor_id)
            return
        if self.queue_put:
            db.executemany(_QUEUE_PUT_SQL, self.queue_put)
        if self.queue_delete:
            db.executemany(_QUEUE_DELETE_SQL, self.queue_delete)
        if self.history_put:
            db.executemany(_HISTORY_PUT_SQL, self.history_put)
        if self.history_delete:
            db.executemany(_HISTORY_DELETE_SQL, self.history_delete)
        for sql, rows in self.schedule_writes:
            db.executemany(sql, rows)
        if self.event_prune:
            db.executemany(_EVENT_PRUNE_SQL, self.event_prune)
        if self.event_put:
            db.executemany(_EVENT_PUT_SQL, self.event_put)
        if self.key_prune:
            db.executemany(_KEY_PRUNE_SQL, self.key_prune)
        if self.key_put:
            db.executemany(_KEY_PUT_SQL, self.key_put)
        if self.kv_delete_range:
            db.executemany(_KV_DELETE_RANGE_SQL, self.kv_delete_range)
        if self.kv_delete_from:
            db.executemany(_KV_DELETE_FROM_SQL, self.kv_delete_from)
        if self.kv_delete:
            db.executemany(_KV_DELETE_SQL, self.kv_delete)
        if self.kv_put:
            db.executemany(_KV_PUT_SQL, self.kv_put)


def _schedule_writes(commit: ActorCommit) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The schedule statements of a commit, in contract order: deletes and prunes first."""
    if not (commit.schedule_put or commit.schedule_delete or commit.fire_put or commit.fire_prune):
        return []
    actor_id = commit.actor_id
    writes: list[tuple[str, list[tuple[Any, ...]]]] = []
    if commit.schedule_delete:
        writes.append((_SCHEDULE_DELETE_SQL, [(actor_id, i) for i in commit.schedule_delete]))
    if commit.schedule_put:
        schedules = [(actor_id, *_schedule_row(s)) for s in commit.schedule_put.values()]
        writes.append((_SCHEDULE_PUT_SQL, schedules))
    if commit.fire_prune:
        writes.append((_FIRE_PRUNE_SQL, [(actor_id, n, seq) for n, seq in commit.fire_prune]))
    if commit.fire_put:
        fires = [(actor_id, *_fire_row(f)) for f in commit.fire_put]
        writes.append((_FIRE_PUT_SQL, fires))
    return writes


def _schedule_row(s: ScheduleRecord) -> tuple[Any, ...]:
    """A schedule's columns after ``actor_id``, in ``_SCHEDULE_PUT_SQL`` order."""
    cadence = (s.expression, s.timezone, s.interval_ms)
    progress = (s.max_history, s.last_run_at, s.fire_seq, s.running_seq)
    return (s.id, s.kind, s.action, s.args, s.run_at, s.created_at, s.name, *cadence, *progress)


def _fire_row(f: ScheduleFireRecord) -> tuple[Any, ...]:
    """A fire's columns after ``actor_id``, in ``_FIRE_PUT_SQL`` order."""
    return (f.name, f.seq, f.action, f.scheduled_at, f.fired_at, f.result, f.finished_at, f.error)


def _actor_changes(commit: ActorCommit) -> tuple[tuple[str, ...], list[object]]:
    """The ``actors`` columns a commit sets, and their values."""
    columns: list[str] = []
    values: list[object] = []
    if commit.state is not None:
        columns.append("state")
        values.append(commit.state)
    if commit.initialized is not None:
        columns.append("initialized")
        values.append(1 if commit.initialized else 0)
    if commit.generation is not None:
        columns.append("generation")
        values.append(commit.generation)
    if commit.set_wake_at:
        columns.append("wake_at")
        values.append(commit.wake_at)
    if commit.queue_next_id is not None:
        columns.append("queue_next_id")
        values.append(commit.queue_next_id)
    if commit.event_seq is not None:
        columns.append("event_seq")
        values.append(commit.event_seq)
    return tuple(columns), values


class DeleteOp(WriteOp):
    """Delete an actor and all its rows; the result says if it existed."""

    __slots__ = ("actor_id",)

    def __init__(self, future: asyncio.Future[Any], actor_id: str) -> None:
        super().__init__(future)
        self.actor_id = actor_id

    def apply(self, db: sqlite3.Connection) -> None:
        params = (self.actor_id,)
        self.result = db.execute("DELETE FROM actors WHERE actor_id = ?", params).rowcount > 0
        db.execute("DELETE FROM queue_messages WHERE actor_id = ?", params)
        db.execute("DELETE FROM workflow_history WHERE actor_id = ?", params)
        db.execute("DELETE FROM schedules WHERE actor_id = ?", params)
        db.execute("DELETE FROM schedule_fires WHERE actor_id = ?", params)
        db.execute("DELETE FROM actor_events WHERE actor_id = ?", params)
        db.execute("DELETE FROM idempotency_keys WHERE actor_id = ?", params)
        db.execute("DELETE FROM actor_kv WHERE actor_id = ?", params)


class CallOp(WriteOp):
    """Run a function on the write connection (diagnostics such as pragmas)."""

    __slots__ = ("function",)

    def __init__(
        self, future: asyncio.Future[Any], function: Callable[[sqlite3.Connection], Any]
    ) -> None:
        super().__init__(future)
        self.function = function

    def apply(self, db: sqlite3.Connection) -> None:
        self.result = self.function(db)


class MissingActor(Exception):
    """A merged write found an actor row missing: replay the batch op by op."""


def apply_merged(db: sqlite3.Connection, ops: list[WriteOp]) -> None:
    """Apply a batch with one statement per kind of row where possible.

    Commits of distinct actors touch disjoint rows, so their rows can be written in any
    order: each run of commits with no actor repeated (a segment) is written as one
    ``executemany`` per statement. A repeated actor starts a new segment, which keeps
    that actor's commits in submission order. Other ops are applied alone, in place.
    """
    segment: list[CommitOp] = []
    actors: set[str] = set()
    for op in ops:
        if isinstance(op, CommitOp) and op.actor_id not in actors:
            segment.append(op)
            actors.add(op.actor_id)
            continue
        if segment:
            _write_segment(db, segment)
            segment, actors = [], set()
        if isinstance(op, CommitOp):
            segment.append(op)
            actors.add(op.actor_id)
        else:
            op.run(db)
    if segment:
        _write_segment(db, segment)


def _write_segment(db: sqlite3.Connection, segment: list[CommitOp]) -> None:
    """Write commits of distinct actors; raise ``MissingActor`` before writing any
    other row if one of their actors is gone (the batch is then replayed op by op)."""
    updates: dict[str, list[tuple[object, ...]]] = {}
    for op in segment:
        op.result = op.error = None
        if op.update_sql is None:
            if not db.execute(op.exists_sql, op.exists_params).fetchall():
                raise MissingActor(op.actor_id)
        else:
            updates.setdefault(op.update_sql, []).append(op.update_params)
    for sql, rows in updates.items():
        if db.executemany(sql, rows).rowcount != len(rows):
            raise MissingActor(sql)
    for sql, attribute in _SEGMENT_ROWS:
        rows = [row for op in segment for row in getattr(op, attribute)]
        if rows:
            db.executemany(sql, rows)
    for op in segment:
        for sql, schedule_rows in op.schedule_writes:
            db.executemany(sql, schedule_rows)


# The per-commit rows written by one statement per segment, in CommitOp.apply's order.
_SEGMENT_ROWS = (
    (_QUEUE_PUT_SQL, "queue_put"),
    (_QUEUE_DELETE_SQL, "queue_delete"),
    (_HISTORY_PUT_SQL, "history_put"),
    (_HISTORY_DELETE_SQL, "history_delete"),
    (_EVENT_PRUNE_SQL, "event_prune"),
    (_EVENT_PUT_SQL, "event_put"),
    (_KEY_PRUNE_SQL, "key_prune"),
    (_KEY_PUT_SQL, "key_put"),
    (_KV_DELETE_RANGE_SQL, "kv_delete_range"),
    (_KV_DELETE_FROM_SQL, "kv_delete_from"),
    (_KV_DELETE_SQL, "kv_delete"),
    (_KV_PUT_SQL, "kv_put"),
)

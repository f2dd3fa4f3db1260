"""The SQLite write path: one thread, one connection, group commit.

Writes from every actor go through one :class:`GroupCommitWriter`. Its thread takes
whatever has queued up (up to ``max_batch`` operations), applies it all in one
transaction, commits once, and settles the batch's futures with one
``call_soon_threadsafe`` per event loop. While a transaction is written, new operations
queue up for the next batch, so the commit cost is shared by everyone who waited.

Commits (not creates or deletes) take a shorter way when they can: the commits accepted
during one event-loop iteration are written together at its end, on the loop thread,
if the writer thread is idle and nothing submitted earlier is still unwritten (two
counters and a lock keep that exact, so per-actor order holds). On a virtual machine a
hand-off to another thread and back costs about four SQLite transactions; this way a
lone workflow step pays one transaction, and many actors' steps still share one. The
price: SQLite's automatic WAL checkpoint sometimes runs on the loop thread (a few ms).

Failures are isolated without slowing the common path. The two expected failures need no
rollback: a duplicate ``INSERT`` is undone by SQLite at statement level (the transaction
goes on), and a commit first ``UPDATE``-s its actor row, so a missing actor
(``rowcount == 0``) is detected before anything of that commit is written. Any other
error rolls the batch back and replays each operation in its own transaction, so only
the operation that fails gets the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perdure.errors import ActorAlreadyExists, InternalError
from perdure.keys import serialize_key
from perdure.store._shared import StoreClosed, actor_id_taken, actor_missing
from perdure.store.base import ActorCommit, ActorRecord, ScheduleFireRecord, ScheduleRecord
from perdure.store.migrations import apply_sqlite_migrations

__all__ = [
    "CallOp",
    "CommitOp",
    "CreateOp",
    "DeleteOp",
    "GroupCommitWriter",
    "WriteOp",
    "connect",
]

_SQLITE_CONSTRAINT_UNIQUE = 2067
_SQLITE_CONSTRAINT_PRIMARYKEY = 1555


def _enable_wal(db: sqlite3.Connection) -> None:
    """Switch to WAL, retrying briefly: the switch needs a lock that SQLite's busy handler
    does not wait for when another process is creating the same file at the same moment."""
    for attempt in range(50):
        try:
            # fetchall(): pragmas that answer with a row are run to completion.
            db.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.02)


def connect(target: str, *, uri: bool = False, shared: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode: transactions are begun explicitly.

    ``shared``: used from more than one thread, never at the same time (a lock guards it).
    """
    db = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=not shared)
    # Readers and the writer never wait on each other in WAL mode, but a checkpoint or a
    # second process can hold a lock briefly; wait for it rather than fail.
    db.execute("PRAGMA busy_timeout = 5000").fetchall()
    return db


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


_UPDATE_SQL: dict[tuple[str, ...], str] = {}
_EXISTS_SQL = "SELECT 1 FROM actors WHERE actor_id = ?"
_QUEUE_PUT_SQL = (
    "INSERT OR REPLACE INTO queue_messages (actor_id, id, name, body, created_at)"
    " VALUES (?, ?, ?, ?, ?)"
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


def _update_sql(columns: tuple[str, ...]) -> str:
    """``UPDATE actors SET …`` for these columns; cached, at most 32 variants exist."""
    sql = _UPDATE_SQL.get(columns)
    if sql is None:
        assignments = ", ".join(f"{column} = ?" for column in columns)
        sql = _UPDATE_SQL[columns] = f"UPDATE actors SET {assignments} WHERE actor_id = ?"
    return sql


class CommitOp(WriteOp):
    """Apply one :class:`ActorCommit`; its rows are copied out at submission."""

    __slots__ = (
        "actor_id",
        "history_delete",
        "history_put",
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
        self.update_sql = _update_sql(columns) if columns else None
        self.update_params = (*values, actor_id)
        # Most commits leave most of these empty: skip building what would stay empty.
        put, delete = commit.queue_put, commit.queue_delete
        self.queue_put = (
            [(actor_id, m.id, m.name, m.body, m.created_at) for m in put] if put else ()
        )
        self.queue_delete = [(actor_id, message_id) for message_id in delete] if delete else ()
        history, gone = commit.history_put, commit.history_delete
        self.history_put = [(actor_id, loc, e) for loc, e in history.items()] if history else ()
        self.history_delete = [(actor_id, loc) for loc in gone] if gone else ()
        self.schedule_writes = _schedule_writes(commit)

    def apply(self, db: sqlite3.Connection) -> None:
        # The actor row goes first: if it is missing, nothing of this commit is written.
        if self.update_sql is not None:
            found = db.execute(self.update_sql, self.update_params).rowcount > 0
        else:
            found = bool(db.execute(_EXISTS_SQL, (self.actor_id,)).fetchall())
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


class _StopOp(WriteOp):
    """Sentinel: everything queued before it is written, then the thread ends."""

    __slots__ = ()

    def apply(self, db: sqlite3.Connection) -> None:  # pragma: no cover - never applied
        raise AssertionError("the stop sentinel is never applied")


class GroupCommitWriter:
    """Owns the write connection and its thread; see the module docstring."""

    def __init__(self, path: Path, *, synchronous: str, max_batch: int = 256) -> None:
        self._path = path
        self._synchronous = synchronous
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[WriteOp] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="perdure-sqlite-writer")
        # A daemon thread so a program that forgets close() still exits; its unawaited
        # writes are lost, as they would be on a crash.
        self._thread.daemon = True
        self._accepting = False
        self._failure: BaseException | None = None
        self._ready: asyncio.Future[None] | None = None
        self._inflight: list[WriteOp] = []
        # The write connection is used by the writer thread and, for the inline fast path,
        # by the event loop thread: never both at once (this lock), and the inline path
        # only when nothing submitted earlier is still unwritten (the two counters).
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()
        self._submitted = 0
        self._written = 0
        self._tick: list[WriteOp] = []  # commits accepted in this loop iteration

    async def start(self) -> None:
        """Start the thread; it connects and migrates. Raises what migration raised."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._thread.start()
        try:
            await self._ready
        except BaseException:
            # Failed (the thread has ended) or cancelled (it may be serving by now): a
            # stop sentinel ends it in either case, and is never read in the first.
            self._queue.put(_StopOp(loop.create_future()))
            self._thread.join()
            raise
        self._accepting = True

    def submit(self, op: WriteOp) -> None:
        """Queue ``op`` for the writer thread (called on the event loop thread)."""
        self._check_accepting()
        if self._tick:
            self._end_of_tick()  # commits accepted earlier go first
        self._enqueue(op)

    def _check_accepting(self) -> None:
        if self._failure is not None:
            raise InternalError("The SQLite writer thread has failed.") from self._failure
        if not self._accepting:
            raise StoreClosed("SQLite")

    def _enqueue(self, op: WriteOp) -> None:
        self._submitted += 1
        self._queue.put(op)

    def submit_commit(self, op: WriteOp) -> None:
        """Accept a commit; the commits of one event-loop iteration are written together
        at its end (group commit), on the loop thread if the writer is idle."""
        self._check_accepting()
        self._tick.append(op)
        if len(self._tick) == 1:
            op.future.get_loop().call_soon(self._end_of_tick)

    def _end_of_tick(self) -> None:
        ops, self._tick = self._tick, []
        if ops and not self._write_inline(ops):
            for op in ops:
                self._enqueue(op)

    def _write_inline(self, ops: list[WriteOp]) -> bool:
        """Write ``ops`` now, on the event loop thread, if the writer is idle.

        A lone commit then costs one SQLite transaction instead of two thread hand-offs
        (about 100 µs on a virtual machine). Only when everything submitted before has
        been written, so commits stay in submission order; otherwise returns False and
        the caller queues the ops for the writer thread.
        """
        db = self._db
        if db is None or self._failure is not None or not self._accepting:
            return False
        if self._submitted != self._written or not self._db_lock.acquire(blocking=False):
            return False
        try:
            if self._submitted != self._written or self._db is not db:
                return False
            self._write_batch(db, ops)
        finally:
            self._db_lock.release()
        # Settled now: every op here was accepted by submit_commit, which never writes
        # synchronously, so each caller holds a pending future and has yielded (or will)
        # to await it; its task resumes in the next iteration. Settling one iteration
        # later would stretch every actor's step cycle by a third and shrink the groups.
        _resolve(ops)
        return True

    async def stop(self) -> None:
        """Write everything accepted so far, close the connection, end the thread."""
        if self._tick:
            self._end_of_tick()  # accepted in this iteration: written before the stop
        self._accepting = False
        if self._thread.is_alive():
            stop = _StopOp(asyncio.get_running_loop().create_future())
            self._queue.put(stop)
            try:
                await stop.future
            except InternalError:
                if self._failure is None:
                    raise
                # The thread died after the stop was queued; it already failed every op.
        self._thread.join()

    # --- writer thread -------------------------------------------------------------

    def _run(self) -> None:
        assert self._ready is not None
        try:
            db = self._open_connection()
        except BaseException as exc:
            _settle_one(self._ready, exc)
            return
        self._db = db
        _settle_one(self._ready, None)
        stop: WriteOp | None = None
        try:
            stop = self._serve(db)
        except BaseException as exc:
            self._fail_all(exc)
            raise
        finally:
            with self._db_lock:
                self._db = None
                db.close()
            if stop is not None:
                _settle_batch([stop])  # only now: close() returns after the file is closed

    def _open_connection(self) -> sqlite3.Connection:
        db = connect(str(self._path), shared=True)
        try:
            _enable_wal(db)
            db.execute(f"PRAGMA synchronous = {self._synchronous}").fetchall()
            # Keep the WAL file from staying huge after a burst of writes.
            db.execute("PRAGMA journal_size_limit = 67108864").fetchall()
            apply_sqlite_migrations(db)
        except BaseException:
            db.close()
            raise
        return db

    def _serve(self, db: sqlite3.Connection) -> WriteOp:
        """Write batches until the stop sentinel arrives; return it."""
        while True:
            batch = self._inflight = self._take_batch()
            stop = batch[-1] if isinstance(batch[-1], _StopOp) else None
            ops = batch[:-1] if stop is not None else batch
            if ops:
                with self._db_lock:
                    self._write_batch(db, ops)
                    self._written += len(ops)
                _settle_batch(ops)
            self._inflight = []
            if stop is not None:
                return stop

    def _take_batch(self) -> list[WriteOp]:
        """Block for one op, then take what else is queued, up to the cap or a stop."""
        batch = [self._queue.get()]
        while len(batch) < self._max_batch and not isinstance(batch[-1], _StopOp):
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write_batch(self, db: sqlite3.Connection, ops: list[WriteOp]) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            if len(ops) == 1:
                ops[0].run(db)
            else:
                _apply_merged(db, ops)
            db.execute("COMMIT")
            return
        except Exception as exc:
            _rollback(db)
            if len(ops) == 1:
                ops[0].result, ops[0].error = None, exc
                return
        # Something unexpected failed: find it by giving every op its own transaction.
        for op in ops:
            self._write_alone(db, op)

    def _write_alone(self, db: sqlite3.Connection, op: WriteOp) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            op.run(db)
            db.execute("COMMIT")
        except Exception as exc:
            _rollback(db)
            op.result, op.error = None, exc

    def _fail_all(self, exc: BaseException) -> None:
        """After a fatal error, fail every op in flight or queued so nobody waits forever."""
        self._failure = exc
        self._accepting = False
        ops = self._inflight
        while True:
            try:
                ops.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for op in ops:
            op.result = None
            op.error = InternalError("The SQLite writer thread has failed.")
            op.error.__cause__ = exc
        _settle_batch(ops)


class _MissingActor(Exception):
    """A merged write found an actor row missing: replay the batch op by op."""


def _apply_merged(db: sqlite3.Connection, ops: list[WriteOp]) -> None:
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
    """Write commits of distinct actors; raise ``_MissingActor`` before writing any
    other row if one of their actors is gone (the batch is then replayed op by op)."""
    updates: dict[str, list[tuple[object, ...]]] = {}
    for op in segment:
        op.result = op.error = None
        if op.update_sql is None:
            if not db.execute(_EXISTS_SQL, (op.actor_id,)).fetchall():
                raise _MissingActor(op.actor_id)
        else:
            updates.setdefault(op.update_sql, []).append(op.update_params)
    for sql, rows in updates.items():
        if db.executemany(sql, rows).rowcount != len(rows):
            raise _MissingActor(sql)
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
)


def _rollback(db: sqlite3.Connection) -> None:
    # Some errors (a full disk, for one) end the transaction by themselves.
    if db.in_transaction:
        db.execute("ROLLBACK")


def _settle_batch(ops: list[WriteOp]) -> None:
    """Hand outcomes to the event loop(s): one thread-safe call per loop, not per op."""
    by_loop: dict[asyncio.AbstractEventLoop, list[WriteOp]] = {}
    for op in ops:
        by_loop.setdefault(op.future.get_loop(), []).append(op)
    for loop, group in by_loop.items():
        # A closed loop raises RuntimeError: nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, group)


def _resolve(ops: list[WriteOp]) -> None:
    for op in ops:
        future = op.future
        if future.done():
            continue  # the caller was cancelled; the write happened anyway
        if op.error is not None:
            future.set_exception(op.error)
        else:
            future.set_result(op.result)


def _settle_one(future: asyncio.Future[None], error: BaseException | None) -> None:
    op = WriteOp(future)
    op.error = error
    _settle_batch([op])

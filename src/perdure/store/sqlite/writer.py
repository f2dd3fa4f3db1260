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
lone workflow step pays one transaction, and many actors' steps still share one. While
the store is quiet a lone commit is even written as it is submitted (submit_commit). WAL
checkpoints run on a thread of their own (:mod:`perdure.store.sqlite.checkpoint`), so
the loop thread does not stall on them.

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
from pathlib import Path
from typing import Any

from perdure.errors import InternalError, StoreClosed, StoreFull
from perdure.store._shared import first_error, settle_ops
from perdure.store.migrations import apply_sqlite_migrations
from perdure.store.sqlite.checkpoint import FALLBACK_AUTOCHECKPOINT_PAGES, Checkpointer
from perdure.store.sqlite.ops import WriteOp, apply_merged
from perdure.telemetry import NO_OBSERVER, Observer

__all__ = ["GroupCommitWriter", "connect"]

# Commits written at once in a row while the store is quiet (see submit_commit): a lone
# workflow yields to the loop at least once per this many steps.
_AT_ONCE_STREAK = 16


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


class _StopOp(WriteOp):
    """Sentinel: everything queued before it is written, then the thread ends."""

    __slots__ = ()

    def apply(self, db: sqlite3.Connection) -> None:  # pragma: no cover - never applied
        raise AssertionError("the stop sentinel is never applied")


class GroupCommitWriter:
    """Owns the write connection and its thread; see the module docstring."""

    def __init__(self, path: Path, *, synchronous: str, max_batch: int = 256) -> None:
        # Told about every batch (the store passes its observer on; see telemetry).
        self.observer: Observer = NO_OBSERVER
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
        self._quiet = False  # the last group written at the end of an iteration was one
        self._at_once = 0  # commits written at once in this iteration
        self._at_once_task: asyncio.Task[Any] | None = None  # the task that wrote them
        self.checkpointer = Checkpointer(path)

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
        self.checkpointer.start()

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
        at its end (group commit), on the loop thread if the writer is idle.

        While the store is quiet (the last group was one commit), the first commit of an
        iteration is written at once instead, and so are the next ones of the same task,
        up to ``_AT_ONCE_STREAK``: a lone workflow's steps then find their commit
        durable without waiting for the iteration to end, while commits of other tasks
        in that iteration still form one group, and a workflow running step after step
        still lets the loop run.
        """
        self._check_accepting()
        if (
            self._quiet
            and not self._tick
            and self._may_write_at_once(op)
            and self._write_inline([op])
        ):
            return
        self._tick.append(op)
        if len(self._tick) == 1:
            op.future.get_loop().call_soon(self._end_of_tick)

    def _may_write_at_once(self, op: WriteOp) -> bool:
        task = asyncio.current_task()
        if self._at_once == 0:
            self._at_once_task = task
            op.future.get_loop().call_soon(self._iteration_ran)
        elif task is not self._at_once_task or self._at_once >= _AT_ONCE_STREAK:
            return False
        self._at_once += 1
        return True

    def _iteration_ran(self) -> None:
        self._at_once = 0
        self._at_once_task = None

    def _end_of_tick(self) -> None:
        ops, self._tick = self._tick, []
        self._quiet = len(ops) == 1
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
        # Settled now. At the end of an iteration, each caller holds a pending future
        # and has yielded (or will) to await it; its task resumes in the next iteration.
        # Settling one iteration later would stretch every actor's step cycle by a third
        # and shrink the groups. Written at once (submit_commit), the caller gets a done
        # future and goes on without yielding.
        settle_ops(ops)
        return True

    async def stop(self) -> None:
        """Write everything accepted so far, close the connection, end the thread."""
        if self._tick:
            self._end_of_tick()  # accepted in this iteration: written before the stop
        self._accepting = False
        # Before the write connection closes: closing it is the final checkpoint.
        await asyncio.to_thread(self.checkpointer.stop)
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
            # Checkpoints are the checkpoint thread's job; this is only the fallback.
            db.execute(f"PRAGMA wal_autocheckpoint = {FALLBACK_AUTOCHECKPOINT_PAGES}").fetchall()
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
        span = self.observer.commit(len(ops))
        if span is None:
            self._apply_batch(db, ops)
            return
        self._apply_batch(db, ops)
        span.end(first_error(ops))

    def _apply_batch(self, db: sqlite3.Connection, ops: list[WriteOp]) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            if len(ops) == 1:
                ops[0].run(db)
            else:
                apply_merged(db, ops)
            db.execute("COMMIT")
            self.checkpointer.note_write()
            return
        except Exception as exc:
            _rollback(db)
            if len(ops) == 1:
                ops[0].result, ops[0].error = None, _store_error(exc)
                return
        # Something unexpected failed: find it by giving every op its own transaction.
        for op in ops:
            self._write_alone(db, op)

    def _write_alone(self, db: sqlite3.Connection, op: WriteOp) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            op.run(db)
            db.execute("COMMIT")
            self.checkpointer.note_write()
        except Exception as exc:
            _rollback(db)
            op.result, op.error = None, _store_error(exc)

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


def _store_error(exc: Exception) -> Exception:
    """A full disk (or the size cap, ``max_page_count``) as ``store.full``: the write was
    rolled back whole, nothing of it applied; the next write may succeed once there is
    room again. Any other error as it is."""
    if isinstance(exc, sqlite3.Error) and exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
        error = StoreFull()
        error.__cause__ = exc
        return error
    return exc


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
            loop.call_soon_threadsafe(settle_ops, group)


def _settle_one(future: asyncio.Future[None], error: BaseException | None) -> None:
    op = WriteOp(future)
    op.error = error
    _settle_batch([op])

"""The PostgreSQL write path: one writer task, one connection, pipelined group commit.

Writes from every actor queue up for one asyncio task. It takes whatever has queued (up
to ``max_batch`` operations) and sends it in pipeline mode — ``BEGIN``, one statement per
operation, ``COMMIT`` — so a batch costs one round trip and one WAL flush however many
actors it serves (a batch of one is just its statement: a transaction by itself). While
that batch is in flight the next one queues up. One writer keeps per-actor order
trivially: batches are written in submission order, and so are the statements inside
one.

Failures stay isolated. The expected ones (missing actor, name or id taken) are reported
by the statements' results, not by errors (see :mod:`perdure.store.postgres.ops`). Any
other error aborts the batch; the writer then replays each operation alone, in its own
transaction, so only the one at fault gets the error. If the connection itself breaks,
the writer reconnects and sends the batch once more (see ``_write_batch``); if that fails
too, the batch's operations fail with the error.

Outages are bounded (see :mod:`perdure.store.postgres.outage`): a batch that has not
been written ``timeout`` seconds after it was taken fails with ``StoreUnavailable`` at
that moment, and so does everything queued behind it (it would only wait as long again).
Operations failed so are *abandoned*: never sent later, so what a caller was told failed
stays unapplied. The batch in flight may still have committed (only its answer was lost);
its actors' commit pipelines are poisoned by the failure and reload from the store. A
connection that timed out is dropped; the next batch connects anew.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from perdure.errors import InternalError, StoreClosed
from perdure.store._shared import first_error, settle_ops
from perdure.store.postgres.merge import plan_statements
from perdure.store.postgres.ops import WriteOp
from perdure.store.postgres.outage import CONNECTION_ERRORS, unavailable
from perdure.telemetry import NO_OBSERVER, Observer

__all__ = ["PostgresWriter"]

_log = logging.getLogger("perdure.store.postgres.store")

Connection = psycopg.AsyncConnection[Any]
Connect = Callable[[], Awaitable[Connection]]


class PostgresWriter:
    """Owns the write connection and the task that serves it; see the module docstring."""

    def __init__(self, connect: Connect, *, max_batch: int = 256, timeout: float = 5.0) -> None:
        # Told about every batch (the store passes its observer on; see telemetry).
        self.observer: Observer = NO_OBSERVER
        self._connect = connect
        self._max_batch = max_batch
        self._timeout = timeout
        # Past a batch's deadline, until the writer has let go of its connection: new
        # writes fail at once instead of queueing behind that clean-up.
        self._stalled = False
        self._queue: collections.deque[WriteOp] = collections.deque()
        self._ready = asyncio.Event()
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._accepting = False
        self._stopping = False

    async def start(self, conn: Connection | None = None) -> None:
        """Start serving, on ``conn`` if given (else connect: a bad URL fails here)."""
        self._conn = conn if conn is not None else await self._connect()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="perdure-postgres-writer"
        )
        self._accepting = True

    def submit(self, op: WriteOp) -> None:
        """Queue ``op`` for the next batch."""
        if not self._accepting:
            raise StoreClosed("PostgreSQL")
        if self._stalled:
            op.abandoned = True
            op.future.set_exception(unavailable(None, self._timeout))
            return
        self._queue.append(op)
        self._ready.set()

    async def stop(self) -> None:
        """Write everything accepted so far, then close the connection."""
        self._accepting = False
        self._stopping = True
        self._ready.set()
        task, self._task = self._task, None
        try:
            if task is not None:
                # Shielded: a caller cancelled during close must not cut a batch in half.
                await asyncio.shield(task)
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    # --- the writer task ---------------------------------------------------------------

    async def _run(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                if self._stopping:
                    return
                self._ready.clear()
                await self._ready.wait()
                continue
            count = min(len(queue), self._max_batch)
            batch = [op for op in (queue.popleft() for _ in range(count)) if not op.abandoned]
            if not batch:
                continue
            span = self.observer.commit(len(batch))
            try:
                await self._write_bounded(batch)
            except BaseException as exc:
                if span is not None:
                    span.end(exc)
                # Cancelled (the loop is shutting down) or a bug: nobody may wait forever.
                self._fail([*batch, *queue], exc)
                queue.clear()
                raise
            if span is not None:
                span.end(first_error(batch))
            settle_ops(batch)

    async def _write_bounded(self, ops: list[WriteOp]) -> None:
        """``_write_batch`` for at most ``timeout`` seconds (see the module docstring)."""
        loop = asyncio.get_running_loop()
        deadline = loop.call_later(self._timeout, self._give_up, ops)
        try:
            async with asyncio.timeout(self._timeout):
                await self._write_batch(ops)
        except TimeoutError as exc:
            _log.warning("PostgreSQL did not answer within %g s; writes fail", self._timeout)
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
            _fail_with(ops, unavailable(exc, self._timeout))
        finally:
            deadline.cancel()
            self._stalled = False

    def _give_up(self, ops: list[WriteOp]) -> None:
        """The deadline of a batch: its callers and those queued behind it stop waiting
        now (psycopg may take a while longer to let go of a stalled connection)."""
        self._stalled = True
        error = unavailable(None, self._timeout)
        for op in (*ops, *self._queue):
            op.abandoned = True
            if not op.future.done():
                op.future.set_exception(error)

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._conn = None
            if conn is not None:
                await conn.close()
            conn = self._conn = await self._connect()
        return conn

    async def _write_batch(self, ops: list[WriteOp]) -> None:
        for attempt in range(2):
            try:
                conn = await self._connection()
            except Exception as exc:
                _log.warning("cannot connect to PostgreSQL to write: %s", exc)
                self._abandon_queue(exc)
                _fail_with(ops, _outage(exc, self._timeout))
                return
            try:
                if len(ops) == 1:
                    await _run(conn, ops[0])  # one statement: a transaction by itself
                else:
                    await _pipelined(conn, ops)
                return
            except Exception as exc:
                if conn.broken or conn.closed:
                    if attempt == 0:
                        # The connection died (a server restart, a failover). Whether the
                        # batch committed is unknown, so it is sent once more on a new
                        # connection: commits and deletes are idempotent, and a create
                        # recognises its own row (see CreateOp).
                        _log.warning(
                            "PostgreSQL connection lost while writing (%s); resending", exc
                        )
                        for op in ops:
                            op.resent = True
                        continue
                    _fail_with(ops, _outage(exc, self._timeout))
                    return
                if len(ops) == 1:
                    _fail_with(ops, exc)
                    return
                _log.debug("a batch of %d writes failed (%s); replaying one by one", len(ops), exc)
            for op in ops:
                await _alone(conn, op)
            return

    def _abandon_queue(self, exc: BaseException) -> None:
        """The server refuses connections: what is queued fails now rather than try once
        more each (and is never sent later)."""
        error = _outage(exc, self._timeout)
        for op in self._queue:
            op.abandoned = True
            if not op.future.done():
                op.future.set_exception(error)

    def _fail(self, ops: list[WriteOp], exc: BaseException) -> None:
        self._accepting = False
        error = InternalError("The PostgreSQL writer has stopped.")
        error.__cause__ = exc
        for op in ops:
            op.reset()
            op.error = error
        settle_ops(ops)


async def _pipelined(conn: Connection, ops: list[WriteOp]) -> None:
    """Send the whole batch as one transaction in one round trip; read every result.

    Runs of commits of distinct actors go as one statement each (``plan_statements``).

    ``BEGIN`` and ``COMMIT`` are plain statements in the pipeline: psycopg's
    ``transaction()`` block would add a round trip of its own. After an error the
    server skips the rest up to the pipeline's sync (``COMMIT`` included), so the
    transaction is left failed and is rolled back here.
    """
    statements = plan_statements(ops)
    cursors: list[psycopg.AsyncCursor[Any]] = []
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            for statement in statements:
                statement.reset()
                cursor = conn.cursor(binary=True)
                await cursor.execute(statement.sql, statement.params)
                cursors.append(cursor)
            await conn.execute("COMMIT")
    except BaseException as exc:
        # Not when cancelled (a deadline): the connection is dropped, not rolled back.
        if isinstance(exc, asyncio.CancelledError):
            raise
        if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        raise
    for statement, cursor in zip(statements, cursors, strict=True):
        statement.read(await cursor.fetchone())


async def _run(conn: Connection, op: WriteOp) -> None:
    """Run one op's statement (autocommit: the statement is its own transaction)."""
    op.ensure_statement()
    op.reset()
    cursor = conn.cursor(binary=True)
    await cursor.execute(op.sql, op.params)
    op.read(await cursor.fetchone())


async def _alone(conn: Connection, op: WriteOp) -> None:
    """Run one op, keeping any error as its outcome."""
    try:
        await _run(conn, op)
    except Exception as exc:
        op.reset()
        op.error = exc


def _outage(exc: BaseException, timeout: float) -> BaseException:
    """A connection failure as ``StoreUnavailable``; any other error as it is."""
    return unavailable(exc, timeout) if isinstance(exc, CONNECTION_ERRORS) else exc


def _fail_with(ops: list[WriteOp], exc: BaseException) -> None:
    for op in ops:
        op.reset()
        op.error = exc

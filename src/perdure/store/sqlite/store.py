"""The SQLite backend: one file per deployment, WAL, a group-commit writer thread.

Writes (``create_actor``, ``commit``, ``delete_actor``) go to one writer thread that
batches the writes of many actors into one transaction, or, for commits while that
thread is idle, are written together at the end of the event-loop iteration on the loop
thread (see :mod:`perdure.store.sqlite.writer`). Reads run synchronously on the event loop thread
through a separate read-only connection: in WAL mode readers never wait for the writer,
and a point lookup costs a few microseconds, far less than a hop to another thread.
A write is visible to every read made after its ``await`` returns, because the writer
commits before it settles the future.

One process serves a database: opening the store takes an advisory lock on
``<database>.lock`` until it closes, and a second process is refused with
:class:`~perdure.errors.StoreLocked` (see :mod:`perdure.store.sqlite.lock`).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perdure.errors import StoreClosed
from perdure.keys import Key, deserialize_key, serialize_key
from perdure.store._shared import (
    check_ttl,
    lease_from_rows,
    new_node,
    node_from_row,
    wall_clock_ms,
)
from perdure.store.base import (
    ActorCommit,
    ActorRecord,
    ClusterSecret,
    Durability,
    EventRecord,
    IdempotencyRecord,
    Lease,
    NodeRecord,
    QueueMessageRecord,
    ScheduleFireRecord,
    ScheduleRecord,
    Store,
    WakeupCallback,
)
from perdure.store.sqlite.lease import AcquireOp, ClaimOp, ReleaseOp
from perdure.store.sqlite.lock import DataLock, acquire_data_lock, lock_file_for
from perdure.store.sqlite.nodes import (
    DEREGISTER_NODE,
    FORGET_CLUSTER_SECRET,
    HEARTBEAT_NODE,
    KEEP_CLUSTER_SECRET,
    LIST_NODES,
    READ_CLUSTER_SECRET,
    REGISTER_NODE,
    StatementOp,
)
from perdure.store.sqlite.ops import CallOp, CommitOp, CreateOp, DeleteOp, WriteOp
from perdure.store.sqlite.writer import GroupCommitWriter, connect

__all__ = ["SQLiteStore"]

_SYNCHRONOUS: dict[str, str] = {"process": "NORMAL", "power": "FULL"}

_ACTOR_COLUMNS = (
    "actor_id, name, key, created_at, generation, initialized, input, state, wake_at,"
    " queue_next_id, event_seq"
)
_GET_ACTOR = f"SELECT {_ACTOR_COLUMNS} FROM actors WHERE actor_id = ?"
_FIND_ACTOR = f"SELECT {_ACTOR_COLUMNS} FROM actors WHERE name = ? AND key = ?"
_LOAD_QUEUE = (
    "SELECT id, name, body, created_at, trace, attempts, visible_at, dead_at, error"
    " FROM queue_messages WHERE actor_id = ? ORDER BY id"
)
_LOAD_HISTORY = "SELECT location, entry FROM workflow_history WHERE actor_id = ?"
_LOAD_SCHEDULES = (
    "SELECT id, kind, action, args, run_at, created_at, name, expression, timezone,"
    " interval_ms, max_history, last_run_at, fire_seq, running_seq"
    " FROM schedules WHERE actor_id = ? ORDER BY id"
)
_LOAD_FIRES = (
    "SELECT name, seq, action, scheduled_at, fired_at, result, finished_at, error"
    " FROM schedule_fires WHERE actor_id = ? AND name = ? ORDER BY seq DESC LIMIT ?"
)
# `wake_at IS NOT NULL` lets SQLite use the partial index actors_wake_at.
_DUE_ACTORS = (
    "SELECT actor_id, wake_at FROM actors WHERE wake_at IS NOT NULL AND wake_at <= ?"
    " ORDER BY wake_at, actor_id LIMIT ?"
)
_NEXT_WAKE_AT = "SELECT MIN(wake_at) FROM actors WHERE wake_at IS NOT NULL"
_LOAD_EVENTS = (
    "SELECT seq, name, args, emitted_at FROM actor_events"
    " WHERE actor_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_LOAD_KEY = (
    "SELECT key, fingerprint, created_at, answer FROM idempotency_keys"
    " WHERE actor_id = ? AND key = ?"
)
# Served by the index idempotency_keys_age (actor_id, created_at), which holds the key
# too (the primary key of a WITHOUT ROWID table): one range, no row read.
_LOAD_KEYS = (
    "SELECT key, created_at FROM idempotency_keys WHERE actor_id = ? AND created_at >= ?"
    " ORDER BY created_at DESC LIMIT ?"
)
# The KV space's reads (store/kv.py): one range of the primary key each. LIMIT -1 is
# SQLite's "no limit"; BLOBs compare with memcmp, the contract's order.
_KV_LIST = {
    (bounded, reverse): (
        "SELECT key, value FROM actor_kv WHERE actor_id = ? AND key >= ?"
        + (" AND key < ?" if bounded else "")
        + (" ORDER BY key DESC" if reverse else " ORDER BY key")
        + " LIMIT ?"
    )
    for bounded in (False, True)
    for reverse in (False, True)
}
_KV_GET_CHUNK = 500  # keys per statement (SQLite bounds the parameters of one)
_GET_LEASE = (
    "SELECT generation, owner_node, lease_expires_at FROM actors"
    " WHERE actor_id = ? AND owner_node IS NOT NULL"
)


class SQLiteStore(Store):
    """A :class:`~perdure.store.base.Store` in one SQLite file (WAL mode).

    ``durability="process"`` (default) runs with ``synchronous=NORMAL``: a write whose
    ``await`` returned survives ``kill -9`` of the process, but the last commits may be
    lost on power loss or an OS crash (the WAL is not fsynced at each commit).
    ``durability="power"`` runs with ``synchronous=FULL``: every group commit is fsynced,
    so acknowledged writes survive power loss too, at the price of one fsync per batch.

    Reads must be made on the thread of the event loop that opened the store. A write
    whose caller is cancelled while awaiting it is still applied.

    ``exclusive=True`` (default): the store holds the database's lock while it is open
    (:meth:`lock`), so ``open()`` raises :class:`~perdure.errors.StoreLocked` if
    another process has it. Stores of one process share the lock. ``exclusive=False``
    takes none: for tools that only read beside a running server (``perdure actors``).

    Leases use the wall clock (one process serves the file); ``watch_wakeups`` reports
    nothing.

    A full disk fails a write with :class:`~perdure.errors.StoreFull` (507,
    ``store.full``): its transaction is rolled back whole, nothing of it applied, and
    the writer goes on; writes succeed again once there is room. ``max_size`` (bytes)
    caps the database file the same way (``PRAGMA max_page_count``; a quota, and how the
    tests fill a disk); :meth:`set_max_size` changes it while the store is open.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        exclusive: bool = True,
        max_size: int | None = None,
    ):
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability must be 'process' or 'power', not {durability!r}")
        self.path = Path(path)
        self.durability = durability
        self.exclusive = exclusive
        self.max_size = max_size
        self._no_cap: int | None = None  # SQLite's own max_page_count, read at open
        self._writer: GroupCommitWriter | None = None
        self._reader: sqlite3.Connection | None = None
        self._lock: DataLock | None = None
        self._lifecycle = asyncio.Lock()

    @property
    def lock_file(self) -> Path:
        """The file whose advisory lock says which process serves the database."""
        return lock_file_for(self.path.resolve())

    def lock(self) -> DataLock:
        """Take (or share, within this process) the database's lock now; release the
        returned handle when done. Raises ``StoreLocked`` at once if another process
        holds it. ``perdure serve`` calls it before starting, to fail fast."""
        return acquire_data_lock(self.path.resolve())

    async def open(self) -> None:
        """Take the lock, create the file (and its directory), migrate it, start the
        writer. Idempotent."""
        async with self._lifecycle:
            if self._writer is not None:
                return
            file = self.path.resolve()
            # Before anything touches the file: a refused process must not migrate it.
            lock = self.lock() if self.exclusive else None
            try:
                writer = GroupCommitWriter(file, synchronous=_SYNCHRONOUS[self.durability])
                writer.observer = self.observer
                await writer.start()
                try:
                    # A URI (percent-encoded by as_uri) so that mode=ro can be asked for.
                    reader = connect(file.as_uri() + "?mode=ro", uri=True)
                except BaseException:
                    await writer.stop()
                    raise
            except BaseException:
                if lock is not None:
                    lock.release()
                raise
            self._writer, self._reader, self._lock = writer, reader, lock
            if self.max_size is not None:
                await self.set_max_size(self.max_size)

    async def close(self) -> None:
        """Write every accepted write, stop the writer, close both connections, release
        the lock. Idempotent."""
        async with self._lifecycle:
            writer, reader, lock = self._writer, self._reader, self._lock
            self._writer = self._reader = self._lock = None
            try:
                # The reader goes first so that the writer's connection is the file's
                # last: closing it checkpoints the WAL and removes the -wal and -shm files.
                if reader is not None:
                    reader.close()
                if writer is not None:
                    await writer.stop()
            finally:
                # Last: until the file is closed, another process must not start on it.
                if lock is not None:
                    lock.release()

    # --- writes: through the group-commit writer ----------------------------------------

    def _submit(self, op: WriteOp) -> asyncio.Future[Any]:
        if self._writer is None:
            raise StoreClosed("SQLite")
        self._writer.submit(op)
        return op.future

    def _new_future(self) -> asyncio.Future[Any]:
        if self._writer is None:
            raise StoreClosed("SQLite")
        return asyncio.get_running_loop().create_future()

    async def create_actor(self, record: ActorRecord) -> None:
        """Insert a new actor (see :meth:`Store.create_actor`)."""
        await self._submit(CreateOp(self._new_future(), record))

    async def commit(self, commit: ActorCommit) -> None:
        """Apply ``commit`` atomically; its contents are copied before this returns control."""
        await self.submit(commit)

    def submit(self, commit: ActorCommit) -> asyncio.Future[None]:
        """Accept ``commit`` for this loop iteration's group commit; the future settles
        when it is durable (already, on return, when a quiet store wrote it at once)."""
        if self._writer is None:
            raise StoreClosed("SQLite")
        op = CommitOp(self._new_future(), commit)
        self._writer.submit_commit(op)
        return op.future

    async def delete_actor(self, actor_id: str) -> bool:
        """Delete the actor with all its data; ``False`` if it did not exist."""
        existed: bool = await self._submit(DeleteOp(self._new_future(), actor_id))
        return existed

    async def set_max_size(self, max_size: int | None) -> None:
        """Cap the database file at ``max_size`` bytes (``None``: no cap but SQLite's own).

        A write that would grow the file past the cap fails with ``StoreFull``. A cap
        below the current size holds the file where it is.
        """
        if max_size is not None and max_size <= 0:
            raise ValueError(f"max_size must be a positive number of bytes, not {max_size}")

        def cap(db: sqlite3.Connection) -> None:
            if self._no_cap is None:
                self._no_cap = db.execute("PRAGMA max_page_count").fetchone()[0]
            pages = self._no_cap
            if max_size is not None:
                page_size = db.execute("PRAGMA page_size").fetchone()[0]
                pages = max(1, max_size // page_size)
            db.execute(f"PRAGMA max_page_count = {int(pages)}").fetchall()

        await self._submit(CallOp(self._new_future(), cap))
        self.max_size = max_size

    async def pragmas(self) -> dict[str, Any]:
        """``journal_mode`` and ``synchronous`` of the write connection (diagnostics).

        ``synchronous`` is SQLite's number: 1 is NORMAL, 2 is FULL.
        """

        def read(db: sqlite3.Connection) -> dict[str, Any]:
            return {
                "journal_mode": db.execute("PRAGMA journal_mode").fetchall()[0][0],
                "synchronous": db.execute("PRAGMA synchronous").fetchall()[0][0],
            }

        result: dict[str, Any] = await self._submit(CallOp(self._new_future(), read))
        return result

    # --- reads: synchronous, on the loop thread, through the read-only connection -------

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        if self._reader is None:
            raise StoreClosed("SQLite")
        # fetchall() runs each statement to its end, which ends its read transaction: a
        # half-read statement would pin an old snapshot and hide later commits.
        return self._reader.execute(sql, params).fetchall()

    async def ping(self, timeout: float) -> None:
        """``SELECT 1`` on the read connection (a local file answers at once or not at all)."""
        self._rows("SELECT 1", ())

    async def get_actor(self, actor_id: str) -> ActorRecord | None:
        """The actor with this id, or ``None``."""
        rows = self._rows(_GET_ACTOR, (actor_id,))
        return _record(rows[0]) if rows else None

    async def claim_actor(self, actor_id: str) -> ActorRecord | None:
        """Add one to the actor's generation and return its record (see the contract).

        Through the writer, so that it comes after every commit accepted before it."""
        op = ClaimOp(self._new_future(), actor_id, _ACTOR_COLUMNS, wall_clock_ms())
        row = await self._submit(op)
        return None if row is None else _record(row)

    # --- ownership: through the writer, after every write submitted before ------------

    async def acquire_lease(
        self, actor_id: str, node_id: str, ttl_ms: int, *, now: int | None = None
    ) -> tuple[ActorRecord, Lease]:
        """Take the actor for ``node_id`` (see :meth:`Store.acquire_lease`)."""
        check_ttl(ttl_ms)
        now = wall_clock_ms() if now is None else now
        op = AcquireOp(self._new_future(), actor_id, node_id, now + ttl_ms, now, _ACTOR_COLUMNS)
        row, expires_at = await self._submit(op)
        record = _record(row)
        return record, Lease(actor_id, node_id, record.generation, expires_at)

    async def release_lease(self, lease: Lease) -> None:
        """Clear the owner if ``lease`` is still the current one."""
        await self._submit(ReleaseOp(self._new_future(), lease))

    async def get_lease(self, actor_id: str) -> Lease | None:
        """The lease recorded on the actor, or ``None``."""
        return lease_from_rows(actor_id, self._rows(_GET_LEASE, (actor_id,)))

    # --- membership: the nodes table (read by `perdure nodes` from another process) ----

    async def register_node(
        self,
        node_id: str,
        address: str,
        ttl_ms: int,
        *,
        now: int | None = None,
        code_version: str | None = None,
    ) -> NodeRecord:
        """Record the node, replacing an earlier registration of the same id."""
        now = wall_clock_ms() if now is None else now
        node = new_node(node_id, address, ttl_ms, now, code_version)
        params = (node_id, address, now, now, node.expires_at, code_version)
        await self._submit(StatementOp(self._new_future(), REGISTER_NODE, params))
        return node

    async def heartbeat_node(
        self, node_id: str, ttl_ms: int, *, draining: bool = False, now: int | None = None
    ) -> NodeRecord | None:
        """Keep the node alive until ``now + ttl_ms``; ``None`` if it is not registered."""
        check_ttl(ttl_ms)
        now = wall_clock_ms() if now is None else now
        params = (now, now + ttl_ms, 1 if draining else 0, node_id)
        rows = await self._submit(StatementOp(self._new_future(), HEARTBEAT_NODE, params))
        return node_from_row(rows[0]) if rows else None

    async def deregister_node(self, node_id: str) -> None:
        """Remove the node's row, if there is one."""
        await self._submit(StatementOp(self._new_future(), DEREGISTER_NODE, (node_id,)))

    async def list_nodes(
        self, *, include_dead: bool = False, count_actors: bool = True, now: int | None = None
    ) -> list[NodeRecord]:
        """The live nodes (all with ``include_dead``) by id, with the actors each owns."""
        now = wall_clock_ms() if now is None else now
        rows = self._rows(LIST_NODES, (1 if count_actors else 0, 1 if include_dead else 0, now))
        return [node_from_row(row) for row in rows]

    async def keep_cluster_secret(self, proposed: ClusterSecret) -> ClusterSecret:
        """Keep ``proposed`` unless a secret is kept already; the one kept (the insert and
        the read in one transaction of the writer)."""

        def keep(db: sqlite3.Connection) -> tuple[str | None, str | None]:
            db.execute(KEEP_CLUSTER_SECRET, (proposed.secret, proposed.digest, wall_clock_ms()))
            row: tuple[str | None, str | None] = db.execute(READ_CLUSTER_SECRET).fetchone()
            return row

        secret, digest = await self._submit(CallOp(self._new_future(), keep))
        return ClusterSecret(secret=secret, digest=digest)

    async def forget_cluster_secret(self) -> bool:
        """Delete the kept secret; ``True`` if there was one."""
        rows = await self._submit(StatementOp(self._new_future(), FORGET_CLUSTER_SECRET, ()))
        return bool(rows)

    async def watch_wakeups(self, callback: WakeupCallback) -> Callable[[], None]:
        """Report nothing (see :meth:`Store.watch_wakeups`): one process owns the file,
        and its runtime tells its own scheduler of every alarm it writes."""
        if self._writer is None:
            raise StoreClosed("SQLite")
        return _unwatch

    async def find_actor(self, name: str, key: Key) -> ActorRecord | None:
        """The actor with this name and key, or ``None``."""
        rows = self._rows(_FIND_ACTOR, (name, serialize_key(tuple(key))))
        return _record(rows[0]) if rows else None

    async def list_actors(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorRecord]:
        """Actors ordered by id, optionally of one name, after a given id."""
        if limit <= 0:
            return []  # SQLite reads LIMIT -1 as "no limit"
        where: list[str] = []
        params: list[Any] = []
        if name is not None:
            where.append("name = ?")
            params.append(name)
        if after is not None:
            where.append("actor_id > ?")
            params.append(after)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT {_ACTOR_COLUMNS} FROM actors{clause} ORDER BY actor_id LIMIT ?"
        return [_record(row) for row in self._rows(sql, (*params, limit))]

    async def count_actors(self, *, name: str | None = None) -> int:
        """How many actors exist (of one name, if given)."""
        if name is None:
            rows = self._rows("SELECT COUNT(*) FROM actors", ())
        else:
            rows = self._rows("SELECT COUNT(*) FROM actors WHERE name = ?", (name,))
        count: int = rows[0][0]
        return count

    async def load_queue(self, actor_id: str) -> list[QueueMessageRecord]:
        """All queued messages of an actor, ordered by id."""
        rows = self._rows(_LOAD_QUEUE, (actor_id,))
        return [QueueMessageRecord(*row) for row in rows]

    async def load_history(self, actor_id: str) -> dict[str, bytes]:
        """All workflow history entries of an actor, by location."""
        return dict(self._rows(_LOAD_HISTORY, (actor_id,)))

    async def load_schedules(self, actor_id: str) -> list[ScheduleRecord]:
        """All scheduled jobs of an actor, ordered by id."""
        return [ScheduleRecord(*row) for row in self._rows(_LOAD_SCHEDULES, (actor_id,))]

    async def load_events(self, actor_id: str, after_seq: int, limit: int) -> list[EventRecord]:
        """Logged events with ``seq > after_seq``, oldest first, at most ``limit``."""
        if limit <= 0:
            return []  # SQLite reads LIMIT -1 as "no limit"
        return [EventRecord(*row) for row in self._rows(_LOAD_EVENTS, (actor_id, after_seq, limit))]

    async def load_fire_history(
        self, actor_id: str, name: str, limit: int
    ) -> list[ScheduleFireRecord]:
        """The newest ``limit`` fires of job ``name``, newest first."""
        if limit <= 0:
            return []  # SQLite reads LIMIT -1 as "no limit"
        rows = self._rows(_LOAD_FIRES, (actor_id, name, limit))
        return [ScheduleFireRecord(*row) for row in rows]

    async def load_idempotency(self, actor_id: str, key: str) -> IdempotencyRecord | None:
        """The record of the actor's idempotency key ``key``, or ``None``."""
        rows = self._rows(_LOAD_KEY, (actor_id, key))
        return IdempotencyRecord(*rows[0]) if rows else None

    async def load_idempotency_keys(
        self, actor_id: str, since: int, limit: int
    ) -> list[tuple[str, int]]:
        """The newest ``limit`` keys created at or after ``since``, newest first."""
        if limit <= 0:
            return []  # SQLite reads LIMIT -1 as "no limit"
        return [(row[0], row[1]) for row in self._rows(_LOAD_KEYS, (actor_id, since, limit))]

    reads_inline = True

    async def kv_get(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of the actor's KV ``keys`` (``None``: no record)."""
        return self.kv_get_inline(actor_id, keys)

    def kv_get_inline(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """:meth:`kv_get`, on the calling thread (the read connection's)."""
        found: dict[bytes, bytes] = {}
        wanted = list(dict.fromkeys(bytes(key) for key in keys))
        for at in range(0, len(wanted), _KV_GET_CHUNK):
            chunk = wanted[at : at + _KV_GET_CHUNK]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT key, value FROM actor_kv WHERE actor_id = ? AND key IN ({marks})"
            found.update(self._rows(sql, (actor_id, *chunk)))
        return [found.get(bytes(key)) for key in keys]

    async def kv_list(
        self,
        actor_id: str,
        *,
        start: bytes = b"",
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[bytes, bytes]]:
        """The actor's KV records in ``[start, end)``, by key (see :meth:`Store.kv_list`)."""
        if limit is not None and limit <= 0:
            return []  # SQLite reads LIMIT -1 as "no limit"
        sql = _KV_LIST[end is not None, reverse]
        bound = () if end is None else (end,)
        params = (actor_id, start, *bound, -1 if limit is None else limit)
        return [(row[0], row[1]) for row in self._rows(sql, params)]

    async def due_actors(self, until: int, limit: int) -> list[tuple[str, int]]:
        """``(actor_id, wake_at)`` of actors due by ``until``, earliest first (ties by id)."""
        if limit <= 0:
            return []
        return [(row[0], row[1]) for row in self._rows(_DUE_ACTORS, (until, limit))]

    async def next_wake_at(self) -> int | None:
        """The earliest ``wake_at`` over all actors, or ``None``."""
        wake_at: int | None = self._rows(_NEXT_WAKE_AT, ())[0][0]
        return wake_at


def _unwatch() -> None:
    """What ``watch_wakeups`` returns: there is nothing to stop."""


def _record(row: Any) -> ActorRecord:
    return ActorRecord(
        actor_id=row[0],
        name=row[1],
        key=deserialize_key(row[2]),
        created_at=row[3],
        generation=row[4],
        initialized=bool(row[5]),
        input=row[6],
        state=row[7],
        wake_at=row[8],
        queue_next_id=row[9],
        event_seq=row[10],
    )

"""The PostgreSQL backend: a pool for reads, pipelined group-commit writers, leases.

Writes (``create_actor``, ``commit``, ``delete_actor``) go to the writer task of their
actor (``writers`` of them, default 1, each with its own connection, an actor's writes
always on the same one: :mod:`perdure.store.postgres.writer_routing`). Each batches the writes
of many actors into one transaction sent in one round trip (see
:mod:`perdure.store.postgres.writer`). Reads take a connection from a
``psycopg_pool.AsyncConnectionPool``. A write is visible to every read made after its
``await`` returns, because the writer commits before it settles the future.

For several nodes on one database (DESIGN §5) each actor row carries an ownership lease
(``owner_node``, ``lease_expires_at``) fenced by its ``generation`` (see
:mod:`perdure.store.base` and :mod:`perdure.store.postgres.lease`), on the database's
clock, and :meth:`watch_wakeups` reports alarms set by any node through
``LISTEN/NOTIFY``. Cluster membership (the ``nodes`` table) goes over pooled
connections, beside the writer (see :mod:`perdure.store.postgres.nodes`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, LiteralString

import psycopg
from psycopg_pool import AsyncConnectionPool

from perdure.errors import InternalError, StoreClosed
from perdure.keys import Key, serialize_key
from perdure.store._shared import check_ttl, lease_from_rows, node_from_row
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
from perdure.store.postgres.kv import KV_GET, kv_list_sql
from perdure.store.postgres.lease import GET_LEASE, AcquireOp, ClaimOp, ReleaseOp
from perdure.store.postgres.listen import WakeupListener
from perdure.store.postgres.nodes import (
    DEREGISTER_NODE,
    FORGET_CLUSTER_SECRET,
    HEARTBEAT_NODE,
    KEEP_CLUSTER_SECRET,
    LIST_NODES,
    READ_CLUSTER_SECRET,
    REGISTER_NODE,
)
from perdure.store.postgres.ops import CommitOp, CreateOp, DeleteOp, WriteOp
from perdure.store.postgres.outage import bounded
from perdure.store.postgres.schema import (
    apply_postgres_migrations,
    configure_connection,
    ensure_flush_on_commit,
    pooled,
    wake_channel,
)
from perdure.store.postgres.sql import (
    ACTOR_COLUMNS,
    DUE_ACTORS,
    FIND_ACTOR,
    GET_ACTOR,
    LOAD_EVENTS,
    LOAD_FIRES,
    LOAD_HISTORY,
    LOAD_KEY,
    LOAD_KEYS,
    LOAD_QUEUE,
    LOAD_SCHEDULES,
    NEXT_WAKE_AT,
    record_from_row,
)
from perdure.store.postgres.writer_routing import PostgresWriters

__all__ = ["PostgresStore"]

Connection = psycopg.AsyncConnection[Any]


class PostgresStore(Store):
    """A :class:`~perdure.store.base.Store` in a PostgreSQL database (psycopg 3).

    ``url`` is a libpq connection string or URI (``postgresql://user@host:5432/db``).
    ``schema`` puts every table in that schema (created if missing); without it, the
    tables go to the first schema of the server's ``search_path`` (usually ``public``).
    ``pool_min``/``pool_max`` size the read pool. Each of the ``writers`` (default 1) and,
    once :meth:`watch_wakeups` is used, the listener hold one more connection.

    Durability: a write returns once PostgreSQL has committed it. With the server's
    default ``synchronous_commit=on`` the commit is flushed to the WAL on disk first, so
    it survives a crash of this process, of the database server and of its host — in
    both modes. ``durability="process"`` (default) keeps whatever the server is
    configured with. ``durability="power"`` makes sure of the flush: it turns
    ``synchronous_commit`` back on for the writer if the server has it off, and refuses
    to open on a server running with ``fsync=off``.

    Outages: once open, every call waits at most ``store_timeout`` seconds (default 5)
    for the database; past that, or when the server refuses connections, it raises
    :class:`~perdure.errors.StoreUnavailable` (503, ``store.unavailable``). A write that
    failed so was not applied, unless only its acknowledgement was lost (the commit
    pipeline then drops the actor's instance, which reloads from the store). The pool and
    the writer reconnect by themselves when the server is back. ``connect_timeout``
    bounds :meth:`open` (a server starting up may take longer).

    Use the store from the event loop that opened it. A write whose caller is cancelled
    while awaiting it is still applied.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        durability: Durability = "process",
        connect_timeout: float = 30.0,
        store_timeout: float = 5.0,
        writers: int = 1,
    ) -> None:
        if durability not in ("process", "power"):
            raise ValueError(f"durability must be 'process' or 'power', not {durability!r}")
        if not 0 <= pool_min <= pool_max or pool_max < 1:
            raise ValueError(
                f"need 0 <= pool_min <= pool_max, pool_max >= 1; got {pool_min}, {pool_max}"
            )
        if not store_timeout > 0:
            raise ValueError(
                f"store_timeout must be a positive number of seconds, not {store_timeout}"
            )
        if writers < 1:
            raise ValueError(f"writers must be at least 1, not {writers}")
        if schema is not None and not schema:
            raise ValueError("schema must be a non-empty name (or None)")
        self.url = url
        self.schema = schema
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.durability = durability
        self.connect_timeout = connect_timeout
        self.store_timeout = store_timeout
        self.writers = writers
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._writer: PostgresWriters | None = None
        self._listener: WakeupListener | None = None
        self._channel = ""
        self._lifecycle = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, pool_max={self.pool_max})"

    # --- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, migrate under an advisory lock, start the writer. Idempotent."""
        async with self._lifecycle:
            if self._pool is not None:
                return
            # The writer's connection comes first: a wrong URL or an unreachable server
            # fails at once with libpq's reason, where a pool would retry until timeout.
            conn = await self._connect_writer()
            try:
                schema, _ = await apply_postgres_migrations(conn, self.schema)
            except BaseException:
                await conn.close()
                raise
            self._channel = wake_channel(schema)
            writer = PostgresWriters(
                self._connect_writer, count=self.writers, timeout=self.store_timeout
            )
            writer.set_observer(self.observer)
            await writer.start(conn)
            try:
                pool = await self._open_pool("perdure")
            except BaseException:
                await writer.stop()
                raise
            self._pool, self._writer = pool, writer

    async def _open_pool(self, name: str) -> AsyncConnectionPool[Connection]:
        """The read pool, opened (every session set up by :meth:`_configure`)."""
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self.url,
            min_size=self.pool_min,
            max_size=self.pool_max,
            # libpq waits forever for a stalled server unless told otherwise (its
            # minimum is 2 s); callers stop waiting after store_timeout anyway.
            kwargs={"autocommit": True, "connect_timeout": max(2, round(self.store_timeout))},
            configure=self._configure,
            open=False,
            name=name,
            timeout=self.store_timeout,
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout)
        except BaseException:
            await pool.close()
            raise
        return pool

    async def close(self) -> None:
        """Write every accepted write, then close the writer, listener and pool. Idempotent."""
        async with self._lifecycle:
            writer, listener, pool = self._writer, self._listener, self._pool
            self._writer = self._listener = self._pool = None
            try:
                if writer is not None:
                    await writer.stop()
            finally:
                if listener is not None:
                    await listener.stop()
                if pool is not None:
                    await pool.close()

    async def _configure(self, conn: Connection) -> None:
        await configure_connection(conn, self.schema)

    async def _connect(self) -> Connection:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
        )
        try:
            await configure_connection(conn, self.schema)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _connect_writer(self) -> Connection:
        conn = await self._connect()
        try:
            # Room for every statement shape the writer uses (psycopg keeps 100 by default).
            conn.prepared_max = 1024
            if self.durability == "power":
                await ensure_flush_on_commit(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    # --- writes: through the group-commit writer ----------------------------------------

    def _submit(self, op: WriteOp, actor_id: str) -> asyncio.Future[Any]:
        if self._writer is None:
            raise StoreClosed("PostgreSQL")
        self._writer.submit(op, actor_id)
        return op.future

    def _new_future(self) -> asyncio.Future[Any]:
        if self._writer is None:
            raise StoreClosed("PostgreSQL")
        return asyncio.get_running_loop().create_future()

    async def create_actor(self, record: ActorRecord) -> None:
        """Insert a new actor (see :meth:`Store.create_actor`)."""
        await self._submit(CreateOp(self._new_future(), record, self._channel), record.actor_id)

    async def commit(self, commit: ActorCommit) -> None:
        """Apply ``commit`` atomically; its contents are copied before this returns control."""
        await self.submit(commit)

    def submit(self, commit: ActorCommit) -> asyncio.Future[None]:
        """Queue ``commit`` for the writer (no task per commit); the future settles when
        it is durable."""
        return self._submit(CommitOp(self._new_future(), commit, self._channel), commit.actor_id)

    async def delete_actor(self, actor_id: str) -> bool:
        """Delete the actor with its queue and history; ``False`` if it did not exist."""
        existed: bool = await self._submit(DeleteOp(self._new_future(), actor_id), actor_id)
        return existed

    # --- reads: through the pool ----------------------------------------------------------

    async def _rows(
        self, query: LiteralString, params: Any, *, timeout: float | None = None
    ) -> list[tuple[Any, ...]]:
        """Run a read (or a pooled statement); at most ``timeout`` (default
        ``store_timeout``) seconds, else :class:`~perdure.errors.StoreUnavailable`."""
        return await bounded(self._read(query, params), timeout or self.store_timeout)

    async def _read(self, query: LiteralString, params: Any) -> list[tuple[Any, ...]]:
        for attempt in range(2):
            pool = self._pool
            if pool is None:
                raise StoreClosed("PostgreSQL")
            try:
                async with pooled(pool) as conn:
                    cursor = conn.cursor(binary=True)
                    await cursor.execute(query, params)
                    return await cursor.fetchall()
            except psycopg.OperationalError:
                # A pooled connection that broke while idle (a server restart, say) fails
                # its first use; the pool then drops it. Reads are safe to run again.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def ping(self, timeout: float) -> None:
        """One ``SELECT 1`` over the pool, at most ``timeout`` seconds."""
        await self._rows("SELECT 1", (), timeout=timeout)

    async def get_actor(self, actor_id: str) -> ActorRecord | None:
        """The actor with this id, or ``None``."""
        rows = await self._rows(GET_ACTOR, (actor_id,))
        return record_from_row(rows[0]) if rows else None

    async def claim_actor(self, actor_id: str) -> ActorRecord | None:
        """Add one to the actor's generation and return its record (see the contract).

        Through the writer, after the commits queued before it; the statement waits for
        any other session's transaction on the row (a previous owner's last commit)."""
        claimed: ActorRecord | None = await self._submit(
            ClaimOp(self._new_future(), actor_id), actor_id
        )
        return claimed

    async def find_actor(self, name: str, key: Key) -> ActorRecord | None:
        """The actor with this name and key, or ``None``."""
        rows = await self._rows(FIND_ACTOR, (name, serialize_key(tuple(key))))
        return record_from_row(rows[0]) if rows else None

    async def list_actors(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorRecord]:
        """Actors ordered by id (byte order), optionally of one name, after a given id."""
        if limit <= 0:
            self._check_open()
            return []
        where: list[LiteralString] = []
        params: list[Any] = []
        if name is not None:
            where.append("name = %s")
            params.append(name)
        if after is not None:
            where.append("actor_id > %s")
            params.append(after)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        query = f"SELECT {ACTOR_COLUMNS} FROM actors{clause} ORDER BY actor_id LIMIT %s"
        return [record_from_row(row) for row in await self._rows(query, (*params, limit))]

    async def count_actors(self, *, name: str | None = None) -> int:
        """How many actors exist (of one name, if given)."""
        if name is None:
            rows = await self._rows("SELECT count(*) FROM actors", ())
        else:
            rows = await self._rows("SELECT count(*) FROM actors WHERE name = %s", (name,))
        count: int = rows[0][0]
        return count

    async def load_queue(self, actor_id: str) -> list[QueueMessageRecord]:
        """All queued messages of an actor, ordered by id."""
        rows = await self._rows(LOAD_QUEUE, (actor_id,))
        return [QueueMessageRecord(*row) for row in rows]

    async def load_history(self, actor_id: str) -> dict[str, bytes]:
        """All workflow history entries of an actor, by location."""
        return {row[0]: row[1] for row in await self._rows(LOAD_HISTORY, (actor_id,))}

    async def load_schedules(self, actor_id: str) -> list[ScheduleRecord]:
        """All scheduled jobs of an actor, ordered by id."""
        rows = await self._rows(LOAD_SCHEDULES, (actor_id,))
        return [ScheduleRecord(*row) for row in rows]

    async def load_events(self, actor_id: str, after_seq: int, limit: int) -> list[EventRecord]:
        """Logged events with ``seq > after_seq``, oldest first, at most ``limit``."""
        if limit <= 0:
            self._check_open()
            return []
        rows = await self._rows(LOAD_EVENTS, (actor_id, after_seq, limit))
        return [EventRecord(*row) for row in rows]

    async def load_fire_history(
        self, actor_id: str, name: str, limit: int
    ) -> list[ScheduleFireRecord]:
        """The newest ``limit`` fires of job ``name``, newest first."""
        if limit <= 0:
            self._check_open()
            return []
        rows = await self._rows(LOAD_FIRES, (actor_id, name, limit))
        return [ScheduleFireRecord(*row) for row in rows]

    async def load_idempotency(self, actor_id: str, key: str) -> IdempotencyRecord | None:
        """The record of the actor's idempotency key ``key``, or ``None``."""
        rows = await self._rows(LOAD_KEY, (actor_id, key))
        if not rows:
            return None
        key, fingerprint, created_at, answer = rows[0]
        return IdempotencyRecord(key, fingerprint, created_at, bytes(answer))

    async def load_idempotency_keys(
        self, actor_id: str, since: int, limit: int
    ) -> list[tuple[str, int]]:
        """The newest ``limit`` keys created at or after ``since``, newest first."""
        if limit <= 0:
            self._check_open()
            return []
        rows = await self._rows(LOAD_KEYS, (actor_id, since, limit))
        return [(row[0], row[1]) for row in rows]

    async def kv_get(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of the actor's KV ``keys`` (``None``: no record), in one query."""
        if not keys:
            self._check_open()
            return []
        wanted = list({bytes(key) for key in keys})
        found = {bytes(k): bytes(v) for k, v in await self._rows(KV_GET, (actor_id, wanted))}
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
            self._check_open()
            return []
        sql = kv_list_sql(end is not None, reverse)
        bound = () if end is None else (bytes(end),)
        rows = await self._rows(sql, (actor_id, bytes(start), *bound, limit))
        return [(bytes(key), bytes(value)) for key, value in rows]

    async def due_actors(self, until: int, limit: int) -> list[tuple[str, int]]:
        """``(actor_id, wake_at)`` of actors due by ``until``, earliest first (ties by id)."""
        if limit <= 0:
            self._check_open()
            return []
        return [(row[0], row[1]) for row in await self._rows(DUE_ACTORS, (until, limit))]

    async def next_wake_at(self) -> int | None:
        """The earliest ``wake_at`` over all actors, or ``None``."""
        wake_at: int | None = (await self._rows(NEXT_WAKE_AT, ()))[0][0]
        return wake_at

    def _check_open(self) -> None:
        if self._pool is None:
            raise StoreClosed("PostgreSQL")

    # --- several nodes: leases and wake-ups ---------------------------------------------

    async def acquire_lease(
        self, actor_id: str, node_id: str, ttl_ms: int, *, now: int | None = None
    ) -> tuple[ActorRecord, Lease]:
        """Take the actor for ``node_id`` (see :meth:`Store.acquire_lease`); waits for
        other sessions' transactions on the row, as :meth:`claim_actor` does."""
        check_ttl(ttl_ms)
        op = AcquireOp(self._new_future(), actor_id, node_id, ttl_ms, now)
        taken: tuple[ActorRecord, Lease] = await self._submit(op, actor_id)
        return taken

    async def release_lease(self, lease: Lease) -> None:
        """Clear the owner if ``lease`` is still the current one."""
        await self._submit(ReleaseOp(self._new_future(), lease), lease.actor_id)

    async def get_lease(self, actor_id: str) -> Lease | None:
        """The lease recorded on the actor, or ``None``."""
        return lease_from_rows(actor_id, await self._rows(GET_LEASE, (actor_id,)))

    # --- membership: on pooled connections, beside the writer ---------------------------

    async def register_node(
        self,
        node_id: str,
        address: str,
        ttl_ms: int,
        *,
        now: int | None = None,
        code_version: str | None = None,
    ) -> NodeRecord:
        """Record the node (an upsert), alive until ``now + ttl_ms`` on the database's clock."""
        check_ttl(ttl_ms)
        params = {
            "node": node_id,
            "address": address,
            "ttl": ttl_ms,
            "now": now,
            "version": code_version,
        }
        return node_from_row((await self._rows(REGISTER_NODE, params))[0])

    async def heartbeat_node(
        self, node_id: str, ttl_ms: int, *, draining: bool = False, now: int | None = None
    ) -> NodeRecord | None:
        """Keep the node alive until ``now + ttl_ms``; ``None`` if it is not registered."""
        check_ttl(ttl_ms)
        params = {"node": node_id, "ttl": ttl_ms, "draining": draining, "now": now}
        rows = await self._rows(HEARTBEAT_NODE, params)
        return node_from_row(rows[0]) if rows else None

    async def deregister_node(self, node_id: str) -> None:
        """Remove the node's row, if there is one."""
        await self._rows(DEREGISTER_NODE, {"node": node_id})

    async def list_nodes(
        self, *, include_dead: bool = False, count_actors: bool = True, now: int | None = None
    ) -> list[NodeRecord]:
        """The live nodes (all with ``include_dead``) by id, with the actors each owns."""
        params = {"include_dead": include_dead, "now": now, "counts": count_actors}
        rows = await self._rows(LIST_NODES, params)
        return [node_from_row(row) for row in rows]

    async def keep_cluster_secret(self, proposed: ClusterSecret) -> ClusterSecret:
        """Insert ``proposed`` unless a secret is kept already, then read the one kept
        (see :meth:`Store.keep_cluster_secret`)."""
        params = {"secret": proposed.secret, "digest": proposed.digest}
        for _ in range(3):
            await self._rows(KEEP_CLUSTER_SECRET, params)
            rows = await self._rows(READ_CLUSTER_SECRET, ())
            if rows:  # else forgotten between the two statements: insert again
                return ClusterSecret(secret=rows[0][0], digest=rows[0][1])
        raise InternalError("The cluster's secret was removed as fast as it was kept.")

    async def forget_cluster_secret(self) -> bool:
        """Delete the kept secret; ``True`` if there was one."""
        return bool(await self._rows(FORGET_CLUSTER_SECRET, ()))

    async def watch_wakeups(self, callback: WakeupCallback) -> Callable[[], None]:
        """Call ``callback(wake_at)`` whenever any node commits an earlier alarm (LISTEN).

        Sent when a commit (or a create) sets an actor's ``wake_at`` earlier than it was
        (or sets one where there was none); delivered after that commit, to every store
        watching the same schema, this one included. ``callback`` runs on the event loop
        and must not block. Notifications sent while the listening connection is down
        (it reconnects by itself) are lost: a watcher polls as well. Returns a function
        that stops the callback.
        """
        async with self._lifecycle:
            if self._pool is None:
                raise StoreClosed("PostgreSQL")
            if self._listener is None:
                listener = WakeupListener(self._connect, self._channel)
                await listener.start()
                self._listener = listener
            return self._listener.add(callback)

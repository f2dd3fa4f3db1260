"""PostgreSQL-specific behaviour: migrations and their lock, reopening, the writer's
isolation and reconnection, NOTIFY wake-ups, leases across sessions, crash durability.

The contract itself runs on PostgreSQL through ``conftest.BACKENDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from perdure.errors import ActorAlreadyExists, ActorNotFound, ActorOwnedElsewhere
from perdure.store import ActorCommit, ActorRecord
from perdure.store.base import QueueMessageRecord
from perdure.store.migrations import MIGRATIONS, Migration, SchemaTooNew
from perdure.store.postgres.merge import MergedCommits, plan_statements
from perdure.store.postgres.ops import CommitOp, CreateOp, DeleteOp
from perdure.store.postgres.schema import apply_postgres_migrations, lock_key, wake_channel
from perdure.store.postgres.sql import DUE_ACTORS, NEXT_WAKE_AT
from perdure.store.postgres.store import PostgresStore
from perdure.store.postgres.writer import PostgresWriter
from tests.store.sqlite.test_store import _run_and_kill, check_acknowledged
from tests.support.postgres import (
    POSTGRES_URL,
    drop_schema,
    new_schema_name,
    postgres_store,
    require_postgres,
    schema_url,
)

pytestmark = pytest.mark.postgres

TIMEOUT = 10.0
NOW = 1_700_000_000_000


def record(actor_id: str, **fields: Any) -> ActorRecord:
    return ActorRecord(actor_id, "counter", (actor_id,), 1_000, **fields)


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name for this test, dropped afterwards."""
    require_postgres()
    name = new_schema_name()
    try:
        yield name
    finally:
        drop_schema(name)


@contextlib.asynccontextmanager
async def opened(schema: str, **options: Any) -> AsyncIterator[PostgresStore]:
    store = postgres_store(schema, **options)
    await asyncio.wait_for(store.open(), TIMEOUT)
    try:
        yield store
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)


@contextlib.asynccontextmanager
async def raw(schema: str | None = None) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A plain autocommit connection (another session, as another node would have)."""
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)
    try:
        if schema is not None:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield conn
    finally:
        await conn.close()


async def rows(schema: str, query: Any, params: Any = ()) -> list[tuple[Any, ...]]:
    async with raw(schema) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()


# --- migrations -------------------------------------------------------------------------


async def test_migrations_are_applied_once_and_recorded(schema: str) -> None:
    async with opened(schema):
        pass
    ledger = "SELECT version, name, applied_at FROM perdure_migrations ORDER BY version"
    first = await rows(schema, ledger)
    assert [(v, n) for v, n, _ in first] == [(m.version, m.name) for m in MIGRATIONS]
    async with opened(schema):
        pass
    assert await rows(schema, ledger) == first  # nothing re-applied, applied_at unchanged


async def test_stores_migrating_one_fresh_schema_at_once_do_not_conflict(schema: str) -> None:
    stores = [postgres_store(schema, pool_max=2) for _ in range(4)]
    try:
        await asyncio.wait_for(asyncio.gather(*(s.open() for s in stores)), TIMEOUT)
        await stores[0].create_actor(record("a1"))
        for store in stores:
            assert await store.get_actor("a1") == record("a1")
    finally:
        for store in stores:
            await store.close()
    assert len(await rows(schema, "SELECT version FROM perdure_migrations")) == len(MIGRATIONS)


async def test_migration_waits_for_the_advisory_lock(schema: str) -> None:
    """Another node holding the schema's migration lock makes ``open`` wait for it."""
    async with raw() as holder:
        await holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(schema),))
        store = postgres_store(schema)
        opening = asyncio.ensure_future(store.open())
        try:
            await asyncio.sleep(0.5)
            assert not opening.done()
            assert (
                await rows("public", "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
                == []
            )
            await holder.execute("SELECT pg_advisory_unlock(%s)", (lock_key(schema),))
            await asyncio.wait_for(opening, TIMEOUT)
        finally:
            await store.close()


async def test_pending_migrations_are_applied_generically(schema: str) -> None:
    async with opened(schema):
        pass
    extra = Migration(
        len(MIGRATIONS) + 1,
        "extra_table",
        sqlite="",
        postgres="CREATE TABLE extra (x TEXT DEFAULT 'a;b'); CREATE INDEX extra_x ON extra (x);",
    )
    async with raw(schema) as conn:
        assert await apply_postgres_migrations(conn, schema, [*MIGRATIONS, extra]) == (
            schema,
            [extra.version],
        )
        assert await apply_postgres_migrations(conn, schema, [*MIGRATIONS, extra]) == (schema, [])
        await conn.execute("INSERT INTO extra DEFAULT VALUES")
        assert await (await conn.execute("SELECT x FROM extra")).fetchall() == [("a;b",)]


async def test_a_failing_migration_leaves_nothing_behind(schema: str) -> None:
    broken = Migration(
        len(MIGRATIONS) + 1, "broken", sqlite="", postgres="CREATE TABLE half (x INT); NOPE;"
    )
    async with raw(schema) as conn:
        with pytest.raises(psycopg.errors.SyntaxError):
            await apply_postgres_migrations(conn, schema, [*MIGRATIONS, broken])
        # DDL is transactional: not even the schema was created.
        found = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        assert await found.fetchall() == []


async def test_a_newer_schema_is_refused(schema: str) -> None:
    async with opened(schema):
        pass
    async with raw(schema) as conn:
        await conn.execute("INSERT INTO perdure_migrations VALUES (999, 'future', 0)")
    store = postgres_store(schema)
    with pytest.raises(SchemaTooNew, match="999"):
        await asyncio.wait_for(store.open(), TIMEOUT)
    await store.close()


# --- reopening, ordering, query plans ---------------------------------------------------


async def test_actors_are_listed_in_byte_order_whatever_the_locale(schema: str) -> None:
    ids = ["b", "B", "_x", "a", "é", "Z", "a-1", "a_1"]
    async with opened(schema) as store:
        for actor_id in ids:
            await store.create_actor(record(actor_id))
        listed = [r.actor_id for r in await store.list_actors()]
        assert listed == sorted(ids, key=lambda text: text.encode())
        assert [r.actor_id for r in await store.list_actors(after="a", limit=2)] == ["a-1", "a_1"]


async def test_alarm_queries_can_use_the_wake_index(schema: str) -> None:
    async with opened(schema):
        pass
    async with raw(schema) as conn:
        await conn.execute("SET enable_seqscan = off")
        for query, params in ((DUE_ACTORS, (1, 10)), (NEXT_WAKE_AT, ())):
            cursor = await conn.execute(f"EXPLAIN {query}", params)
            plan = " ".join(row[0] for row in await cursor.fetchall())
            assert "actors_wake_at" in plan, plan


# --- the writer -------------------------------------------------------------------------


async def test_an_unexpected_error_fails_only_its_own_write(schema: str) -> None:
    """A write PostgreSQL rejects aborts the pipelined batch; the others are replayed."""
    async with opened(schema) as store:
        for index in range(10):
            await store.create_actor(record(f"a{index}"))
        writes = [
            store.commit(ActorCommit(f"a{index}", state=b"ok", history_put={"s": b"1"}))
            for index in range(10)
        ]
        # Out of bigint's range: fails on the server, after the batch has begun.
        writes.insert(3, store.commit(ActorCommit("a3", generation=2**64)))
        # NUL cannot be in a text column: fails in psycopg, before it is even sent.
        writes.insert(6, store.commit(ActorCommit("a5", history_put={"bad\x00": b"x"})))
        results = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), TIMEOUT)
        failures = [type(r).__name__ for r in results if r is not None]
        assert failures == ["NumericValueOutOfRange", "DataError"]
        for index in range(10):
            got = await store.get_actor(f"a{index}")
            assert got is not None
            assert (got.state, got.generation) == (b"ok", 0)
            assert await store.load_history(f"a{index}") == {"s": b"1"}


async def test_one_batch_isolates_expected_and_unexpected_failures(schema: str) -> None:
    """Drive one batch through the writer deterministically (no timing involved)."""
    async with opened(schema) as store:
        await store.create_actor(record("a1"))
        await store.create_actor(record("a2"))
        channel = wake_channel(schema)
        loop = asyncio.get_running_loop()
        ops = [
            CommitOp(loop.create_future(), ActorCommit("a1", state=b"one"), channel),
            CreateOp(loop.create_future(), ActorRecord("a3", "counter", ("a1",), 0), channel),
            CreateOp(loop.create_future(), ActorRecord("a1", "counter", ("new",), 0), channel),
            CommitOp(loop.create_future(), ActorCommit("ghost", state=b"x"), channel),
            CommitOp(loop.create_future(), ActorCommit("a2", generation=2**64), channel),
            DeleteOp(loop.create_future(), "a2"),
            DeleteOp(loop.create_future(), "a2"),
            CreateOp(loop.create_future(), record("a4"), channel),
        ]
        writer = PostgresWriter(store._connect)
        try:
            await writer._write_batch(ops)
        finally:
            await writer.stop()
        outcomes = [type(op.error).__name__ if op.error else op.result for op in ops]
        assert outcomes == [
            None,
            "ActorAlreadyExists",
            "InvalidRequest",
            "ActorNotFound",
            "NumericValueOutOfRange",
            True,
            False,
            None,
        ]
        got = await store.get_actor("a1")
        assert got is not None
        assert got.state == b"one"
        assert await store.get_actor("a2") is None
        assert await store.get_actor("a3") is None
        assert await store.get_actor("a4") == record("a4")


@pytest.mark.parametrize(
    "zombie_write",
    [
        "UPDATE actors SET state = 'late' WHERE actor_id = 'a1'",
        # A commit that writes no actor column only takes FOR KEY SHARE on the row.
        "WITH a AS (SELECT actor_id FROM actors WHERE actor_id = 'a1' FOR KEY SHARE)"
        " INSERT INTO workflow_history SELECT actor_id, 'h', 'late' FROM a",
    ],
)
async def test_a_claim_waits_for_a_previous_owners_last_transaction(
    schema: str, zombie_write: str
) -> None:
    """A killed server's last transaction can still be committing on the server when the
    next process wakes the actor: the claim must come after it, and see what it wrote."""
    async with opened(schema) as store:
        await store.create_actor(record("a1", generation=1))
        async with raw(schema) as zombie:
            await zombie.execute("BEGIN")
            await zombie.execute(zombie_write)
            claim = asyncio.ensure_future(store.claim_actor("a1"))
            done, _ = await asyncio.wait({claim}, timeout=0.3)
            assert not done, "the claim did not wait for the open transaction"
            await zombie.execute("COMMIT")
            claimed = await asyncio.wait_for(claim, TIMEOUT)
        assert claimed is not None
        assert claimed.generation == 2
        if "UPDATE" in zombie_write:
            assert claimed.state == b"late"
        else:
            assert await store.load_history("a1") == {"h": b"late"}
        # From now on the old owner's fenced writes are refused.
        with pytest.raises(ActorNotFound):
            await store.commit(ActorCommit("a1", fence=1, state=b"later"))


async def test_commits_of_distinct_actors_share_one_statement(schema: str) -> None:
    """A run of commits of distinct actors is one merged statement (checked by its plan)
    that writes each commit's net rows, skips a missing actor's and fails only its commit."""
    async with opened(schema) as store:
        for actor_id in ("a1", "a2"):
            await store.create_actor(record(actor_id, wake_at=9))
        await store.commit(ActorCommit("a2", queue_put=[QueueMessageRecord(1, "q", b"old", 0)]))
        channel = wake_channel(schema)
        loop = asyncio.get_running_loop()
        commits = [
            ActorCommit(
                "a1",
                state=b"s1",
                initialized=True,
                queue_next_id=3,
                queue_put=[
                    QueueMessageRecord(2, "q", b"m", 5),
                    QueueMessageRecord(7, "q", b"x", 5),
                ],
                queue_delete=[7],
                history_put={"h1": b"e1", "h2": b"e2"},
                history_delete=["h2"],
            ),
            ActorCommit("ghost", state=b"g", history_put={"h": b"g"}),
            ActorCommit("a2", generation=4, set_wake_at=True, wake_at=None, queue_delete=[1]),
        ]
        ops = [CommitOp(loop.create_future(), commit, channel) for commit in commits]
        statements = plan_statements(list(ops))
        assert len(statements) == 1
        assert isinstance(statements[0], MergedCommits)
        writer = PostgresWriter(store._connect)
        try:
            await writer._write_batch(list(ops))
        finally:
            await writer.stop()
        assert [type(op.error).__name__ if op.error else None for op in ops] == [
            None,
            "ActorNotFound",
            None,
        ]
        first, second = await store.get_actor("a1"), await store.get_actor("a2")
        assert first is not None
        assert second is not None
        assert (first.state, first.initialized, first.queue_next_id, first.wake_at) == (
            b"s1",
            True,
            3,
            9,
        )
        assert (second.state, second.generation, second.wake_at) == (None, 4, None)
        assert await store.load_queue("a1") == [QueueMessageRecord(2, "q", b"m", 5)]
        assert await store.load_queue("a2") == []
        assert await store.load_history("a1") == {"h1": b"e1"}
        assert await store.get_actor("ghost") is None
        assert await store.load_history("ghost") == {}


def test_commits_that_cannot_merge_keep_their_own_statements() -> None:
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future
        ops = [
            CommitOp(future(), ActorCommit("a1", state=b"1"), "c"),
            CommitOp(future(), ActorCommit("a1", state=b"2"), "c"),  # repeated actor
            CommitOp(future(), ActorCommit("a2", history_put={"h": b"1"}), "c"),  # no column
            CommitOp(future(), ActorCommit("a3", set_wake_at=True, wake_at=5), "c"),  # notify
            CommitOp(future(), ActorCommit("a4", state=b"1"), "c"),
            CommitOp(future(), ActorCommit("a5", state=b"1"), "c"),
        ]
        statements = plan_statements(list(ops))
    finally:
        loop.close()
    assert [type(s).__name__ for s in statements] == [
        "CommitOp",
        "CommitOp",
        "CommitOp",
        "CommitOp",
        "MergedCommits",
    ]
    assert statements[:4] == ops[:4]


async def test_the_writer_reconnects_after_losing_its_connection(schema: str) -> None:
    async with opened(schema) as store:
        await store.create_actor(record("a1"))
        assert store._writer is not None
        writer = store._writer.writer_for("a1")
        assert writer._conn is not None
        pid = writer._conn.info.backend_pid
        async with raw() as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The batch that finds the connection dead is sent again on a new one.
        await asyncio.wait_for(store.commit(ActorCommit("a1", state=b"after")), TIMEOUT)
        await store.create_actor(record("a2"))
        got = await store.get_actor("a1")
        assert got is not None
        assert got.state == b"after"
        assert writer._conn.info.backend_pid != pid


async def test_a_resent_create_recognises_its_own_row(schema: str) -> None:
    """After a lost connection a create may have been applied already: not an error."""
    async with opened(schema) as store:
        await store.create_actor(record("a1"))
        loop = asyncio.get_running_loop()
        again = CreateOp(loop.create_future(), record("a1"), wake_channel(schema))
        other = CreateOp(
            loop.create_future(), ActorRecord("a9", "counter", ("a1",), 0), wake_channel(schema)
        )
        again.resent = other.resent = True
        writer = PostgresWriter(store._connect)
        try:
            await writer._write_batch([again, other])
        finally:
            await writer.stop()
        assert again.error is None
        assert isinstance(other.error, ActorAlreadyExists)
        again.future.cancel()
        other.future.cancel()
        # Without the resend flag the same create is the contract's duplicate.
        with pytest.raises(ActorAlreadyExists):
            await store.create_actor(record("a1"))


async def test_power_durability_turns_synchronous_commit_back_on(schema: str) -> None:
    url = POSTGRES_URL + ("&" if "?" in POSTGRES_URL else "?")
    url += "options=-c%20synchronous_commit%3Doff"
    store = PostgresStore(url, schema=schema, durability="power", pool_max=2, writers=2)
    await store.open()
    try:
        assert store._writer is not None
        assert len(store._writer.writers) == 2
        for writer in store._writer.writers:
            assert writer._conn is not None
            cursor = await writer._conn.execute("SHOW synchronous_commit")
            assert await cursor.fetchone() == ("on",)
        await store.create_actor(record("a1"))
        assert await store.get_actor("a1") == record("a1")
    finally:
        await store.close()


def test_invalid_options_are_refused() -> None:
    with pytest.raises(ValueError, match="durability"):
        PostgresStore(POSTGRES_URL, durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pool_min"):
        PostgresStore(POSTGRES_URL, pool_min=5, pool_max=2)
    with pytest.raises(ValueError, match="schema"):
        PostgresStore(POSTGRES_URL, schema="")


async def test_an_unreachable_server_fails_open() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1)
    with pytest.raises(psycopg.OperationalError, match="connect"):
        await asyncio.wait_for(store.open(), TIMEOUT)
    with pytest.raises(Exception, match="not open"):
        await store.get_actor("a1")
    await store.close()


# --- LISTEN / NOTIFY --------------------------------------------------------------------


async def test_an_earlier_alarm_notifies_every_watcher(schema: str) -> None:
    async with opened(schema) as watcher, opened(schema) as other:
        seen: asyncio.Queue[int] = asyncio.Queue()
        stop = await watcher.watch_wakeups(seen.put_nowait)
        await other.create_actor(record("a1"))
        await other.create_actor(record("a2", wake_at=NOW + 500))  # a new alarm notifies
        assert await asyncio.wait_for(seen.get(), TIMEOUT) == NOW + 500
        await other.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 100))
        assert await asyncio.wait_for(seen.get(), TIMEOUT) == NOW + 100
        # Later than the actor's alarm, cleared, or unchanged: nothing to say.
        await other.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 200))
        await other.commit(ActorCommit("a2", set_wake_at=True, wake_at=None))
        await other.commit(ActorCommit("a1", state=b"s"))
        # Earlier again: notifications arrive in commit order, so this being next proves
        # that none of the three above sent one.
        await other.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 50))
        assert await asyncio.wait_for(seen.get(), TIMEOUT) == NOW + 50
        stop()
        await other.commit(ActorCommit("a2", set_wake_at=True, wake_at=NOW + 10))
        await asyncio.sleep(0.2)
        assert seen.empty()


async def test_the_notification_is_sent_on_commit_on_the_schema_channel(schema: str) -> None:
    async with opened(schema) as store, raw() as listener:
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(wake_channel(schema))))
        await store.create_actor(record("a1"))
        await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW))
        notifies = listener.notifies(timeout=TIMEOUT, stop_after=1)
        payloads = [notify.payload async for notify in notifies]
        assert payloads == [str(NOW)]
    assert wake_channel(schema) != wake_channel(schema + "x")


async def test_a_failed_commit_notifies_nobody(schema: str) -> None:
    async with opened(schema) as store:
        seen: list[int] = []
        await store.watch_wakeups(seen.append)
        with pytest.raises(ActorNotFound):
            await store.commit(ActorCommit("ghost", set_wake_at=True, wake_at=NOW))
        await store.create_actor(record("a1"))
        await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 1))
        async with asyncio.timeout(TIMEOUT):
            while not seen:
                await asyncio.sleep(0.01)
        assert seen == [NOW + 1]


async def test_a_failing_watcher_does_not_stop_the_others(schema: str) -> None:
    def broken(wake_at: int) -> None:
        raise RuntimeError("watcher bug")

    async with opened(schema) as store:
        seen: asyncio.Queue[int] = asyncio.Queue()
        await store.watch_wakeups(broken)
        await store.watch_wakeups(seen.put_nowait)
        await store.create_actor(record("a1"))
        await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW))
        assert await asyncio.wait_for(seen.get(), TIMEOUT) == NOW
        await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW - 1))
        assert await asyncio.wait_for(seen.get(), TIMEOUT) == NOW - 1


# --- leases -----------------------------------------------------------------------------
# The lease contract runs on every backend (test_contract_leases.py); these are the parts
# only PostgreSQL has: other sessions, row locks and the database clock.


async def _lease(schema: str, actor_id: str) -> tuple[Any, ...]:
    found = await rows(
        schema,
        "SELECT owner_node, generation, lease_expires_at FROM actors WHERE actor_id = %s",
        (actor_id,),
    )
    return found[0]


async def test_the_second_fencing_counter_is_gone(schema: str) -> None:
    async with opened(schema):
        pass
    columns = await rows(
        schema,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'actors'",
        (schema,),
    )
    names = {name for (name,) in columns}
    assert {"generation", "owner_node", "lease_expires_at"} <= names
    assert "lease_generation" not in names


async def test_leases_use_the_database_clock_by_default(schema: str) -> None:
    async with opened(schema) as store:
        await store.create_actor(record("a1"))
        _, lease = await store.acquire_lease("a1", "n1", 60_000)
        (now_ms,) = (await rows(schema, "SELECT (extract(epoch FROM now()) * 1000)::bigint"))[0]
        assert abs(lease.expires_at - (now_ms + 60_000)) < 10_000
        assert await _lease(schema, "a1") == ("n1", 1, lease.expires_at)


async def test_an_acquire_waits_for_a_previous_owners_last_transaction(schema: str) -> None:
    """As a claim does (see above): the lease and the record come after that commit."""
    async with opened(schema) as store:
        await store.create_actor(record("a1", generation=1))
        async with raw(schema) as zombie:
            await zombie.execute("BEGIN")
            await zombie.execute("UPDATE actors SET state = 'late' WHERE actor_id = 'a1'")
            acquire = asyncio.ensure_future(store.acquire_lease("a1", "n1", 60_000))
            done, _ = await asyncio.wait({acquire}, timeout=0.3)
            assert not done, "the acquire did not wait for the open transaction"
            await zombie.execute("COMMIT")
            taken, lease = await asyncio.wait_for(acquire, TIMEOUT)
        assert (taken.state, taken.generation, lease.generation) == (b"late", 2, 2)
        with pytest.raises(ActorNotFound):
            await store.commit(ActorCommit("a1", fence=1, state=b"later"))


async def test_a_claim_refused_by_a_lease_committed_meanwhile_names_its_owner(
    schema: str,
) -> None:
    """The lease test reads the row as the other session committed it, not as it was
    when the statement started."""
    async with opened(schema) as store:
        await store.create_actor(record("a1"))
        async with raw(schema) as other:
            await other.execute("BEGIN")
            await other.execute(
                "UPDATE actors SET owner_node = 'n2', generation = generation + 1,"
                " lease_expires_at = (extract(epoch FROM now()) * 1000)::bigint + 60000"
                " WHERE actor_id = 'a1'"
            )
            claim = asyncio.ensure_future(store.claim_actor("a1"))
            acquire = asyncio.ensure_future(store.acquire_lease("a1", "n1", 1_000))
            await asyncio.sleep(0.3)
            assert not claim.done()
            await other.execute("COMMIT")
            with pytest.raises(ActorOwnedElsewhere) as refused:
                await asyncio.wait_for(claim, TIMEOUT)
            assert refused.value.owner_node == "n2"
            with pytest.raises(ActorOwnedElsewhere):
                await asyncio.wait_for(acquire, TIMEOUT)
        assert await _lease(schema, "a1") == ("n2", 1, refused.value.expires_at)


# --- crash durability -------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
async def test_acknowledged_commits_survive_kill_9(schema: str) -> None:
    acknowledged = await _run_and_kill(schema_url(schema), wanted=600)
    assert len(acknowledged) == 8
    async with opened(schema) as store:
        await check_acknowledged(store, acknowledged)

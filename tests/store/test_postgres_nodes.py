"""PostgreSQL-specific behaviour of membership and bulk lease renewal: the renewal never
waits for a row lock while holding others (it cannot deadlock with the writer), the
database's clock, and the owner index behind each node's actor count.

The contract itself runs on PostgreSQL through ``conftest.BACKENDS``
(test_contract_nodes.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from perdure.store import Lease
from perdure.store.postgres.nodes import LIST_NODES
from perdure.store.postgres.store import PostgresStore

from ..support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres
from .test_postgres import NOW, TIMEOUT, raw, record, rows

pytestmark = pytest.mark.postgres

PAST = 1_000_000


@pytest.fixture
async def opened_store() -> AsyncIterator[PostgresStore]:
    """An open store in a fresh schema (``store.schema``), dropped afterwards."""
    require_postgres()
    store = postgres_store(new_schema_name())
    await asyncio.wait_for(store.open(), TIMEOUT)
    try:
        yield store
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)
        assert store.schema is not None
        drop_schema(store.schema)


async def _expiry(schema: str, actor_id: str) -> int | None:
    [(expires_at,)] = await rows(
        schema, "SELECT lease_expires_at FROM actors WHERE actor_id = %s", (actor_id,)
    )
    return expires_at  # type: ignore[no-any-return]


async def _acquired(store: PostgresStore, *actor_ids: str) -> list[Lease]:
    leases: list[Lease] = []
    for actor_id in actor_ids:
        await store.create_actor(record(actor_id))
        leases.append((await store.acquire_lease(actor_id, "n1", 1_000, now=PAST))[1])
    return leases


async def test_a_renewal_does_not_deadlock_with_a_transaction_writing_its_actors(
    opened_store: PostgresStore,
) -> None:
    """The writer's transaction locks a1, then wants a2. A renewal of [a2, a1] that
    locked a2 and waited for a1 would deadlock with it; this one renews a2 at once,
    and a1 once that transaction has committed."""
    store, schema = opened_store, opened_store.schema
    assert schema is not None
    a2, a1 = await _acquired(store, "a2", "a1")
    async with raw(schema) as writer:
        await writer.execute("BEGIN")
        await writer.execute("UPDATE actors SET state = 'x' WHERE actor_id = 'a1'")
        renewal = asyncio.ensure_future(store.renew_leases([a2, a1], 5_000, now=PAST + 2_000))
        async with asyncio.timeout(TIMEOUT):
            while await _expiry(schema, "a2") != PAST + 7_000:
                await asyncio.sleep(0.01)
        assert not renewal.done(), "a1 was renewed under the open transaction's lock"
        # Would wait for the renewal's lock on a2 if it still held it.
        await asyncio.wait_for(
            writer.execute("UPDATE actors SET state = 'y' WHERE actor_id = 'a2'"), 2
        )
        assert await _expiry(schema, "a1") == PAST + 1_000
        await writer.execute("COMMIT")
    renewed = await asyncio.wait_for(renewal, TIMEOUT)
    assert renewed == [
        Lease("a2", "n1", a2.generation, PAST + 7_000),
        Lease("a1", "n1", a1.generation, PAST + 7_000),
    ]
    assert await _expiry(schema, "a1") == PAST + 7_000


async def test_a_busy_lease_taken_while_the_renewal_waits_is_lost(
    opened_store: PostgresStore,
) -> None:
    store, schema = opened_store, opened_store.schema
    assert schema is not None
    a1, a2 = await _acquired(store, "a1", "a2")
    async with raw(schema) as other:
        await other.execute("BEGIN")
        await other.execute(
            "UPDATE actors SET owner_node = 'n2', generation = generation + 1,"
            " lease_expires_at = %s WHERE actor_id = 'a1'",
            (NOW,),
        )
        renewal = asyncio.ensure_future(store.renew_leases([a1, a2], 5_000, now=PAST + 2_000))
        await asyncio.sleep(0.3)
        assert not renewal.done()
        await other.execute("COMMIT")
    renewed = await asyncio.wait_for(renewal, TIMEOUT)
    assert renewed == [Lease("a2", "n1", a2.generation, PAST + 7_000)]
    assert await store.get_lease("a1") == Lease("a1", "n2", a1.generation + 1, NOW)


async def test_membership_uses_the_database_clock_by_default(
    opened_store: PostgresStore,
) -> None:
    store, schema = opened_store, opened_store.schema
    assert schema is not None
    node = await store.register_node("n1", "http://n1:6420", 60_000)
    [(now_ms,)] = await rows(schema, "SELECT (extract(epoch FROM now()) * 1000)::bigint")
    assert abs(node.started_at - now_ms) < 10_000
    assert node.expires_at == node.heartbeat_at + 60_000
    beat = await store.heartbeat_node("n1", 120_000, draining=True)
    assert beat is not None
    assert beat.heartbeat_at >= node.heartbeat_at
    assert (beat.expires_at, beat.draining) == (beat.heartbeat_at + 120_000, True)
    [(_, _, _, _, _, stored_draining)] = await rows(schema, "SELECT * FROM nodes")
    assert stored_draining is True  # a real boolean column


async def test_node_ids_are_listed_in_byte_order_whatever_the_locale(
    opened_store: PostgresStore,
) -> None:
    ids = ["b", "B", "_x", "a", "é", "Z", "a-1", "a_1"]
    for node_id in ids:
        await opened_store.register_node(node_id, "http://x", 60_000)
    listed = [node.node_id for node in await opened_store.list_nodes()]
    assert listed == sorted(ids, key=lambda text: text.encode())


async def test_counting_a_nodes_actors_can_use_the_owner_index(
    opened_store: PostgresStore,
) -> None:
    assert opened_store.schema is not None
    async with raw(opened_store.schema) as conn:
        await conn.execute("SET enable_seqscan = off")
        params = {"include_dead": False, "now": NOW, "counts": True}
        cursor = await conn.execute(f"EXPLAIN {LIST_NODES}", params)
        plan = " ".join(row[0] for row in await cursor.fetchall())
    assert "actors_owner_node" in plan, plan

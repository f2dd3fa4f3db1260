"""PostgreSQL-specific behaviour of membership: the database's clock, node ids in byte
order, and the owner index behind each node's actor count.

The contract itself runs on PostgreSQL through ``conftest.BACKENDS``
(test_contract_nodes.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from perdure.store.postgres.nodes import LIST_NODES
from perdure.store.postgres.store import PostgresStore
from tests.store.postgres.test_store import NOW, TIMEOUT, raw, rows
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

pytestmark = pytest.mark.postgres


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
    [(_, _, _, _, _, stored_draining, _)] = await rows(schema, "SELECT * FROM nodes")
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


async def test_the_cluster_secret_is_kept_from_other_roles(opened_store: PostgresStore) -> None:
    """Only the role that owns the tables (the nodes') may read the cluster's secret: the
    migration grants PUBLIC nothing on its table."""
    schema = opened_store.schema
    assert schema is not None
    [(readable,)] = await rows(
        schema, "SELECT has_table_privilege('public', 'cluster_secret', 'SELECT')"
    )
    assert readable is False

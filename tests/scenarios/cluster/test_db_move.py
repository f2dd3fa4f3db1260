"""A ``c.db`` actor moves with its rows: three real nodes on one PostgreSQL, the node
that serves the actor killed with SIGKILL, and a survivor answers with every row, the
KV records and the state its acknowledged actions wrote (the pages are rows of the
store, not files beside the dead node), its database intact."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from perdure.client import ActorError, TransportError, create_client
from tests.support.apps.db_crash import KEYS, ROWS
from tests.support.cluster import Cluster
from tests.support.postgres import postgres_store

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

ACTIONS = 40
TAKEOVER_LIMIT = 20.0


async def test_a_db_actor_answers_with_all_its_rows_after_its_node_is_killed(
    tmp_path: Path,
) -> None:
    cluster = Cluster("tests.support.apps.db_crash:registry", 3, base_dir=tmp_path, lease_ttl=2.0)
    await asyncio.to_thread(cluster.start)
    try:
        async with (
            create_client(cluster.node(0).url) as first,
            create_client(cluster.node(1).url) as second,
        ):
            ledger = first.ledger.get_or_create(["moving"])
            for n in range(ACTIONS):  # served by node 0, where the actor woke
                assert await ledger.apply(n) == n
            actor_id = await ledger.resolve()
            assert await _owner(cluster, actor_id) == "node-0"
            await asyncio.to_thread(cluster.node(0).kill)
            survivor = second.ledger.get_or_create(["moving"])
            deadline = time.monotonic() + TAKEOVER_LIMIT
            while True:
                try:
                    audit = await survivor.audit()
                    break
                except (TransportError, ActorError):
                    assert time.monotonic() < deadline, "no survivor took the actor over"
                    await asyncio.sleep(0.1)
            assert await _owner(cluster, actor_id) == "node-1"  # it moved
    finally:
        await asyncio.to_thread(cluster.close)
    assert audit["ops"] == list(range(ACTIONS))
    assert audit["rows"] == {str(n): ROWS for n in range(ACTIONS)}
    assert audit["keys"] == {str(n): KEYS for n in range(ACTIONS)}
    assert audit["last"] == ACTIONS - 1
    assert audit["integrity"] == "ok"


async def _owner(cluster: Cluster, actor_id: str) -> str | None:
    """The node whose lease the actor is under, as the store says."""
    store = postgres_store(cluster.schema)
    await store.open()
    try:
        lease = await store.get_lease(actor_id)
    finally:
        await store.close()
    return None if lease is None else lease.node_id

"""A subscriber on one node of a PostgreSQL cluster sees every event exactly once, in
order, while its actor moves to that node: the actor's owner (another node) is killed
with ``kill -9``, its lease lapses, this node takes the actor over, and the subscriber's
socket (piped to the old owner until then) resumes from the last number it received,
from the event log in the shared database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.client import create_client
from tests.scenarios.events.drive import caught_up, drive
from tests.support.cluster import Cluster
from tests.support.wait import eventually

pytestmark = [pytest.mark.timeout(180), pytest.mark.postgres]

TTL = 2.0


async def test_every_event_once_in_order_when_the_actor_moves(tmp_path: Path) -> None:
    with Cluster(
        "tests.scenarios.events.app:registry", 2, base_dir=tmp_path, lease_ttl=TTL
    ) as cluster:
        owner, other = cluster.nodes
        async with (
            create_client(owner.url) as on_owner,
            create_client(other.url, max_reconnect_delay=0.5) as on_other,
        ):
            # A connection on the first node keeps the actor awake there.
            keeper = on_owner.counter.get_or_create(["m"]).connect()
            await asyncio.wait_for(keeper.wait_open(), 10)
            assert [n["actors"] for n in cluster.live_nodes()] == [1, 0]
            handle = on_other.counter.get_or_create(["m"])  # forwarded to the owner
            conn = handle.connect()
            seen: list[int] = []
            conn.on("changed", seen.append)
            await asyncio.wait_for(conn.wait_open(), 10)
            stop = asyncio.Event()

            drivers = [asyncio.create_task(drive(handle, stop)) for _ in range(3)]
            try:
                await eventually(lambda: len(seen) >= 20, timeout=30, what="events")
                owner.kill()
                moved = len(seen)
                await eventually(lambda: len(seen) >= moved + 20, timeout=60, what="events")
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*drivers), 30)
            final = await caught_up(handle, seen)
            # The actor now lives on the surviving node (the subscriber keeps it awake).
            assert [n["actors"] for n in cluster.live_nodes()] == [1]
            await conn.dispose()
    assert seen == list(range(1, final + 1)), (seen[:5], len(seen), final)

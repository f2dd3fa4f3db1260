"""An actor reaches another that lives on a different node through ``c.client()``:
actions are forwarded, and a connection is opened on the other node, its events
delivered to the caller."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.client import create_client
from tests.support.cluster import Cluster

pytestmark = pytest.mark.postgres


async def test_an_actor_follows_events_of_an_actor_on_another_node(tmp_path: Path) -> None:
    with Cluster("tests.scenarios.cluster.app:registry", 2, base_dir=tmp_path) as cluster:
        first, second = cluster.nodes
        async with create_client(first.url) as on_first, create_client(second.url) as on_second:
            progress = on_second.progressActor.get_or_create(["followed"])
            await progress.getState()  # lives on the second node
            watcher = on_first.watcher.get_or_create(["w"])
            assert await watcher.ask("followed") == await progress.getState()
            followed_id = await watcher.follow("followed")  # lives on the first node
            assert followed_id == await progress.resolve()
            rows = {n["node_id"]: n["actors"] for n in cluster.live_nodes()}
            assert rows == {first.node_id: 1, second.node_id: 1}
            for value in (1, 2, 3):
                await progress.send("jobs", {"value": value})
            async with asyncio.timeout(15):
                while (seen := await watcher.seen())[-1:] != [3]:
                    await asyncio.sleep(0.05)
    assert seen == sorted(seen)
    assert 3 in seen

"""Cancel, pause and the pushed result on a three-node PostgreSQL cluster: the controls
reach the owner through any node, a pause survives the owner's ``kill -9`` and the move
of its actor, and a result wait is answered through another node."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.client import AsyncClient
from perdure.errors import WorkflowCancelled
from tests.scenarios.workflows.waiters import check_long_wait
from tests.support.cluster import Cluster
from tests.support.wait import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

REGISTRY = "tests.scenarios.workflows.control_app:registry"
WAIT = 30.0


async def test_a_cancel_through_another_node_compensates_once(cluster: Cluster) -> None:
    first, second, third = (AsyncClient(url) for url in cluster.urls)
    try:
        saga = first.saga.get_or_create("order-1")  # wakes on the first node
        await eventually(lambda: _logged(saga, "slow started"), timeout=WAIT)
        result = asyncio.ensure_future(third.saga.get("order-1").workflow_result(timeout=WAIT))
        await second.saga.get("order-1").cancel_workflow("through another node")
        with pytest.raises(WorkflowCancelled) as raised:
            await result
        assert raised.value.reason == "through another node"
        assert await saga.log() == [
            "reserve",
            "charge",
            "slow started",
            "slow done",
            "undo slow",
            "undo charge",
            "undo reserve",
        ]
    finally:
        for client in (first, second, third):
            await client.close()


async def test_a_pause_survives_the_owners_kill_9_and_the_move(cluster: Cluster) -> None:
    first, second, third = (AsyncClient(url) for url in cluster.urls)
    try:
        paced = first.paced.get_or_create("p")  # wakes on the first node
        await eventually(lambda: _counted_at_least(paced, 2), timeout=WAIT)
        assert (await second.paced.get("p").pause_workflow())["status"] == "paused"
        await asyncio.to_thread(cluster.node(0).kill)
        moved = third.paced.get("p")

        async def paused_elsewhere() -> bool:
            try:
                return (await moved.workflow_status())["status"] == "paused"
            except Exception:
                return False  # the owner's leases have not lapsed yet

        await eventually(paused_elsewhere, timeout=WAIT)
        held = await moved.count()
        await asyncio.sleep(0.8)
        assert await moved.count() == held
        await second.paced.get("p").resume_workflow()
        assert await moved.workflow_result(timeout=WAIT) == 10
        assert await moved.count() == 10
    finally:
        for client in (first, second, third):
            await client.close()


async def _logged(handle: Any, line: str) -> bool:
    return line in await handle.log()


async def _counted_at_least(handle: Any, count: int) -> bool:
    return int(await handle.count()) >= count


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_hundred_waiters_through_every_node_on_a_30_s_run(cluster: Cluster) -> None:
    """The issue's figure on the cluster: the run lives on the first node, the waiters
    ask all three (two thirds of them forwarded to the owner and held there)."""
    check_long_wait(cluster.urls, cluster.urls[0])

"""SIGTERM drains a node: its actors move at once, and a rolling restart loses nothing.

The lease TTL here is long (30 s): a takeover that had to wait for a lease to expire
would take that long, so a quick one proves the draining node released its leases.
Clients go through a real HAProxy in front of the three nodes and retry a send that
failed to connect; every job must be applied exactly once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from perdure.client import ActorError, AsyncActorHandle, TransportError, create_client
from tests.support.cluster import Balancer, Cluster, require_haproxy

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

TTL = 30.0
JOBS = 300
BASE = 8


async def send_retrying(handle: AsyncActorHandle, job: int, retries: list[int]) -> None:
    """Send job ``job``, retrying (bounded) when the connection fails."""
    for attempt in range(100):
        try:
            await handle.send("jobs", {"value": BASE**job})
            return
        except TransportError:
            retries.append(job)
            await asyncio.sleep(0.05 * min(attempt + 1, 5))
    raise AssertionError(f"job {job} could not be sent")


async def state_of(handle: AsyncActorHandle, timeout: float = 30) -> dict[str, object]:
    async with asyncio.timeout(timeout):
        while True:
            try:
                state: dict[str, object] = await handle.getState()
                if await handle.queueSize() == 0:
                    return state
            except (TransportError, ActorError):
                pass
            await asyncio.sleep(0.05)


async def test_sigterm_hands_actors_over_without_waiting_for_the_ttl(tmp_path: Path) -> None:
    with Cluster(
        "tests.scenarios.cluster.app:registry", 2, base_dir=tmp_path, lease_ttl=TTL
    ) as cluster:
        first, second = cluster.nodes
        async with create_client(first.url) as on_first, create_client(second.url) as on_second:
            await on_first.progressActor.get_or_create(["drain"]).send("jobs", {"value": 1})
            assert [n["actors"] for n in cluster.live_nodes()] == [1, 0]
            assert await asyncio.to_thread(first.terminate) == 0
            started = time.monotonic()
            handle = on_second.progressActor.get_or_create(["drain"])
            await handle.send("jobs", {"value": 8})
            took = time.monotonic() - started
            state = await state_of(handle)
        assert [n["node_id"] for n in cluster.live_nodes()] == [second.node_id]
    assert state["sum"] == 9
    assert took < TTL / 3, f"took {took:.1f} s: the lease was not released"


# 9 s; the suite keeps a rolling restart behind HAProxy in test_balancer.py
# (test_rolling_restart_through_the_balancer) and CI's scripts/smoke_recipes.py.
@pytest.mark.slow
async def test_a_rolling_restart_behind_haproxy_loses_no_retried_request(tmp_path: Path) -> None:
    require_haproxy()
    with (
        Cluster(
            "tests.scenarios.cluster.app:registry", 3, base_dir=tmp_path, lease_ttl=TTL
        ) as cluster,
        Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as balancer,
    ):
        async with create_client(balancer.url, max_reconnect_delay=0.5) as client:
            handle = client.progressActor.get_or_create(["rolling"])
            await handle.getState()
            retries: list[int] = []
            jobs = iter(range(JOBS))

            async def sender() -> None:
                for job in jobs:
                    await send_retrying(handle, job, retries)
                    await asyncio.sleep(0.01)

            async def roll() -> list[int]:
                codes = []
                for node in cluster.nodes:
                    await asyncio.sleep(0.5)
                    codes.append(await asyncio.to_thread(node.terminate))
                    await asyncio.to_thread(node.restart)
                return codes

            async with asyncio.timeout(180):
                results = await asyncio.gather(roll(), *(sender() for _ in range(8)))
            state = await state_of(handle)
    exit_codes = results[0]
    assert exit_codes == [0, 0, 0]
    assert all(node.starts == 2 for node in cluster.nodes)
    total = int(state["sum"])  # type: ignore[call-overload]
    counts = [(total // BASE**i) % BASE for i in range(JOBS)]
    assert counts == [1] * JOBS, f"jobs applied other than once; retried {sorted(set(retries))}"
    assert state["progress"] == {"stage": "completed", "completed": JOBS, "total": JOBS}

"""Two rolling deploys of three nodes behind HAProxy, under load (issue 33, item 2).

A steady client starts workflow runs through the balancer and, a few runs later, sends
each its ``go``. Meanwhile the three nodes are upgraded one at a time as docs/deploy.md
says (SIGTERM, new code, start, wait until HAProxy sends it requests again):

1. v1 → v2, a compatible change (the steps' internals rewritten): v1 runs are served on
   v1 nodes while any lives, then continue on v2.
2. v2 → v3, an incompatible one for runs past ``charge`` (a step inserted before it).
   As the procedure says, a node on the old code (v2, outside the balancer) serves the
   old runs until they are done, while new runs start on v3: either started before the
   deploy (``kept``), or started after it (``restored``), when the old runs that were
   reached on v3 wait (``waiting_for_version``, counted by the gauge) and then move to it.

Every run must complete, each on code its history replays on (a run with a v3 step has
only v3 steps), none failing for the deploys, and no run is left waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.client import ActorError, AsyncClient, TransportError, create_client
from tests.support.cluster import Balancer, Cluster, ClusterNode, require_haproxy
from tests.support.scrape import scrape

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

APP = "tests.scenarios.cluster.versioned_app"
LAG = 4  # a run gets its `go` this many runs after it started
RETRIES = 200


class RunLoad:
    """Starts run ``r<k>`` and sends ``go`` to run ``r<k - LAG>``, every 50 ms."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.started = 0
        self.sent = 0
        self.retried = 0
        self.error: BaseException | None = None
        self._stop = asyncio.Event()

    async def retrying(self, work: Any) -> Any:
        """``work()``, again after a connection error or a 503 (bounded)."""
        for _ in range(RETRIES):
            try:
                return await work()
            except TransportError:
                pass
            except ActorError as exc:
                if exc.http_status != 503:
                    raise
            self.retried += 1
            await asyncio.sleep(0.05)
        raise AssertionError("no answer after retrying")

    def handle(self, k: int) -> Any:
        return self.client.job.get_or_create([f"r{k}"])

    async def go(self, k: int) -> None:
        await self.retrying(lambda: self.handle(k).send("go", {}))

    async def run(self) -> None:
        try:
            while not self._stop.is_set():
                k = self.started
                await self.retrying(lambda k=k: self.handle(k).trail())  # the run starts
                self.started += 1
                if self.sent + LAG < self.started:
                    await self.go(self.sent)
                    self.sent += 1
                await asyncio.sleep(0.05)
        except BaseException as exc:
            self.error = exc
            raise

    async def progress(self, runs: int, timeout: float = 30) -> None:
        target = self.started + runs
        async with asyncio.timeout(timeout):
            while self.started < target:
                assert self.error is None, self.error
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()


async def upgrade(node: ClusterNode, registry: str, balancer: Balancer, load: RunLoad) -> None:
    """One step of a rolling deploy, as docs/deploy.md section 5 says."""
    await load.progress(5)
    assert await asyncio.to_thread(node.terminate) == 0
    await asyncio.to_thread(balancer.wait_status, {node.node_id: "DOWN"})
    node.registry = registry
    await asyncio.to_thread(node.restart)
    await asyncio.to_thread(balancer.wait_status, {node.node_id: "UP"}, checked=True)


async def finished(load: RunLoad, runs: int) -> list[list[dict[str, Any]]]:
    """Every run's trail once it has finished (each sent its `go` first)."""
    for k in range(load.sent, runs):
        await load.go(k)
    trails = []
    async with asyncio.timeout(60):
        for k in range(runs):
            while True:
                status = await load.retrying(lambda k=k: load.handle(k).workflow_status())
                assert status["status"] not in ("failed", "cancelled"), (k, status)
                if status["status"] == "completed":
                    break
                await asyncio.sleep(0.05)
            trails.append(await load.retrying(lambda k=k: load.handle(k).trail()))
    return trails


@contextlib.contextmanager
def logs_on_failure(cluster: Cluster, extra: ClusterNode) -> Iterator[None]:
    try:
        yield
    except BaseException:
        print(cluster.logs()[-12000:])
        print("===== old-code node =====\n" + extra.log()[-6000:])
        raise


async def held_runs(urls: list[str]) -> float:
    """Runs held for their version on these nodes (their gauges summed)."""
    total = 0.0
    async with httpx.AsyncClient(timeout=10) as http:
        for url in urls:
            samples = await scrape(http, f"{url}/metrics")
            total += samples.total("perdure_workflows_waiting_for_version")
    return total


@pytest.mark.parametrize("old_node", ["kept", "restored"])
async def test_two_rolling_deploys_under_load_fail_no_run(tmp_path: Path, old_node: str) -> None:
    require_haproxy()
    with (
        Cluster(f"{APP}:registry_v1", 3, base_dir=tmp_path) as cluster,
        Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as balancer,
    ):
        # The node that keeps the old code through the second deploy (no balancer traffic).
        keeper = ClusterNode(
            f"{APP}:registry_v2", tmp_path / "keeper", store=cluster.store, node_id="keeper"
        )
        with logs_on_failure(cluster, keeper):
            async with create_client(balancer.url) as client:
                load = RunLoad(client)
                running = asyncio.create_task(load.run())
                for node in cluster.nodes:  # 1. v1 -> v2 (compatible)
                    await upgrade(node, f"{APP}:registry_v2", balancer, load)
                if old_node == "kept":
                    await asyncio.to_thread(keeper.start)
                for node in cluster.nodes:  # 2. v2 -> v3 (incompatible for old runs)
                    await upgrade(node, f"{APP}:registry_v3", balancer, load)
                await load.progress(5)
                if old_node == "restored":
                    # Old runs reached on v3 nodes wait, visibly, until an old node is back.
                    async with asyncio.timeout(10):
                        while not await held_runs(cluster.urls):
                            await asyncio.sleep(0.1)
                    await asyncio.to_thread(keeper.start)
                load.stop()
                await running
                trails = await finished(load, load.started)
                assert await held_runs([*cluster.urls, keeper.url]) == 0
            kept = keeper.pid
            keeper.terminate()
    codes = [{entry["code"] for entry in trail} for trail in trails]
    for k, (trail, used) in enumerate(zip(trails, codes, strict=True)):
        assert [e["step"] for e in trail][-1] == "finish", (k, trail)
        assert used <= {"v1", "v2"} or used == {"v3"}, (k, trail)
    mixed = sum(1 for used in codes if used == {"v1", "v2"})
    # Old runs still waiting for their `go` when the last v2 node behind the balancer
    # was upgraded were served by the node kept on the old code.
    on_keeper = sum(1 for trail in trails if trail[-1]["pid"] == kept)
    print(
        f"{len(trails)} runs, {load.retried} retried requests; by code: "
        f"v1 {codes.count({'v1'})}, v1+v2 {mixed}, v2 {codes.count({'v2'})}, "
        f"v3 {codes.count({'v3'})}; finished on the old-code node: {on_keeper}"
    )
    assert on_keeper > 0
    assert codes.count({"v3"}) > 0
    assert codes.count({"v1"}) > 0

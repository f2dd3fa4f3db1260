"""Version-aware placement over real nodes on PostgreSQL (issue 33, item 2).

Three nodes run three versions of one workflow app (``versioned_app.py``): v1, v2 (the
steps' internals rewritten: v1 histories replay) and v3 (a step inserted: v1 histories
past it diverge). Runs started on v1 stay on the v1 node while it lives; once it is
stopped, a run continues on v2 (decided as the actor wakes: the nodes run two versions),
and, with the v3 node alone, one waits there with the status ``waiting_for_version``
(client, inspector, /metrics; decided in the run task: one version) until a v1 node
returns.
Every step records which code ran it, in which process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.client import ActorError, AsyncActorHandle, TransportError, create_client
from perdure.registry import registry_digest
from tests.scenarios.cluster import versioned_app
from tests.support.admin_api import actor_details
from tests.support.cluster import Cluster, ClusterNode
from tests.support.scrape import scrape

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

APP = "tests.scenarios.cluster.versioned_app"
V1 = registry_digest(versioned_app.registry_v1)


def versioned_cluster(tmp_path: Path) -> Cluster:
    """Node 0 runs v1, node 1 v2, node 2 v3 (each its registry's default version)."""
    cluster = Cluster(f"{APP}:registry_v1", 3, base_dir=tmp_path)
    for index in (1, 2):
        old = cluster.nodes[index]
        cluster.nodes[index] = ClusterNode(
            f"{APP}:registry_v{index + 1}",
            old.data_dir,
            store=cluster.store,
            node_id=old.node_id,
            lease_ttl=old.lease_ttl,
        )
    return cluster


async def eventually(probe: Any, timeout: float = 20.0) -> Any:
    """Call ``probe()`` until it returns something truthy (request errors retried)."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                result = await probe()
                if result:
                    return result
            except (TransportError, ActorError):
                pass
            await asyncio.sleep(0.1)


async def trail(handle: AsyncActorHandle) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = await handle.trail()
    return result


async def steps_until(handle: AsyncActorHandle, step: str) -> list[dict[str, Any]]:
    async def reached() -> list[dict[str, Any]] | None:
        got = await trail(handle)
        return got if any(entry["step"] == step for entry in got) else None

    result: list[dict[str, Any]] = await eventually(reached)
    return result


async def test_runs_stay_on_their_version_continue_when_compatible_else_wait(
    tmp_path: Path,
) -> None:
    with versioned_cluster(tmp_path) as cluster:
        old, compatible, incompatible = cluster.nodes
        assert {n["node_id"]: n["code_version"] for n in cluster.live_nodes()}["node-0"] == V1
        async with (
            create_client(old.url) as on_old,
            create_client(compatible.url) as on_v2,
            create_client(incompatible.url) as on_v3,
        ):
            # Three runs start on v1 and wait for their `go`; their actor then sleeps.
            for key in ("stays", "continues", "waits"):
                await steps_until(on_old.job.get_or_create([key]), "charge")
            await asyncio.sleep(0.8)

            # 1. While the v1 node lives, a run of v1 reached through v3 is served there.
            await on_v3.job.get_or_create(["stays"]).send("go", {})
            done = await steps_until(on_v3.job.get_or_create(["stays"]), "finish")
            assert {(e["code"], e["pid"]) for e in done} == {("v1", old.pid)}

            # 2. The v1 node stops (a drain): a v1 run continues on v2, its history replays.
            assert await asyncio.to_thread(old.terminate) == 0
            await on_v2.job.get_or_create(["continues"]).send("go", {})
            done = await steps_until(on_v2.job.get_or_create(["continues"]), "finish")
            assert [(e["step"], e["code"]) for e in done] == [
                ("prepare", "v1"),
                ("charge", "v1"),
                ("finish", "v2"),
            ]
            assert done[-1]["pid"] == compatible.pid

            # 3. With v3 alone (so decided in the run task, as in a cluster on one
            # version), a v1 run that does not replay on v3 waits, visibly.
            assert await asyncio.to_thread(compatible.terminate) == 0
            waiting = on_v3.job.get_or_create(["waits"])
            await waiting.send("go", {})
            status = await waiting.workflow_status()
            assert status["status"] == "waiting_for_version"
            async with httpx.AsyncClient(base_url=incompatible.url, timeout=10) as http:
                samples = await scrape(http)
            assert samples.get("perdure_workflows_waiting_for_version", actor="job") == 1
            details = await actor_details(incompatible.url, await waiting.resolve())
            assert details["workflow"]["status"] == "waiting_for_version"
            assert details["workflow"]["waiting_for_version"] == V1
            assert [e["step"] for e in await trail(waiting)] == ["prepare", "charge"]

            # 4. A v1 node returns: the waiting run moves there and finishes on v1.
            await asyncio.to_thread(old.start)
            done = await steps_until(waiting, "finish")
            assert [(e["step"], e["code"]) for e in done] == [
                ("prepare", "v1"),
                ("charge", "v1"),
                ("finish", "v1"),
            ]
            assert done[-1]["pid"] == old.pid  # the restarted v1 node's process
            assert (await waiting.workflow_status())["status"] == "completed"

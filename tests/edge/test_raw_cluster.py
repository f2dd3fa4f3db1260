"""Raw handlers in a cluster are node-local: the node that owns the actor serves them,
another node refuses them with ``actor.raw_not_local`` (an action still forwards)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from tests.support.cluster import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(120)]

WAIT = 10.0
REGISTRY = "tests.edge.raw_app:registry"


async def test_raw_requests_are_served_by_the_owner_only(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.mktemp("raw-cluster")
    key = f"k-{uuid.uuid4().hex[:12]}"
    with Cluster(REGISTRY, 2, base_dir=base) as cluster:
        first, second = cluster.urls
        async with httpx.AsyncClient(timeout=WAIT) as client:
            created = await client.post(
                f"{first}/gateway/rawy/request/bump?rvt-method=getOrCreate&rvt-key={key}",
                json={"by": 2},
            )
            assert created.status_code == 200, created.text
            actor_id = created.headers["x-rivet-actor"]
            # sleep_timeout is 0.3 s: keep the actor awake on node 0 with a slow request.
            slow = asyncio.create_task(
                client.get(f"{first}/gateway/{actor_id}/request/slow?seconds=1.5")
            )
            await asyncio.sleep(0.3)  # the slow request has reached the actor
            refused = await client.get(f"{second}/gateway/{actor_id}/request/state")
            slow_response = await slow
            assert slow_response.status_code == 200, slow_response.text
            assert refused.status_code == 400, refused.text
            assert refused.json()["code"] == "raw_not_local"
            # An action reaching the other node is forwarded to the owner as usual.
            action = await client.post(
                f"{second}/gateway/{actor_id}/action/count", json={"args": []}
            )
            assert action.status_code == 200, action.text
            assert action.json()["output"] == 3

"""Raw handlers in a cluster: a raw request or socket reaching a node that does not own
the actor is relayed to the owner, which serves it (one instance, one wake); the
client's token is checked once, at the node it reached."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.cluster import Cluster

from .access_server import TOKEN

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(120)]

WAIT = 10.0
REGISTRY = "tests.scenarios.edge.raw_app:registry"
AUTH = {"x-rivet-token": TOKEN}


def _ws(url: str) -> str:
    return url.replace("http", "ws", 1)


async def test_raw_requests_and_sockets_reach_the_owner_through_another_node(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.mktemp("raw-cluster")
    key = f"k-{uuid.uuid4().hex[:12]}"
    query = f"rvt-method=getOrCreate&rvt-key={key}"
    with Cluster(REGISTRY, 2, base_dir=base, extra_args=["--token", TOKEN]) as cluster:
        first, second = cluster.urls
        async with httpx.AsyncClient(timeout=WAIT, headers=AUTH) as client:
            created = await client.post(
                f"{first}/gateway/rawy/request/bump?{query}", json={"by": 2}
            )
            assert created.status_code == 200, created.text
            actor_id = created.headers["x-rivet-actor"]
            # A raw socket held open on node 0 keeps the actor awake there (its sleep
            # timeout is 0.3 s) while node 1 is asked.
            async with connect(
                f"{_ws(first)}/gateway/{actor_id}/websocket/hold",
                additional_headers=AUTH,
                open_timeout=WAIT,
            ) as holder:
                assert await asyncio.wait_for(holder.recv(), WAIT) == "hello /hold"

                by_id = await client.get(f"{second}/gateway/{actor_id}/request/state")
                assert by_id.status_code == 200, by_id.text
                assert by_id.json() == {"count": 2, "wakes": 1}  # the owner's instance

                by_key = await client.post(
                    f"{second}/gateway/rawy/request/bump?{query}", json={"by": 5}
                )
                assert by_key.status_code == 200, by_key.text
                assert by_key.json() == {"count": 7, "wakes": 1}
                assert by_key.headers["x-rivet-actor"] == actor_id

                echoed = await client.put(
                    f"{second}/gateway/{actor_id}/request/any/where?a=1&b=two",
                    content=b"\x00raw bytes\xff",
                )
                assert echoed.status_code == 201, echoed.text
                assert echoed.content == b"\x00raw bytes\xff"
                assert echoed.headers["x-path"] == "/any/where"
                assert echoed.headers["x-query"] == "a=1&b=two"
                assert echoed.headers["x-method"] == "PUT"

                teapot = await client.get(f"{second}/gateway/{actor_id}/request/teapot")
                assert teapot.status_code == 500, teapot.text  # as on the owner itself
                assert teapot.json()["code"] == "teapot"
                assert teapot.headers["x-rivet-error"] == "user.teapot"

                async with connect(
                    f"{_ws(second)}/gateway/rawy/websocket/room?{query}",
                    additional_headers=AUTH,
                    open_timeout=WAIT,
                ) as relayed:
                    assert await asyncio.wait_for(relayed.recv(), WAIT) == "hello /room"
                    await relayed.send("bump")
                    assert await asyncio.wait_for(relayed.recv(), WAIT) == "count 8"
                    await relayed.send("hi")
                    assert await asyncio.wait_for(relayed.recv(), WAIT) == "echo hi"

                # Every answer came from the one instance on node 0; an action agrees.
                action = await client.post(
                    f"{second}/gateway/{actor_id}/action/count", json={"args": []}
                )
                assert action.status_code == 200, action.text
                assert action.json()["output"] == 8
                state = await client.get(f"{first}/gateway/{actor_id}/request/state")
                assert state.json() == {"count": 8, "wakes": 1}

                # The token is still required at the node a client reaches.
                async with httpx.AsyncClient(timeout=WAIT) as anonymous:
                    refused = await anonymous.get(f"{second}/gateway/{actor_id}/request/state")
                assert refused.status_code == 401, refused.text
                assert refused.json()["code"] == "unauthorized"


async def test_a_forged_forwarding_header_is_refused_with_a_403(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A request that claims another node handed it on (``x-perdure-forwarded``) without
    the cluster's secret is refused with 403 ``actor.forbidden`` before it reaches the
    actor: over HTTP, and on a socket (the error frame's code)."""
    base = tmp_path_factory.mktemp("raw-cluster-forged")
    query = f"rvt-method=getOrCreate&rvt-key=k-{uuid.uuid4().hex[:12]}"
    args = ["--token", TOKEN, "--cluster-secret", "the-secret"]
    with Cluster(REGISTRY, 2, base_dir=base, extra_args=args) as cluster:
        first = cluster.urls[0]
        async with httpx.AsyncClient(timeout=WAIT, headers=AUTH) as client:
            url = f"{first}/gateway/rawy/request/bump?{query}"
            forged = {"x-perdure-forwarded": "node-1"}
            refused = await client.post(url, json={"by": 1}, headers=forged)
            assert refused.status_code == 403, refused.text
            assert (refused.json()["group"], refused.json()["code"]) == ("actor", "forbidden")
            wrong = {**forged, "x-perdure-cluster-secret": "not-the-secret"}
            refused = await client.post(url, json={"by": 1}, headers=wrong)
            assert refused.status_code == 403, refused.text
            # Nothing ran: the first real request creates the actor and counts from 0.
            served = await client.post(url, json={"by": 1})
            assert served.status_code == 200, served.text
            assert served.json()["count"] == 1

"""Per-client caps in a cluster: a client is counted by the node it connects to; the
sockets and streams that node pipes or relays to the actor's owner (with the cluster's
secret) are not counted again there, though they all come from one address."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.scenarios.server.helpers import closed, receive
from tests.support.cluster import Cluster

from .test_client_caps import RIVET, WAIT

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(120)]

REGISTRY = "tests.scenarios.edge.caps_app:registry"
CAPS = ["--max-websockets-per-client", "2", "--max-streams-per-client", "2"]


async def socket_to(stack: AsyncExitStack, node: str, key: str) -> ClientConnection:
    url = node.replace("http://", "ws://", 1)
    url += f"/gateway/room/connect?rvt-method=getOrCreate&rvt-key={key}"
    ws = await connect(url, subprotocols=RIVET, open_timeout=WAIT)
    return await stack.enter_async_context(ws)


async def admitted(ws: ClientConnection) -> bool:
    frame = await receive(ws, WAIT)
    if frame["tag"] == "Init":
        return True
    assert frame["val"]["code"] == "too_many_connections", frame
    assert await closed(ws, WAIT) == (1013, "request.too_many_connections")
    return False


async def test_what_a_node_pipes_to_the_owner_is_counted_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    key = f"k-{uuid.uuid4().hex[:12]}"
    base = tmp_path_factory.mktemp("caps-cluster")
    with Cluster(REGISTRY, 2, base_dir=base, extra_args=CAPS) as cluster:
        owner, other = cluster.urls
        async with AsyncExitStack() as stack:
            # The first socket creates the actor on `owner` and keeps it awake there.
            assert await admitted(await socket_to(stack, owner, key))
            # Two through the other node, which pipes them to the owner.
            for _ in range(2):
                assert await admitted(await socket_to(stack, other, key))
            # The owner counts one socket of this address, not three.
            assert await admitted(await socket_to(stack, owner, key))
            assert not await admitted(await socket_to(stack, owner, key))
            assert not await admitted(await socket_to(stack, other, key))
            # Event streams: the other node relays them to the owner, which counts none.
            async with httpx.AsyncClient(timeout=WAIT) as http:
                url = f"/gateway/room/events?rvt-method=getOrCreate&rvt-key={key}"
                for node in (other, other, owner, owner):
                    stream = await stack.enter_async_context(http.stream("GET", node + url))
                    assert stream.status_code == 200
                refused = await stack.enter_async_context(http.stream("GET", owner + url))
                assert refused.status_code == 429
                assert refused.headers["x-rivet-error"] == "request.too_many_streams"

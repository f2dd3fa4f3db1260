"""A cluster whose nodes run with a server token and no cluster secret: the nodes agree on
a secret of their own through the database (the token, which every client has, does not
stand in for it), and calls and WebSocket connections reaching an actor through another
node (forwarded, piped) still work for a client with the token."""

from __future__ import annotations

import httpx
import pytest

from perdure.client import AsyncClient
from tests.support.cluster import Cluster

from .access_server import REGISTRY, TOKEN, new_key

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(120)]

WAIT = 10.0


async def test_forwarding_with_a_token_and_no_cluster_secret(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.mktemp("token-cluster")
    with Cluster(REGISTRY, 2, base_dir=base, extra_args=["--token", TOKEN]) as cluster:
        first, second = cluster.urls
        key = new_key()
        async with AsyncClient(first, token=TOKEN) as client:
            owner = await client.guarded.get_or_create(key).resolve()  # lives on node 0
        async with AsyncClient(second, token=TOKEN) as client:
            handle = client.guarded.get_for_id(owner)
            assert await handle.action("ping") == "pong"  # forwarded over HTTP
            conn = handle.connect()
            try:
                seen = await conn.action("whoami")  # the socket piped to node 0
                assert seen["action"]["transport"] == "websocket"
            finally:
                await conn.dispose()
        async with httpx.AsyncClient(timeout=WAIT) as raw:
            # The nodes' own route is not a way around the token, and the token does not
            # open it: a client could otherwise act as a node.
            response = await raw.post(f"{second}/.perdure/forward", content=b"{}")
            assert response.status_code in (401, 403), response.text
            as_node = {"x-perdure-cluster-secret": TOKEN, "x-rivet-token": TOKEN}
            response = await raw.post(f"{second}/.perdure/forward", content=b"{}", headers=as_node)
            assert response.status_code == 403, response.content

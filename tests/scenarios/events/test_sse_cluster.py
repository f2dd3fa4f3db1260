"""Server-Sent Events in a PostgreSQL cluster: a stream asked of a node that does not own
the actor is relayed from the owner (numbered events from ``since``, live ones after,
``Last-Event-ID`` resume), a browser that goes away closes the owner's side too, so
the actor can sleep again, and a relaying node that stops ends its relayed streams."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from perdure.client import create_client
from tests.scenarios.events.test_sse import since_live_and_resume
from tests.support.cluster import Cluster
from tests.support.wait import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(120)]

WAIT = 10.0


async def test_a_stream_is_relayed_from_the_owner(tmp_path: Path) -> None:
    with Cluster("tests.scenarios.events.app:registry", 2, base_dir=tmp_path) as cluster:
        owner, other = cluster.urls
        url = f"{other}/gateway/counter/events?rvt-method=getOrCreate&rvt-key=r"
        async with create_client(owner) as client, httpx.AsyncClient(timeout=WAIT) as http:
            # A connection on the first node keeps the actor awake there.
            keeper = client.counter.get_or_create(["r"]).connect()
            await asyncio.wait_for(keeper.wait_open(), WAIT)
            handle = client.counter.get_or_create(["r"])
            assert [n["actors"] for n in cluster.live_nodes()] == [1, 0]
            await since_live_and_resume(http, url, handle)
            # Served by the owner all along: the other node never woke the actor.
            assert [n["actors"] for n in cluster.live_nodes()] == [1, 0]

            # With the keeper gone and both streams closed, nothing holds the actor: had
            # the relay left its stream to the owner open, the actor would stay awake.
            await keeper.dispose()
            await eventually(
                lambda: [n["actors"] for n in cluster.live_nodes()] == [0, 0],
                timeout=WAIT,
                interval=0.2,
                what="the actor asleep once no stream holds it",
            )

            # A relaying node that stops ends its relayed streams at once (the browser
            # reconnects to a node still up) rather than holding its exit for them.
            async with http.stream("GET", url) as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                assert await asyncio.wait_for(anext(lines), WAIT) == ": open"
                asked = time.monotonic()
                status = await asyncio.to_thread(cluster.node(1).terminate)
                took = time.monotonic() - asked
                rest = [line async for line in lines]
            assert status == 0
            assert took < WAIT, f"the relaying node took {took:.1f} s to stop"
            assert all(line in ("", ": keepalive") for line in rest), rest

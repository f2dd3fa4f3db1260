"""The extension on a raw socket, as another client would see it: without the
``perdure_events`` subprotocol (the official client) events stay rivetkit's live ones,
unnumbered; with it they are numbered after a ``resumed`` control frame; a value that is
not a sequence number closes the socket with ``events.invalid_since``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from perdure.client import create_client
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(60)


def socket_url(server: ServerProcess, key: str) -> str:
    host = server.url.replace("http://", "ws://")
    return f"{host}/gateway/counter/connect?rvt-method=getOrCreate&rvt-key={key}"


async def frame(ws: ClientConnection) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 10))["body"]
    return body


async def subscribe(ws: ClientConnection, name: str) -> None:
    request = {"eventName": name, "subscribe": True}
    await ws.send(json.dumps({"body": {"tag": "SubscriptionRequest", "val": request}}))


async def test_without_the_extension_events_are_live_and_unnumbered(
    server: ServerProcess,
) -> None:
    async with create_client(server.url) as client:
        handle = client.counter.get_or_create(["plain"])
        await handle.increment(1)  # before the socket: never sent to it
        protocols: Any = ["rivet", "rivet_encoding.json"]
        async with connect(socket_url(server, "plain"), subprotocols=protocols) as ws:
            assert (await frame(ws))["tag"] == "Init"
            await subscribe(ws, "changed")
            await asyncio.sleep(0.2)  # the subscription is applied before the call
            await handle.increment(1)
            assert await frame(ws) == {"tag": "Event", "val": {"name": "changed", "args": [2]}}


async def test_with_it_events_are_numbered_from_the_cursor(server: ServerProcess) -> None:
    async with create_client(server.url) as client:
        handle = client.counter.get_or_create(["numbered"])
        for _ in range(3):
            await handle.increment(1)
        protocols: Any = ["rivet", "rivet_encoding.json", "perdure_events.s1"]
        async with connect(socket_url(server, "numbered"), subprotocols=protocols) as ws:
            assert (await frame(ws))["tag"] == "Init"
            numbered = {"name": "$perdure.events", "args": [-1, "numbered"]}
            assert await frame(ws) == {"tag": "Event", "val": numbered}
            control = {"name": "$perdure.events", "args": [-1, "resumed", 1]}
            assert await frame(ws) == {"tag": "Event", "val": control}
            assert (await frame(ws))["val"] == {"name": "changed", "args": [2, 2]}
            assert (await frame(ws))["val"] == {"name": "changed", "args": [3, 3]}


async def test_a_bad_cursor_closes_the_socket_with_a_code(server: ServerProcess) -> None:
    protocols: Any = ["rivet", "rivet_encoding.json", "perdure_events.s-1"]
    async with connect(socket_url(server, "bad"), subprotocols=protocols) as ws:
        error = await frame(ws)
        assert error["tag"] == "Error"
        assert (error["val"]["group"], error["val"]["code"]) == ("events", "invalid_since")
        await asyncio.wait_for(ws.wait_closed(), 10)
        assert ws.close_reason == "events.invalid_since"


async def numbered_events(ws: ClientConnection, count: int) -> list[list[Any]]:
    """The argument lists of the next ``count`` events after the control frames."""
    assert (await frame(ws))["tag"] == "Init"
    events: list[list[Any]] = []
    while len(events) < count:
        body = await frame(ws)
        if body["val"]["name"] != "$perdure.events":
            events.append(body["val"]["args"])
    return events


@pytest.mark.parametrize("burst", [3, 40])
async def test_a_first_open_by_age_wakes_the_actor_and_reads_the_log(
    server: ServerProcess, burst: int
) -> None:
    async with create_client(server.url) as client:
        await client.counter.get_or_create([f"age{burst}"]).burst(burst)
    await asyncio.sleep(1.0)  # the actor sleeps (0.3 s): the socket wakes it
    protocols: Any = ["rivet", "rivet_encoding.json", "perdure_events.a30000"]
    async with connect(socket_url(server, f"age{burst}"), subprotocols=protocols) as ws:
        events = await numbered_events(ws, burst)
    assert events == [[seq, seq] for seq in range(1, burst + 1)]


async def test_a_first_open_by_age_on_an_awake_actor(server: ServerProcess) -> None:
    plain: Any = ["rivet", "rivet_encoding.json"]
    async with (
        create_client(server.url) as client,
        connect(socket_url(server, "awake"), subprotocols=plain),  # keeps it awake
    ):
        handle = client.counter.get_or_create(["awake"])
        await handle.burst(2)
        await asyncio.sleep(0.6)
        await handle.burst(1)
        protocols: Any = [*plain, "perdure_events.a300"]  # only the last event
        async with connect(socket_url(server, "awake"), subprotocols=protocols) as ws:
            assert await numbered_events(ws, 1) == [[3, 3]]
            await handle.burst(1)
            assert (await frame(ws))["val"] == {"name": "changed", "args": [4, 4]}

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

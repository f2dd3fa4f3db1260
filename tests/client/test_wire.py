"""What our client puts on the wire, recorded by a minimal fake server and compared with
the official client's captured traffic (``reference/rivetkit-wire-json.jsonl``):
upgrade URL and subprotocols, ``SubscriptionRequest`` only after ``Init``, ids as
``["$BigInt", "0"]``, and the ``1000 "Disposed"`` close."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from perdure.client import ActorError, create_client

WAIT = 5.0
INIT = {"body": {"tag": "Init", "val": {"actorId": "actor-1", "connectionId": "conn-1"}}}


@dataclass
class Recorder:
    """The fake server's log: the upgrade, every frame, the close."""

    path: str = ""
    subprotocols: list[str] = field(default_factory=list)
    frames: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    close: tuple[int | None, str | None] = (None, None)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    script: list[Any] = field(default_factory=list)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[str, Recorder]]:
    recorder = Recorder()

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        recorder.path = ws.request.path
        recorder.subprotocols = [
            p.strip() for p in ws.request.headers.get("sec-websocket-protocol", "").split(",")
        ]
        for frame in recorder.script:
            await ws.send(json.dumps(frame))
        async for raw in ws:
            message = json.loads(raw)
            await recorder.frames.put(message)
            body = message["body"]
            if body["tag"] == "ActionRequest":
                request = body["val"]
                if request["name"] == "boom":
                    error = {
                        "group": "user",
                        "code": "boom",
                        "message": "Boom.",
                        "metadata": {"n": 1},
                        "actionId": request["id"],
                    }
                    await ws.send(json.dumps({"body": {"tag": "Error", "val": error}}))
                else:
                    reply = {"id": request["id"], "output": {"echo": request["args"]}}
                    await ws.send(json.dumps({"body": {"tag": "ActionResponse", "val": reply}}))
        recorder.close = (ws.close_code, ws.close_reason)
        recorder.closed.set()

    async with serve(handler, "127.0.0.1", 0, subprotocols=["rivet"]) as server:  # type: ignore[list-item]
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}", recorder


async def _frame(recorder: Recorder) -> Any:
    return await asyncio.wait_for(recorder.frames.get(), WAIT)


async def test_connect_subscribe_act_dispose_like_the_official_client(
    fake: tuple[str, Recorder],
) -> None:
    url, recorder = fake
    recorder.script = [INIT]
    async with create_client(url) as client:
        conn = client.progressActor.get_or_create("proto-json").connect()
        conn.on("progressUpdated", lambda *args: None)  # before the socket is open
        await conn.wait_open()
        assert recorder.path == (
            "/gateway/progressActor/connect?rvt-namespace=default&rvt-method=getOrCreate"
            "&rvt-runner=default&rvt-key=proto-json&rvt-crash-policy=sleep"
        )
        # The official client's two, then perdure's resumable-events extension
        # (docs/events.md): a first open asks for the events since connect().
        assert recorder.subprotocols[:2] == ["rivet", "rivet_encoding.json"]
        assert re.fullmatch(r"perdure_events\.a\d+", recorder.subprotocols[2])
        assert len(recorder.subprotocols) == 3
        assert await _frame(recorder) == {
            "body": {
                "tag": "SubscriptionRequest",
                "val": {"eventName": "progressUpdated", "subscribe": True},
            }
        }
        assert await conn.getState() == {"echo": []}
        assert await _frame(recorder) == {
            "body": {
                "tag": "ActionRequest",
                "val": {"id": ["$BigInt", "0"], "name": "getState", "args": []},
            }
        }
        with pytest.raises(ActorError) as info:
            await conn.boom()
        assert (info.value.code, info.value.metadata) == ("boom", {"n": 1})
        second = await _frame(recorder)
        assert second["body"]["val"]["id"] == ["$BigInt", "1"]
        await conn.dispose()
    await asyncio.wait_for(recorder.closed.wait(), WAIT)
    assert recorder.close == (1000, "Disposed")


async def test_connection_error_frame_and_close_reason(fake: tuple[str, Recorder]) -> None:
    url, recorder = fake
    error = {
        "group": "auth",
        "code": "forbidden",
        "message": "Go away.",
        "metadata": None,
        "actionId": None,
    }
    recorder.script = [{"body": {"tag": "Error", "val": error}}]
    async with create_client(url) as client:
        conn = client.room.get("r", params={"token": "t"}).connect()
        errors: list[Exception] = []
        conn.on_error(errors.append)
        with pytest.raises(ActorError) as info:
            await conn.wait_open()
        assert (info.value.group, info.value.code, info.value.message) == (
            "auth",
            "forbidden",
            "Go away.",
        )
        assert recorder.subprotocols[2] == "rivet_conn_params.%7B%22token%22%3A%22t%22%7D"
        assert (
            recorder.path == "/gateway/room/connect?rvt-namespace=default&rvt-method=get&rvt-key=r"
        )
        assert [type(e) for e in errors] == [ActorError]

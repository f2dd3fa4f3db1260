"""``/connect``: Init, actions over the socket, subscriptions, events and closing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import cbor2
import httpx
import pytest
from websockets.asyncio.client import connect

from perdure.protocol.codec import decode_to_client, encode_to_server
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    Event,
    Init,
    SubscriptionRequest,
)

from .helpers import (
    action_frame,
    call,
    closed,
    gateway,
    init,
    open_socket,
    receive,
    request,
    subscribe_frame,
)
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


async def test_init_then_actions(server: ServerProcess, key: str) -> None:
    async with await open_socket(server, "counter", key) as ws:
        assert ws.subprotocol == "rivet"
        hello = await init(ws)
        assert len(hello["connectionId"]) > 0
        answer = await request(ws, 0, "increment", [3])
        assert answer == {"tag": "ActionResponse", "val": {"id": ["$BigInt", "0"], "output": 3}}
        answer = await request(ws, 1, "fail", [])
        assert answer["tag"] == "Error"
        val = answer["val"]
        assert (val["group"], val["code"], val["actionId"]) == (
            "user",
            "not_today",
            ["$BigInt", "1"],
        )
        assert val["metadata"] == {"why": "test"}


async def test_init_names_the_same_actor_as_http(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    response = await call(client, server, "counter", "increment", [1], key)
    async with await open_socket(server, "counter", key) as ws:
        assert (await init(ws))["actorId"] == response.headers["x-rivet-actor"]


async def test_actions_run_concurrently(server: ServerProcess, key: str) -> None:
    async with await open_socket(server, "counter", key) as ws:
        await init(ws)
        await ws.send(action_frame(0, "slow", [1.0]))
        await ws.send(action_frame(1, "getState", []))
        first = await receive(ws)
        assert first["val"]["id"] == ["$BigInt", "1"], "the fast action waited for the slow one"
        second = await receive(ws)
        assert second["val"] == {"id": ["$BigInt", "0"], "output": "done"}


async def test_events_reach_only_subscribers_until_they_unsubscribe(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    async with (
        await open_socket(server, "counter", key) as subscribed,
        await open_socket(server, "counter", key) as bystander,
    ):
        await init(subscribed)
        await init(bystander)
        await subscribed.send(subscribe_frame("newCount"))
        # Frames are handled in order: once this answer arrives, the subscription is in.
        await request(subscribed, 0, "getState", [])
        await call(client, server, "counter", "increment", [2], key)
        event = await receive(subscribed)
        assert event == {"tag": "Event", "val": {"name": "newCount", "args": [2]}}
        # The bystander's first frame after Init answers its own request: no event queued.
        answer = await request(bystander, 0, "getState", [])
        assert answer["tag"] == "ActionResponse"
        await subscribed.send(subscribe_frame("newCount", subscribe=False))
        await request(subscribed, 1, "getState", [])
        await call(client, server, "counter", "increment", [1], key)
        answer = await request(subscribed, 2, "getState", [])
        assert answer["tag"] == "ActionResponse"
        assert answer["val"]["output"]["count"] == 3


async def test_an_action_of_the_connection_broadcasts_to_itself(
    server: ServerProcess, key: str
) -> None:
    async with await open_socket(server, "counter", key) as ws:
        await init(ws)
        await ws.send(subscribe_frame("newCount"))
        await ws.send(action_frame(0, "increment", [7]))
        # The event is queued before the action's answer (the action broadcast it first).
        assert await receive(ws) == {"tag": "Event", "val": {"name": "newCount", "args": [7]}}
        assert (await receive(ws))["tag"] == "ActionResponse"


async def test_conn_send_reaches_one_connection_without_subscription(
    server: ServerProcess, key: str
) -> None:
    async with await open_socket(server, "counter", key) as ws:
        await init(ws)
        await ws.send(action_frame(0, "pingMe", ["direct"]))
        assert await receive(ws) == {
            "tag": "Event",
            "val": {"name": "direct", "args": ["only you"]},
        }


async def test_conn_params_and_state_over_the_socket(server: ServerProcess, key: str) -> None:
    async with await open_socket(server, "counter", key, params={"user": "eve"}) as ws:
        await init(ws)
        answer = await request(ws, 0, "whoami", [])
        assert answer["val"]["output"] == {"params": {"user": "eve"}, "state": {"user": "eve"}}


async def test_before_connect_refusal_sends_error_then_closes(
    server: ServerProcess, key: str
) -> None:
    async with await open_socket(server, "counter", key, params={"token": "bad"}) as ws:
        error = await receive(ws)
        assert error["tag"] == "Error"
        assert (error["val"]["code"], error["val"]["actionId"]) == ("forbidden", None)
        assert await closed(ws) == (1011, "user.forbidden")


async def test_connect_to_missing_actor_is_an_error_then_close(
    server: ServerProcess, key: str
) -> None:
    async with await open_socket(server, "counter", key, method="get") as ws:
        assert (await receive(ws))["val"]["code"] == "not_found"
        assert await closed(ws) == (1011, "actor.not_found")


async def test_cbor_connection(server: ServerProcess, key: str) -> None:
    async with await open_socket(server, "counter", key, encoding="cbor") as ws:
        hello = cbor2.loads(await asyncio.wait_for(ws.recv(), 5))
        assert hello["body"]["tag"] == "Init"
        frame = {
            "body": {"tag": "ActionRequest", "val": {"id": 0, "name": "echo", "args": [b"\x01"]}}
        }
        await ws.send(cbor2.dumps(frame))
        answer = cbor2.loads(await asyncio.wait_for(ws.recv(), 5))
        assert answer["body"]["tag"] == "ActionResponse"
        assert answer["body"]["val"]["output"] == b"\x01"


async def test_bare_connection_like_the_official_client_default(
    server: ServerProcess, key: str
) -> None:
    async with await open_socket(server, "counter", key, encoding="bare") as ws:
        hello = decode_to_client(await asyncio.wait_for(ws.recv(), 5), "bare")
        assert isinstance(hello, Init)
        await ws.send(encode_to_server(SubscriptionRequest("newCount", True), "bare"))
        await ws.send(encode_to_server(ActionRequest(7, "increment", [2]), "bare"))
        event = decode_to_client(await asyncio.wait_for(ws.recv(), 5), "bare")
        assert event == Event("newCount", [2])
        answer = decode_to_client(await asyncio.wait_for(ws.recv(), 5), "bare")
        assert answer == ActionResponse(7, 2)


async def test_destroy_closes_the_socket(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    async with await open_socket(server, "counter", key) as ws:
        actor_id = (await init(ws))["actorId"]
        response = await client.delete(f"{server.url}/actors/{actor_id}")
        assert response.status_code == 200, response.text
        assert await closed(ws) == (1000, "actor.destroyed")


async def test_without_rivet_subprotocol_none_is_echoed(server: ServerProcess, key: str) -> None:
    url = gateway(server, "counter", "connect", key).replace("http://", "ws://", 1)
    async with connect(url, open_timeout=5) as ws:
        assert ws.subprotocol is None
        assert (await receive(ws))["tag"] == "Init"

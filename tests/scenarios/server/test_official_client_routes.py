"""Routes the official client uses outside the usual gateway forms (found by
tests/scenarios/compat).

- With ``skipReadyWait``, a connection to an actor known by id goes to ``/connect`` at the
  root, the actor named by the ``rivet_target.actor`` + ``rivet_actor.<id>`` subprotocols.
- ``handle.fetch()`` (raw HTTP to ``onRequest``) is not supported: its ``/request/…``
  route answers with an error that says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from .helpers import WAIT, call, closed, gateway, init, receive, request
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


async def _direct(server: ServerProcess, *protocols: str) -> ClientConnection:
    url = f"{server.ws_url}/connect"
    subprotocols = ["rivet", "rivet_encoding.json", *protocols]
    return await asyncio.wait_for(
        connect(url, subprotocols=subprotocols, open_timeout=WAIT),  # type: ignore[arg-type]
        WAIT,
    )


async def test_root_connect_addresses_the_actor_of_the_rivet_actor_subprotocol(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    created = await call(client, server, "counter", "increment", [2], key)
    actor_id = created.headers["x-rivet-actor"]
    async with await _direct(server, "rivet_target.actor", f"rivet_actor.{actor_id}") as ws:
        assert ws.subprotocol == "rivet"
        assert (await init(ws))["actorId"] == actor_id
        answer = await request(ws, 0, "increment", [1])
        assert answer["val"]["output"] == 3


async def test_root_connect_to_an_unknown_id_is_not_found(server: ServerProcess) -> None:
    async with await _direct(server, "rivet_target.actor", "rivet_actor.0123456789abcdef") as ws:
        assert (await receive(ws))["val"]["code"] == "not_found"
        assert await closed(ws) == (1011, "actor.not_found")


async def test_root_connect_without_an_actor_id_is_refused(server: ServerProcess) -> None:
    async with await _direct(server, "rivet_target.actor") as ws:
        assert (await receive(ws))["val"]["code"] == "invalid_request"
        assert await closed(ws) == (1011, "actor.invalid_request")


async def test_raw_request_route_says_it_is_not_supported(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    url = gateway(server, "counter", "request/hello", key)
    response = await client.post(url, content=b"x")
    assert response.status_code == 404
    assert response.json()["code"] == "route_not_found"
    assert "onRequest" in response.json()["message"]

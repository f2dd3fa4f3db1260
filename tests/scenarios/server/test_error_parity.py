"""Errors perdure shares with rivetkit 2.3.19 go out with rivetkit's group, code and message.

One real request per condition; the table is in docs/rivetkit-client.md ("Error codes").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from perdure.errors import ActorStopping
from perdure.server.gateway.websocket import _overloaded

from .helpers import call, gateway
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert response.headers["x-rivet-error"] == f"{body['group']}.{body['code']}"
    return body


async def _send(
    client: httpx.AsyncClient, server: ServerProcess, key: str, body: Any
) -> httpx.Response:
    url = gateway(server, "limits", "queue/jobs", key)
    return await client.post(url, json={"name": "jobs", "body": body, "wait": False})


async def test_internal_error(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    body = _error(await call(client, server, "counter", "crash", [], key), 500)
    assert (body["group"], body["code"]) == ("actor", "internal_error")
    assert body["message"] == "An internal error occurred"


async def test_action_timed_out(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    body = _error(await call(client, server, "limits", "slow", [2], key), 408)
    assert (body["group"], body["code"]) == ("actor", "action_timed_out")
    assert body["message"] == "Action timed out"
    assert body["metadata"] == {"action": "slow", "timeout": 0.2}


async def test_not_found(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    body = _error(await call(client, server, "counter", "getState", [], key, "get"), 404)
    assert (body["group"], body["code"]) == ("actor", "not_found")
    # The text rivetkit 2.3.19's client itself gives this condition.
    assert body["message"] == "The actor does not exist or was destroyed."


async def test_queue_full(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    first = await _send(client, server, key, 1)
    assert first.status_code == 200, first.text
    body = _error(await _send(client, server, key, 2), 400)
    assert (body["group"], body["code"]) == ("queue", "full")
    assert body["message"] == "Queue is full. Limit is 1 messages."
    assert body["metadata"] == {"limit": 1}


async def test_queue_message_too_large(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    body = _error(await _send(client, server, key, "x" * 100), 400)
    assert (body["group"], body["code"]) == ("queue", "message_too_large")
    size = body["metadata"]["size"]
    assert body["message"] == f"Queue message too large ({size} bytes). Limit is 64 bytes."
    assert body["metadata"] == {"size": size, "limit": 64}


async def test_incoming_message_too_long(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    url = gateway(server, "counter", "action/echo", key)
    body = _error(await client.post(url, json={"args": ["x" * 20_000]}), 400)
    assert (body["group"], body["code"]) == ("message", "incoming_too_long")
    assert body["message"] == "Incoming message too long"


async def test_outgoing_message_too_long(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    body = _error(await call(client, server, "counter", "big", [20_000], key), 400)
    assert (body["group"], body["code"]) == ("message", "outgoing_too_long")
    assert body["message"] == "Outgoing message too long"


async def test_http_messages_have_the_message_size_limits(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    # The server app's limits: messages 4096 in, 8192 out; HTTP bodies 16384. An HTTP
    # action or queue send is bounded like a frame, as in rivetkit (issue 34, 8).
    url = gateway(server, "counter", "action/echo", key)
    body = _error(await client.post(url, json={"args": ["x" * 10_000]}), 400)
    assert (body["group"], body["code"], body["metadata"]) == (
        "message",
        "incoming_too_long",
        {"limit": 4096},
    )
    body = _error(await _send(client, server, key, "x" * 10_000), 400)
    assert (body["group"], body["code"]) == ("message", "incoming_too_long")
    answer = await call(client, server, "counter", "big", [12_000], key)
    body = _error(answer, 400)
    assert (body["group"], body["code"], body["metadata"]) == (
        "message",
        "outgoing_too_long",
        {"limit": 8192},
    )
    assert (await call(client, server, "counter", "big", [4_000], key)).status_code == 200


async def test_method_not_allowed(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    url = gateway(server, "counter", "action/echo", key)
    body = _error(await client.get(url), 405)
    assert (body["group"], body["code"]) == ("actor", "method_not_allowed")
    assert body["message"] == "Method not allowed"
    assert body["metadata"]["method"] == "GET"
    assert body["metadata"]["path"] == "/gateway/counter/action/echo"


def test_texts_of_conditions_a_request_cannot_cheaply_provoke() -> None:
    # Stopping (a server shutting down) and an overloaded connection (1024 actions in
    # flight) are built by these; their texts are rivetkit-core's.
    assert ActorStopping().message == "Actor is stopping."
    assert ActorStopping().identifier == "actor.stopping"
    busy = _overloaded()
    assert busy.identifier == "actor.overloaded"
    assert busy.message == (
        "Actor channel 'conn_actions' is overloaded while attempting to dispatch_action "
        "(capacity 1024)."
    )
    assert busy.metadata == {
        "channel": "conn_actions",
        "capacity": 1024,
        "operation": "dispatch_action",
    }


async def test_unknown_gateway_param(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    # The Rivet engine's gateway refuses an rvt-* name it does not know (issue 34, 10).
    url = gateway(server, "counter", "action/getState", key, **{"rvt-bogus": "invalid"})
    body = _error(await client.post(url, json={"args": []}), 400)
    assert (body["group"], body["code"]) == ("guard", "query_invalid_params")
    assert body["message"] == (
        "invalid query gateway params: unknown field `bogus`, expected one of `namespace`, "
        "`method`, `runner`, `pool`, `key`, `input`, `region`, `crash-policy`, `token`, "
        "`skip-ready-wait`"
    )
    assert body["metadata"] == {"name": "rvt-bogus"}
    # The actor was not created: the request is refused before any resolution.
    missing = await call(client, server, "counter", "getState", [], key, "get")
    assert missing.status_code == 404


async def test_duplicate_gateway_param(server: ServerProcess, client: httpx.AsyncClient) -> None:
    url = f"{server.url}/gateway/counter/action/getState?rvt-method=get&rvt-method=getOrCreate"
    body = _error(await client.post(url, json={"args": []}), 400)
    assert (body["group"], body["code"]) == ("guard", "query_duplicate_param")
    assert body["message"] == "duplicate query gateway param: rvt-method"
    assert body["metadata"] == {"name": "rvt-method"}

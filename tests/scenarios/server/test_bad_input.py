"""Bad input against the running server: a clear 4xx (or close reason), nothing stored, and
the server keeps serving everyone else."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import cbor2
import httpx
import pytest
from websockets.asyncio.client import ClientConnection

from .helpers import (
    action_frame,
    call,
    closed,
    count_actors,
    frame,
    gateway,
    init,
    open_socket,
    receive,
    request,
    state_of,
)
from .process import ServerProcess

BASELINE = {"count": 1, "slept": 0}


@dataclass
class Bystanders:
    """An actor with known state and an open connection to it, checked after each case."""

    client: httpx.AsyncClient
    key: str
    socket: ClientConnection
    next_id: int = 0

    async def still_fine(self, server: ServerProcess) -> None:
        assert await state_of(self.client, server, self.key) == BASELINE
        answer = await request(self.socket, self.next_id, "getState", [])
        self.next_id += 1
        assert answer["tag"] == "ActionResponse", answer
        assert answer["val"]["output"] == BASELINE


@pytest.fixture
async def others(server: ServerProcess) -> AsyncIterator[Bystanders]:
    key = f"bystander-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=10) as client:
        assert (await call(client, server, "counter", "increment", [1], key)).status_code == 200
        async with await open_socket(server, "counter", key) as socket:
            await init(socket)
            yield Bystanders(client, key, socket)


def _chunks(size: int) -> Any:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(size // 1024):
            yield b"x" * 1024

    return body()


HTTP_CASES: dict[str, tuple[dict[str, Any], int, str]] = {
    # name: (request overrides, status, "group.code")
    "malformed json": ({"content": b'{"args": [1,'}, 400, "actor.invalid_request"),
    "malformed cbor": (
        {"content": b"\xff\x00\x13", "headers": {"x-rivet-encoding": "cbor"}},
        400,
        "actor.invalid_request",
    ),
    "wrong body shape": ({"content": b'{"arguments": []}'}, 400, "actor.invalid_request"),
    "unknown encoding": (
        {"headers": {"x-rivet-encoding": "xml"}},
        400,
        "actor.invalid_encoding",
    ),
    "unknown actor name": ({"name": "nosuch"}, 400, "actor.unknown_name"),
    "unknown action": ({"action": "nosuch"}, 404, "actor.action_not_found"),
    "wrong argument count": ({"args": [1, 2, 3]}, 400, "actor.invalid_request"),
    "oversize body": (
        {"content": b'{"args": ["' + b"x" * 20000 + b'"]}'},
        400,
        "message.incoming_too_long",
    ),
    "oversize chunked body": ({"stream": 20480}, 400, "message.incoming_too_long"),
    "unknown method": ({"query": {"rvt-method": "steal"}}, 400, "actor.invalid_method"),
    "bad input": ({"query": {"rvt-input": "!!!"}}, 400, "actor.invalid_input"),
    "oversize input": ({"query": {"rvt-input": "A" * 4000}}, 400, "actor.input_too_long"),
    "oversize key part": ({"key": "k" * 200}, 400, "actor.invalid_key"),
    "bad conn params": (
        {"headers": {"x-rivet-conn-params": "{nope"}},
        400,
        "actor.invalid_conn_params",
    ),
    "oversize conn params": (
        {"headers": {"x-rivet-conn-params": json.dumps({"x": "y" * 600})}},
        400,
        "actor.conn_params_too_long",
    ),
    "wrong http method": ({"verb": "GET"}, 405, "actor.method_not_allowed"),
    # A form post or a no-cors fetch carries a simple type or none (docs/edge.md).
    "text/plain body": (
        {"headers": {"content-type": "text/plain;charset=UTF-8"}},
        415,
        "request.unsupported_media_type",
    ),
    "form body": (
        {"headers": {"content-type": "application/x-www-form-urlencoded"}},
        415,
        "request.unsupported_media_type",
    ),
    "body without a type": (
        {"headers": {"content-type": ""}},
        415,
        "request.unsupported_media_type",
    ),
}


def _typed(overrides: dict[str, Any]) -> dict[str, str]:
    """The case's headers, with the content type its encoding's client would send (an
    empty one stands for none at all)."""
    headers: dict[str, str] = overrides.get("headers", {})
    binary = headers.get("x-rivet-encoding") in ("cbor", "bare")
    typed = {"content-type": "application/octet-stream" if binary else "application/json"}
    typed.update(headers)
    if not typed["content-type"]:
        del typed["content-type"]
    return typed


@pytest.mark.parametrize("case", list(HTTP_CASES))
async def test_bad_http_request(server: ServerProcess, others: Bystanders, case: str) -> None:
    overrides, status, identifier = HTTP_CASES[case]
    client = others.client
    before = await count_actors(client, server, "counter")
    key = overrides.get("key", f"bad-{uuid.uuid4().hex[:8]}")
    url = gateway(
        server,
        overrides.get("name", "counter"),
        f"action/{overrides.get('action', 'increment')}",
        key,
        **overrides.get("query", {}),
    )
    content: Any = overrides.get("content")
    if "stream" in overrides:
        content = _chunks(overrides["stream"])
    elif content is None:
        content = json.dumps({"args": overrides.get("args", [1])}).encode()
    response = await client.request(
        overrides.get("verb", "POST"), url, content=content, headers=_typed(overrides)
    )
    assert response.status_code == status, response.text
    assert response.headers["x-rivet-error"] == identifier
    # Errors answer in the request's encoding (JSON when it is unknown).
    cbor = overrides.get("headers", {}).get("x-rivet-encoding") == "cbor"
    body = cbor2.loads(response.content) if cbor else response.json()
    assert f"{body['group']}.{body['code']}" == identifier
    assert body["message"]
    assert await count_actors(client, server, "counter") == before
    await others.still_fine(server)


async def test_bad_cbor_error_answers_in_cbor(server: ServerProcess, others: Bystanders) -> None:
    url = gateway(server, "counter", "action/increment", others.key)
    response = await others.client.post(
        url,
        content=b"\xa1",
        headers={"x-rivet-encoding": "cbor", "content-type": "application/octet-stream"},
    )
    assert response.status_code == 400
    assert cbor2.loads(response.content)["code"] == "invalid_request"
    await others.still_fine(server)


WS_CASES: dict[str, tuple[str | bytes, str]] = {
    "oversize frame": (action_frame(0, "echo", ["x" * 5000]), "message.incoming_too_long"),
    "undecodable frame": ("this is not json", "actor.invalid_request"),
    "frame of the wrong shape": (frame("Nope", id=1), "actor.invalid_request"),
    "action request without a name": (
        frame("ActionRequest", id=["$BigInt", "0"], args=[]),
        "actor.invalid_request",
    ),
    "binary garbage": (b"\xff\xfe\xfd", "actor.invalid_request"),
}


@pytest.mark.parametrize("case", list(WS_CASES))
async def test_bad_websocket_frame(server: ServerProcess, others: Bystanders, case: str) -> None:
    data, reason = WS_CASES[case]
    async with await open_socket(server, "counter", others.key) as ws:
        await init(ws)
        await ws.send(data)
        error = await receive(ws)
        assert error["tag"] == "Error"
        assert f"{error['val']['group']}.{error['val']['code']}" == reason
        assert error["val"]["actionId"] is None
        assert await closed(ws) == (1011, reason)
    await others.still_fine(server)


async def test_text_frame_on_a_binary_encoding(server: ServerProcess, others: Bystanders) -> None:
    async with await open_socket(server, "counter", others.key, encoding="cbor") as ws:
        await ws.recv()  # Init, in CBOR
        await ws.send(action_frame(0, "getState", []))
        code, reason = await closed(ws)
        assert (code, reason) == (1011, "actor.invalid_request")
    await others.still_fine(server)


async def test_unknown_websocket_encoding(server: ServerProcess, others: Bystanders) -> None:
    async with await open_socket(server, "counter", others.key, encoding="xml") as ws:
        assert await closed(ws) == (1003, "actor.unsupported_websocket_encoding")
    await others.still_fine(server)


async def test_bad_actions_over_the_socket_fail_alone(
    server: ServerProcess, others: Bystanders
) -> None:
    async with await open_socket(server, "counter", others.key) as ws:
        await init(ws)
        unknown = await request(ws, 0, "nosuch", [])
        assert (unknown["val"]["code"], unknown["val"]["actionId"]) == (
            "action_not_found",
            ["$BigInt", "0"],
        )
        wrong = await request(ws, 1, "increment", [1, 2, 3])
        assert wrong["val"]["code"] == "invalid_request"
        too_big = await request(ws, 2, "big", [10000])
        assert too_big["val"]["code"] == "outgoing_too_long"
        # The connection is still up.
        fine = await request(ws, 3, "getState", [])
        assert fine["val"]["output"] == BASELINE
    await others.still_fine(server)


async def test_websocket_to_unknown_actor_name(server: ServerProcess, others: Bystanders) -> None:
    before = await count_actors(others.client, server, "counter")
    async with await open_socket(server, "nosuch", "k") as ws:
        error = await receive(ws)
        assert error["val"]["code"] == "unknown_name"
        assert await closed(ws) == (1011, "actor.unknown_name")
    assert await count_actors(others.client, server, "counter") == before
    await others.still_fine(server)

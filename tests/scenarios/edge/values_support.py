"""A real ``perdure serve tests.scenarios.edge.values_app:registry`` for the decoding, value and
error-shape tests, and small helpers to call it in each encoding."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from perdure.protocol.codec import decode_to_client, encode_http
from perdure.protocol.messages import ErrorMessage, HttpActionRequest, ToClient
from tests.support.server import ServerProcess

REGISTRY = "tests.scenarios.edge.values_app:registry"
WAIT = 10.0
HEADERS = {"json": "json", "cbor": "cbor", "bare": "bare"}


def serve_values(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server (for a module fixture); killed at the end whatever happened."""
    proc = ServerProcess(REGISTRY, tmp_path_factory.mktemp("values")).start()
    try:
        yield proc
    finally:
        proc.kill()


def new_key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4().hex[:12]}"


def action_url(server: ServerProcess, action: str, key: str, method: str = "getOrCreate") -> str:
    query = urlencode({"rvt-namespace": "default", "rvt-method": method, "rvt-key": key})
    return f"{server.url}/gateway/box/action/{action}?{query}"


def post(
    server: ServerProcess, action: str, key: str, body: bytes, enc: str = "json"
) -> httpx.Response:
    """POST a raw body in ``enc`` (getOrCreate ``box`` under ``key``)."""
    with httpx.Client(timeout=WAIT) as client:
        return client.post(action_url(server, action, key), content=body, headers=encoded_as(enc))


def encoded_as(enc: str) -> dict[str, str]:
    """The headers of a body in ``enc``: the encoding and the content type the official
    client sends with it."""
    binary = "application/octet-stream"
    return {
        "x-rivet-encoding": enc,
        "content-type": binary if enc != "json" else "application/json",
    }


def call(
    server: ServerProcess, action: str, key: str, args: list[Any], enc: str = "json"
) -> httpx.Response:
    """Call ``action`` with ``args`` encoded by perdure's own encoder."""
    return post(server, action, key, encode_http(HttpActionRequest(args), enc), enc)  # type: ignore[arg-type]


def exists(server: ServerProcess, key: str) -> bool:
    """Whether the ``box`` actor under ``key`` was created (``get`` never creates)."""
    with httpx.Client(timeout=WAIT) as client:
        response = client.post(action_url(server, "get", key, "get"), json={"args": []})
    if response.status_code == 404:
        return False
    assert response.status_code == 200, response.text
    return True


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The perdure error body of a JSON response (group, code, message, metadata)."""
    assert response.headers["content-type"] == "application/json", response.headers
    body = response.json()
    assert isinstance(body, dict), body
    assert {"group", "code", "message"} <= set(body), body
    assert response.headers["x-rivet-error"] == f"{body['group']}.{body['code']}"
    return body


async def open_socket(server: ServerProcess, key: str, enc: str) -> ClientConnection:
    """``/connect`` to ``box`` under ``key`` in ``enc``; returns after ``Init``."""
    query = urlencode({"rvt-namespace": "default", "rvt-method": "getOrCreate", "rvt-key": key})
    url = f"ws://127.0.0.1:{server.port}/gateway/box/connect?{query}"
    protocols = ["rivet", f"rivet_encoding.{enc}"]
    ws = await asyncio.wait_for(connect(url, subprotocols=protocols, open_timeout=WAIT), WAIT)  # type: ignore[arg-type]
    first = await next_message(ws, enc)
    assert type(first).__name__ == "Init", first
    return ws


async def next_message(ws: ClientConnection, enc: str) -> ToClient:
    """The next server frame, decoded."""
    return decode_to_client(await asyncio.wait_for(ws.recv(), WAIT), enc)  # type: ignore[arg-type]


async def refused_with(ws: ClientConnection, enc: str) -> tuple[ErrorMessage, int, str]:
    """The connection-level ``Error`` and then the close ``(code, reason)``."""
    error = await next_message(ws, enc)
    assert isinstance(error, ErrorMessage), error
    try:
        async with asyncio.timeout(WAIT):
            while True:
                await ws.recv()
    except ConnectionClosed as exc:
        close = exc.rcvd
    else:
        raise AssertionError("not closed")
    assert close is not None, "closed without a close frame"
    return error, close.code, close.reason

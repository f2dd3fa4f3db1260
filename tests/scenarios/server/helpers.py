"""Raw-protocol helpers for the server tests (no perdure client involved)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .process import ServerProcess

WAIT = 5.0
# The headers of a CBOR or BARE body, as the official client sends them.
CBOR_HEADERS = {"x-rivet-encoding": "cbor", "content-type": "application/octet-stream"}
BARE_HEADERS = {"x-rivet-encoding": "bare", "content-type": "application/octet-stream"}


def gateway(
    server: ServerProcess,
    name: str,
    route: str,
    key: str | None = None,
    method: str | None = "getOrCreate",
    **query: str,
) -> str:
    """``/gateway/{name}/{route}?rvt-method=…&rvt-key=…`` (``method=None``: direct form)."""
    params: dict[str, str] = {}
    if method is not None:
        params["rvt-namespace"] = "default"
        params["rvt-method"] = method
        if key is not None:
            params["rvt-key"] = key
    params.update(query)
    suffix = f"?{urlencode(params)}" if params else ""
    return f"{server.url}/gateway/{quote(name, safe='')}/{route}{suffix}"


async def call(
    client: httpx.AsyncClient,
    server: ServerProcess,
    name: str,
    action: str,
    args: list[Any],
    key: str | None,
    method: str | None = "getOrCreate",
    **query: str,
) -> httpx.Response:
    """POST a JSON action."""
    url = gateway(server, name, f"action/{action}", key, method, **query)
    return await client.post(url, json={"args": args})


async def state_of(client: httpx.AsyncClient, server: ServerProcess, key: str) -> Any:
    """The counter's state (``get``: never creates)."""
    response = await call(client, server, "counter", "getState", [], key, "get")
    assert response.status_code == 200, response.text
    return response.json()["output"]


async def count_actors(client: httpx.AsyncClient, server: ServerProcess, name: str) -> int:
    """How many actors of ``name`` exist."""
    response = await client.get(f"{server.url}/actors", params={"name": name, "limit": "1000"})
    assert response.status_code == 200, response.text
    return len(response.json()["actors"])


async def open_socket(
    server: ServerProcess,
    name: str,
    key: str | None,
    *,
    encoding: str = "json",
    params: Any = None,
    method: str | None = "getOrCreate",
    extra_protocols: tuple[str, ...] = (),
) -> ClientConnection:
    """Open ``/connect`` with the subprotocols the official client sends."""
    protocols = ["rivet", f"rivet_encoding.{encoding}", *extra_protocols]
    if params is not None:
        protocols.append(f"rivet_conn_params.{quote(json.dumps(params), safe='')}")
    url = gateway(server, name, "connect", key, method).replace("http://", "ws://", 1)
    return await asyncio.wait_for(
        connect(url, subprotocols=protocols, open_timeout=WAIT),  # type: ignore[arg-type]
        WAIT,
    )


def frame(tag: str, **val: Any) -> str:
    """A JSON client → server frame."""
    return json.dumps({"body": {"tag": tag, "val": val}})


def action_frame(action_id: int, name: str, args: list[Any]) -> str:
    """A JSON ``ActionRequest`` with the id written as the official client writes it."""
    return frame("ActionRequest", id=["$BigInt", str(action_id)], name=name, args=args)


def subscribe_frame(event: str, subscribe: bool = True) -> str:
    """A JSON ``SubscriptionRequest``."""
    return frame("SubscriptionRequest", eventName=event, subscribe=subscribe)


async def receive(ws: ClientConnection, timeout: float = WAIT) -> dict[str, Any]:
    """The next server frame as ``{"tag": …, "val": …}``."""
    raw = await asyncio.wait_for(ws.recv(), timeout)
    body = json.loads(raw)["body"]
    assert isinstance(body, dict)
    return body


async def init(ws: ClientConnection) -> dict[str, Any]:
    """Wait for the ``Init`` frame and return its value."""
    body = await receive(ws)
    assert body["tag"] == "Init", body
    val = body["val"]
    assert isinstance(val, dict)
    return val


async def request(ws: ClientConnection, action_id: int, name: str, args: list[Any]) -> Any:
    """Send an action and return the next frame (expected to answer it)."""
    await ws.send(action_frame(action_id, name, args))
    return await receive(ws)


async def closed(ws: ClientConnection, timeout: float = WAIT) -> tuple[int, str]:
    """Read until the server closes; ``(code, reason)``."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                await ws.recv()
    except ConnectionClosed as exc:
        if exc.rcvd is None:
            raise AssertionError("closed without a close frame") from exc
        return exc.rcvd.code, exc.rcvd.reason
    raise AssertionError("unreachable")

"""Per-client caps over real ``perdure serve`` processes (docs/edge.md, "Per-client
caps"): one client address past its open event streams, its open WebSockets or its rate
of actor creation is refused with a coded 429 (an ``Error`` frame and close 1013 on a
socket), counted in ``/metrics``, and admitted again once it is back under the cap; the
defaults leave ordinary use alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from tests.scenarios.server.helpers import closed, receive
from tests.support.server import ServerProcess

from .access_server import new_key

pytestmark = pytest.mark.timeout(120)

REGISTRY = "tests.scenarios.edge.caps_app:registry"
WAIT = 10.0
RIVET = [Subprotocol("rivet"), Subprotocol("rivet_encoding.json")]


@contextmanager
def caps_server(
    data: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        REGISTRY, data, env=env, extra_args=["--log-level", "warning", *args]
    ).start()
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Two streams and three sockets per address (the socket cap from the environment)."""
    env = {"PERDURE_MAX_WEBSOCKETS_PER_CLIENT": "3"}
    data = tmp_path_factory.mktemp("capped")
    with caps_server(data, "--max-streams-per-client", "2", env=env) as process:
        yield process


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


def events_url(server: ServerProcess, key: str) -> str:
    return f"{server.url}/gateway/room/events?rvt-method=getOrCreate&rvt-key={key}"


def action_url(server: ServerProcess, key: str) -> str:
    return f"{server.url}/gateway/room/action/ping?rvt-method=getOrCreate&rvt-key={key}"


def ws_url(server: ServerProcess, path: str) -> str:
    return server.url.replace("http://", "ws://", 1) + path


async def refusals(http: httpx.AsyncClient, server: ServerProcess) -> dict[str, float]:
    """``perdure_edge_refusals_total`` by reason, from ``/metrics`` (loopback may read it)."""
    response = await http.get(f"{server.url}/metrics")
    assert response.status_code == 200, response.text
    found: dict[str, float] = {}
    for line in response.text.splitlines():
        if line.startswith('perdure_edge_refusals_total{reason="'):
            found[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return found


async def open_stream(
    http: httpx.AsyncClient, stack: AsyncExitStack, server: ServerProcess, key: str
) -> httpx.Response:
    """An SSE stream kept open until ``stack`` closes (or the response is closed)."""
    return await stack.enter_async_context(http.stream("GET", events_url(server, key)))


async def rivet_socket(server: ServerProcess, key: str) -> ClientConnection:
    """The gateway's ``/connect`` for ``room[key]`` (getOrCreate), as clients open it."""
    path = f"/gateway/room/connect?rvt-method=getOrCreate&rvt-key={key}"
    return await connect(ws_url(server, path), subprotocols=RIVET, open_timeout=WAIT)


async def refused_with(ws: ClientConnection, code: str) -> None:
    """The socket gets ``Error`` ``request.<code>``, then close 1013 with that reason."""
    frame = await receive(ws)
    assert frame["tag"] == "Error", frame
    assert (frame["val"]["group"], frame["val"]["code"]) == ("request", code)
    assert await closed(ws, WAIT) == (1013, f"request.{code}")


# -- open event streams -------------------------------------------------------------------


async def test_streams_past_the_cap_are_refused_until_one_closes(
    capped: ServerProcess, http: httpx.AsyncClient
) -> None:
    key = new_key()
    before = (await refusals(http, capped)).get("request.too_many_streams", 0)
    async with AsyncExitStack() as stack:
        first = await open_stream(http, stack, capped, key)
        second = await open_stream(http, stack, capped, key)
        assert first.status_code == second.status_code == 200
        refused = await open_stream(http, stack, capped, key)
        assert refused.status_code == 429
        assert refused.headers["x-rivet-error"] == "request.too_many_streams"
        assert refused.headers["retry-after"] == "1"
        body = json.loads(await refused.aread())
        assert (body["group"], body["code"], body["metadata"]) == (
            "request",
            "too_many_streams",
            {"limit": 2},
        )
        await refused.aclose()
        counted = await refusals(http, capped)
        assert counted["request.too_many_streams"] == before + 1
        # The streams that were admitted still carry events.
        assert (await http.post(action_url(capped, key), json={"args": []})).status_code == 200
        assert "event: changed" in await read_until(first, "event: changed")
        # One closes: the server hears it and admits a new one.
        await first.aclose()
        async with asyncio.timeout(WAIT):
            while True:
                again = await open_stream(http, stack, capped, key)
                if again.status_code == 200:
                    break
                await again.aclose()
                await asyncio.sleep(0.05)


async def read_until(response: httpx.Response, text: str) -> str:
    seen = ""
    async with asyncio.timeout(WAIT):
        async for chunk in response.aiter_text():
            seen += chunk
            if text in seen:
                return seen
    raise AssertionError(f"the stream ended before {text!r}: {seen!r}")


# -- open WebSockets ----------------------------------------------------------------------


async def test_sockets_past_the_cap_are_refused_until_one_closes(
    capped: ServerProcess, http: httpx.AsyncClient
) -> None:
    key = new_key()
    before = (await refusals(http, capped)).get("request.too_many_connections", 0)
    # Each kind of socket counts: the gateway's /connect, /connect by actor id, raw.
    gateway = await rivet_socket(capped, key)
    init = await receive(gateway)
    assert init["tag"] == "Init", init
    protocols = [
        *RIVET,
        Subprotocol("rivet_target.actor"),
        Subprotocol(f"rivet_actor.{init['val']['actorId']}"),
    ]
    direct = await connect(ws_url(capped, "/connect"), subprotocols=protocols, open_timeout=WAIT)
    assert (await receive(direct))["tag"] == "Init"
    raw_path = f"/gateway/room/websocket/?rvt-method=getOrCreate&rvt-key={key}"
    raw = await connect(ws_url(capped, raw_path), open_timeout=WAIT)
    assert await asyncio.wait_for(raw.recv(), WAIT) == "hello"
    try:
        # A fourth of any kind is refused.
        await refused_with(await rivet_socket(capped, key), "too_many_connections")
        refused_raw = await connect(ws_url(capped, raw_path), open_timeout=WAIT)
        await refused_with(refused_raw, "too_many_connections")
        counted = await refusals(http, capped)
        assert counted["request.too_many_connections"] == before + 2
        # The admitted ones work on.
        await raw.send("still here")
        assert await asyncio.wait_for(raw.recv(), WAIT) == "still here"
        # One closes: a new one is admitted.
        await direct.close()
        async with asyncio.timeout(WAIT):
            while True:
                again = await rivet_socket(capped, key)
                frame = await receive(again)
                if frame["tag"] == "Init":
                    await again.close()
                    break
                await closed(again, WAIT)
                await asyncio.sleep(0.05)
    finally:
        for ws in (gateway, direct, raw):
            await ws.close()


# -- the rate of creation -----------------------------------------------------------------


async def test_creation_past_the_rate_is_refused_then_admitted_again(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    # Half an actor a second, bursts of two (the rate from the environment).
    env = {"PERDURE_CREATION_RATE_PER_CLIENT": "0.5"}
    with caps_server(tmp_path, "--creation-burst-per-client", "2", env=env) as server:
        keys = [new_key() for _ in range(6)]
        for key in keys[:2]:
            created = await http.post(action_url(server, key), json={"args": []})
            assert created.status_code == 200, created.text
        refused = await http.post(action_url(server, keys[2]), json={"args": []})
        assert refused.status_code == 429
        assert refused.headers["x-rivet-error"] == "request.creation_rate_limited"
        assert refused.headers["retry-after"] in ("1", "2")  # when the next token is due
        assert refused.json()["metadata"] == {"limit": 0.5, "burst": 2}
        # An actor that exists is no creation: still reachable.
        assert (await http.post(action_url(server, keys[0]), json={"args": []})).status_code == 200
        listed = await http.get(f"{server.url}/actors", params={"name": "room", "key": keys[2]})
        assert listed.json()["actors"] == []  # nothing was created
        # A socket that would create, and the management API, are refused alike.
        await refused_with(await rivet_socket(server, keys[3]), "creation_rate_limited")
        put = await http.put(f"{server.url}/actors", json={"name": "room", "key": keys[4]})
        assert (put.status_code, put.json()["code"]) == (429, "creation_rate_limited")
        assert put.headers["retry-after"] in ("1", "2")
        counted = await refusals(http, server)
        assert counted["request.creation_rate_limited"] == 3
        # The bucket refills: creation is admitted again.
        async with asyncio.timeout(WAIT):
            while True:
                again = await http.post(action_url(server, keys[5]), json={"args": []})
                if again.status_code == 200:
                    break
                assert again.status_code == 429, again.text
                await asyncio.sleep(0.2)


# -- the defaults -------------------------------------------------------------------------


async def test_defaults_leave_ordinary_use_alone(tmp_path: Path) -> None:
    limits = httpx.Limits(max_connections=200)
    with caps_server(tmp_path) as server:
        async with httpx.AsyncClient(timeout=WAIT, limits=limits) as http:
            # Actors are created as fast as asked: no rate by default.
            created = await asyncio.gather(
                *(http.post(action_url(server, new_key()), json={"args": []}) for _ in range(100))
            )
            assert {response.status_code for response in created} == {200}
            # Sockets and streams well past what one page opens.
            sockets = [await rivet_socket(server, new_key()) for _ in range(20)]
            try:
                assert {(await receive(ws))["tag"] for ws in sockets} == {"Init"}
                key = new_key()
                async with AsyncExitStack() as stack:
                    streams = [await open_stream(http, stack, server, key) for _ in range(64)]
                    assert {response.status_code for response in streams} == {200}
                    # The 65th is past the default cap.
                    over = await open_stream(http, stack, server, key)
                    assert over.status_code == 429
                    assert over.headers["x-rivet-error"] == "request.too_many_streams"
            finally:
                for ws in sockets:
                    await ws.close()

"""PostgreSQL becomes unreachable under a running ``perdure serve`` (issue 16, outages).

A TCP proxy the test controls sits between the server and PostgreSQL: ``refuse()`` is the
database killed (connections refused and cut), ``stall()`` is it cut off by the network
(nothing answers). The last test kills the real database itself (an immediate shutdown:
no checkpoint, crash recovery at the next start) and starts it again.

Calls must fail within the store timeout with 503 ``store.unavailable`` and
``Retry-After``, ``/ready`` must say so while ``/health`` stays 200, and after the
database is back the next calls succeed and the stored state holds exactly the writes
that were acknowledged. Before the fix, calls blocked 60 s and answered 500.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.postgres import (
    POSTGRES_URL,
    control_local_postgres,
    drop_schema,
    new_schema_name,
    require_local_postgres,
    require_postgres,
    wait_postgres,
)
from tests.support.server import ServerProcess
from tests.support.tcp_proxy import TcpProxy

STORE_TIMEOUT = 2.0
# The bound a caller may wait: the store timeout plus the server's own work.
CALL_BOUND = STORE_TIMEOUT + 1.5
WAIT = 15.0

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    require_postgres()
    target = urlsplit(POSTGRES_URL)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432).start()
    try:
        yield proxy
    finally:
        proxy.close()


def _server(port: int, tmp_path: Path) -> tuple[ServerProcess, str]:
    """A server on the test database through ``port``, in a schema of its own."""
    schema = new_schema_name()
    parts = urlsplit(POSTGRES_URL)
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
    query = urlencode({"schema": schema})
    store = f"postgresql://{netloc}{parts.path}?{query}"
    process = ServerProcess(
        "tests.support.apps.outage:registry",
        tmp_path / "data",
        extra_args=["--store", store, "--store-timeout", str(STORE_TIMEOUT)],
    )
    return process, schema


@pytest.fixture
def server(proxy: TcpProxy, tmp_path: Path) -> Iterator[ServerProcess]:
    process, schema = _server(proxy.port, tmp_path)
    process.start()
    try:
        yield process
    finally:
        proxy.resume()
        process.kill()
        drop_schema(schema)


@pytest.fixture
def direct_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server on the real database, no proxy between (for stopping the database)."""
    require_local_postgres()
    process, schema = _server(urlsplit(POSTGRES_URL).port or 5432, tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.kill()
        control_local_postgres("start", check=False)  # running again, whatever the test did
        asyncio.run(wait_postgres())
        drop_schema(schema)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


def _action_url(server: ServerProcess, action: str, key: str, method: str) -> str:
    query = urlencode({"rvt-namespace": "default", "rvt-method": method, "rvt-key": key})
    return f"{server.url}/gateway/ledger/action/{action}?{query}"


async def _add(
    http: httpx.AsyncClient, server: ServerProcess, key: str, amount: int
) -> httpx.Response:
    url = _action_url(server, "add", key, "getOrCreate")
    return await http.post(url, json={"args": [amount]})


async def _entries(http: httpx.AsyncClient, server: ServerProcess, key: str) -> list[int]:
    response = await http.post(_action_url(server, "entries", key, "get"), json={"args": []})
    assert response.status_code == 200, response.text
    entries: list[int] = response.json()["output"]
    return entries


def _assert_unavailable(response: httpx.Response, elapsed: float) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert (body["group"], body["code"]) == ("store", "unavailable"), body
    assert response.headers["x-rivet-error"] == "store.unavailable"
    assert int(response.headers["retry-after"]) >= 1
    assert elapsed < CALL_BOUND, f"took {elapsed:.2f} s, over the {CALL_BOUND} s bound"


async def _timed(work: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await work
    return response, time.monotonic() - started


async def _wait_ready(http: httpx.AsyncClient, server: ServerProcess, status: int) -> Any:
    """Poll ``/ready`` until it answers ``status``; return the last response."""
    deadline = time.monotonic() + WAIT
    while True:
        response = await http.get(f"{server.url}/ready")
        if response.status_code == status or time.monotonic() > deadline:
            assert response.status_code == status, response.text
            return response
        await asyncio.sleep(0.2)


async def _recovered_add(
    http: httpx.AsyncClient, server: ServerProcess, key: str, amount: int
) -> httpx.Response:
    """The first call after the database is back: it must succeed without a restart
    (retrying only while the proxy's cut connections are being noticed)."""
    await _wait_ready(http, server, 200)
    deadline = time.monotonic() + WAIT
    while True:
        response = await _add(http, server, key, amount)
        if response.status_code != 503 or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("outage", ["refuse", "stall"])
async def test_actions_fail_fast_during_an_outage_and_work_after_it(
    outage: str, proxy: TcpProxy, server: ServerProcess, http: httpx.AsyncClient
) -> None:
    assert (await _add(http, server, "a", 1)).status_code == 200
    assert (await http.get(f"{server.url}/ready")).status_code == 200

    getattr(proxy, outage)()
    # A live actor: the action runs in memory, its commit cannot be written.
    response, elapsed = await _timed(_add(http, server, "a", 2))
    _assert_unavailable(response, elapsed)
    # A create: nothing of it may be stored.
    response, elapsed = await _timed(_add(http, server, "b", 10))
    _assert_unavailable(response, elapsed)

    ready = await _wait_ready(http, server, 503)
    assert ready.json()["code"] == "unavailable"
    assert int(ready.headers["retry-after"]) >= 1
    health = await http.get(f"{server.url}/health")
    assert health.status_code == 200

    proxy.resume()
    response = await _recovered_add(http, server, "a", 3)
    assert response.status_code == 200, response.text
    # Exactly the acknowledged writes: 2 was refused, so it is not there.
    assert await _entries(http, server, "a") == [1, 3]
    # The create that failed left no actor behind.
    missing = await http.post(_action_url(server, "entries", "b", "get"), json={"args": []})
    assert missing.status_code == 404, missing.text


async def test_websocket_action_gets_store_unavailable(
    proxy: TcpProxy, server: ServerProcess, http: httpx.AsyncClient
) -> None:
    assert (await _add(http, server, "ws", 1)).status_code == 200
    query = urlencode({"rvt-namespace": "default", "rvt-method": "get", "rvt-key": "ws"})
    url = f"{server.url}/gateway/ledger/connect?{query}".replace("http://", "ws://", 1)
    protocols: Any = ["rivet", "rivet_encoding.json"]
    async with connect(url, subprotocols=protocols, open_timeout=WAIT) as ws:
        init = json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]
        assert init["tag"] == "Init", init
        proxy.stall()
        request = {"tag": "ActionRequest", "val": {"id": ["$BigInt", "1"], "name": "add"}}
        request["val"]["args"] = [2]
        started = time.monotonic()
        await ws.send(json.dumps({"body": request}))
        answer = await _next_answer(ws)
        elapsed = time.monotonic() - started
    assert answer["tag"] == "Error", answer
    assert (answer["val"]["group"], answer["val"]["code"]) == ("store", "unavailable")
    assert elapsed < CALL_BOUND
    proxy.resume()
    assert (await _recovered_add(http, server, "ws", 3)).status_code == 200
    assert await _entries(http, server, "ws") == [1, 3]


async def _next_answer(ws: Any) -> dict[str, Any]:
    """The next frame that answers an action (an error, or a response)."""
    while True:
        body: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]
        if body["tag"] in ("Error", "ActionResponse"):
            return body


async def test_postgresql_killed_and_started_again_under_a_running_server(
    direct_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    server = direct_server
    assert (await _add(http, server, "pg", 1)).status_code == 200

    # Killed: an immediate shutdown ends every session at once, with no checkpoint.
    await asyncio.to_thread(control_local_postgres, "stop", "-m", "immediate")
    response, elapsed = await _timed(_add(http, server, "pg", 2))
    _assert_unavailable(response, elapsed)
    response, elapsed = await _timed(_add(http, server, "pg-new", 5))
    _assert_unavailable(response, elapsed)
    ready = await _wait_ready(http, server, 503)
    assert ready.json()["code"] == "unavailable"
    assert (await http.get(f"{server.url}/health")).status_code == 200

    await asyncio.to_thread(control_local_postgres, "start")
    await wait_postgres()
    response = await _recovered_add(http, server, "pg", 3)
    assert response.status_code == 200, response.text
    assert server.running  # the server lived through it, no restart
    assert await _entries(http, server, "pg") == [1, 3]
    missing = await http.post(_action_url(server, "entries", "pg-new", "get"), json={"args": []})
    assert missing.status_code == 404, missing.text

"""Server-Sent Events over a real server (httpx streaming, as a browser's EventSource
reads them): numbered events from ``since``, live ones after, resuming after the
``Last-Event-ID`` a reconnecting browser sends, the gap message, and coded refusals."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.client import create_client
from tests.scenarios.events.conftest import REGISTRY
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 10.0


def url(server: ServerProcess, key: str, actor: str = "counter") -> str:
    return f"{server.url}/gateway/{actor}/events?rvt-method=getOrCreate&rvt-key={key}"


async def messages(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """The stream's messages (comment lines skipped), as ``{field: value}``."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value


async def take(stream: AsyncIterator[dict[str, str]], count: int) -> list[dict[str, str]]:
    return [await asyncio.wait_for(anext(stream), TIMEOUT) for _ in range(count)]


async def since_live_and_resume(http: httpx.AsyncClient, stream_url: str, handle: Any) -> None:
    """Three events, a stream from ``since=1`` (two logged, one live), then a stream
    resumed after ``Last-Event-ID: 4`` gets the two emitted while none was open."""
    for _ in range(3):
        await handle.increment(1)
    async with http.stream("GET", stream_url + "&since=1") as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = messages(response)
        got = await take(stream, 2)
        assert got == [
            {"id": "2", "event": "changed", "data": "[2]"},
            {"id": "3", "event": "changed", "data": "[3]"},
        ]
        await handle.increment(1)
        assert await take(stream, 1) == [{"id": "4", "event": "changed", "data": "[4]"}]
    await handle.increment(1)
    await handle.other()
    # A browser reconnecting sends the last id it saw.
    headers = {"last-event-id": "4"}
    async with http.stream("GET", stream_url, headers=headers) as response:
        got = await take(messages(response), 2)
        assert got == [
            {"id": "5", "event": "changed", "data": "[5]"},
            {"id": "6", "event": "other", "data": '["x"]'},
        ]


async def test_events_from_since_then_live_then_resumed(server: ServerProcess) -> None:
    async with create_client(server.url) as client, httpx.AsyncClient(timeout=TIMEOUT) as http:
        await since_live_and_resume(http, url(server, "s"), client.counter.get_or_create(["s"]))


async def test_without_since_the_stream_starts_now(server: ServerProcess) -> None:
    async with create_client(server.url) as client, httpx.AsyncClient(timeout=TIMEOUT) as http:
        handle = client.counter.get_or_create(["n"])
        await handle.increment(1)
        async with http.stream("GET", url(server, "n")) as response:
            stream = messages(response)
            await handle.increment(1)
            assert await take(stream, 1) == [{"id": "2", "event": "changed", "data": "[2]"}]


async def test_a_gap_is_announced(server: ServerProcess) -> None:
    async with create_client(server.url) as client, httpx.AsyncClient(timeout=TIMEOUT) as http:
        handle = client.short.get_or_create(["g"])
        await handle.burst(30)  # the short actor keeps 20
        async with http.stream("GET", url(server, "g", "short") + "&since=0") as response:
            got = await take(messages(response), 2)
        assert got[0]["event"] == "$perdure.gap"
        assert json.loads(got[0]["data"]) == {"after": 0, "resumedAt": 11}
        assert got[1] == {"id": "11", "event": "changed", "data": "[11]"}


@pytest.mark.parametrize("since", ["abc", "-1", "1.5", "s"])
async def test_a_bad_since_is_refused_with_a_code(server: ServerProcess, since: str) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        reply = await http.get(url(server, "bad"), headers={"last-event-id": since})
        assert reply.status_code == 400
        body = reply.json()
        assert (body["group"], body["code"]) == ("events", "invalid_since")
        reply = await http.get(url(server, "bad") + f"&since={since}")
        assert reply.status_code == 400


async def test_other_methods_and_unknown_actors_are_refused(server: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        assert (await http.post(url(server, "m"))).status_code == 405
        reply = await http.get(f"{server.url}/gateway/counter/events?rvt-method=get&rvt-key=none")
        assert reply.status_code == 404
        assert reply.json()["code"] == "not_found"


async def test_token_and_cors_as_on_the_other_routes(tmp_path: Path) -> None:
    args = ["--token", "secret-token-0123456789", "--cors-origin", "http://page.test"]
    guarded = ServerProcess(REGISTRY, tmp_path / "data", extra_args=args).start()
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            reply = await http.get(url(guarded, "t"))
            assert reply.status_code == 401
            assert reply.json()["code"] == "unauthorized"
            page = {"origin": "http://page.test"}
            stream_url = url(guarded, "t") + "&rvt-token=secret-token-0123456789"
            async with http.stream("GET", stream_url, headers=page) as response:
                assert response.status_code == 200
                assert response.headers["access-control-allow-origin"] == "http://page.test"
            other = {"origin": "http://other.test"}
            reply = await http.get(stream_url, headers=other)
            assert reply.status_code == 403
            assert (reply.json()["group"], reply.json()["code"]) == ("cors", "origin_not_allowed")
    finally:
        guarded.kill()


async def test_a_stopping_server_ends_its_open_streams_at_once(server: ServerProcess) -> None:
    """An open stream never ends by itself: on SIGTERM the server ends it cleanly (the
    reader reconnects and resumes), rather than holding its exit for uvicorn's graceful
    timeout (30 s: the exit took 32 s before)."""
    async with (
        httpx.AsyncClient(timeout=TIMEOUT) as http,
        http.stream("GET", url(server, "stopping")) as response,
    ):
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert await asyncio.wait_for(anext(lines), TIMEOUT) == ": open"
        asked = time.monotonic()
        status = await asyncio.to_thread(server.terminate)
        took = time.monotonic() - asked
        rest = [line async for line in lines]  # the stream ends, not cut off
    assert status == 0
    assert took < TIMEOUT, f"the server took {took:.1f} s to stop"
    assert all(line in ("", ": keepalive") for line in rest), rest

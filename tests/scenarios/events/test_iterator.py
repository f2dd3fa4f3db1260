"""``handle.events(since=...)``: the async iterator of the handle API, over the network
(a real server) and in process (a runtime on a real SQLite file)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from perdure import ActorRuntime
from perdure.client import ActorError, create_client
from perdure.errors import InvalidRequest
from perdure.handles import ActorEvent, EventGap, Handle
from perdure.store import SQLiteStore
from tests.scenarios.events.app import registry
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(60)


async def take(items: AsyncIterator[Any], count: int) -> list[Any]:
    return [await asyncio.wait_for(anext(items), 10) for _ in range(count)]


async def scenario(counter: Handle, short: Handle) -> None:
    """The same checks on any implementation of the handle API."""
    for _ in range(3):
        await counter.increment(1)
    items = counter.events(since=1)
    try:
        assert await take(items, 2) == [
            ActorEvent(2, "changed", [2]),
            ActorEvent(3, "changed", [3]),
        ]
        await counter.other()
        assert await take(items, 1) == [ActorEvent(4, "other", ["x"])]
    finally:
        await items.aclose()  # type: ignore[attr-defined]
    await short.burst(25)
    gapped = short.events(since=0)
    try:
        first = await take(gapped, 2)
        assert first == [EventGap(after=0, resumed_at=6), ActorEvent(6, "changed", [6])]
    finally:
        await gapped.aclose()  # type: ignore[attr-defined]
    with pytest.raises(InvalidRequest) as bad:
        await anext(counter.events(since=-1))
    assert (bad.value.group, bad.value.code) == ("events", "invalid_since")


async def test_over_the_network(server: ServerProcess) -> None:
    async with create_client(server.url) as client:
        await scenario(client.counter.get_or_create(["i"]), client.short.get_or_create(["i"]))


async def test_in_process(tmp_path: Path) -> None:
    async with ActorRuntime(registry, SQLiteStore(tmp_path / "events.db")) as runtime:
        client = runtime.client()
        await scenario(client.counter.get_or_create("i"), client.short.get_or_create("i"))


async def test_from_now_in_process(tmp_path: Path) -> None:
    async with ActorRuntime(registry, SQLiteStore(tmp_path / "events.db")) as runtime:
        handle = runtime.client().counter.get_or_create("n")
        await handle.increment(1)
        items = handle.events()
        pending = asyncio.ensure_future(anext(items))
        await asyncio.sleep(0.05)  # the follower is registered once iteration starts
        await handle.increment(1)
        assert await asyncio.wait_for(pending, 10) == ActorEvent(2, "changed", [2])
        await items.aclose()  # type: ignore[attr-defined]


async def test_blocking_and_refused(server: ServerProcess) -> None:
    def run() -> tuple[list[Any], str]:
        from perdure.client import ActorError, Client

        with Client(server.url) as client:
            handle = client.counter.get_or_create(["b"])
            for _ in range(2):
                handle.increment(1)
            items = handle.events(since=0)
            got = [next(items), next(items)]
            items.close()  # type: ignore[attr-defined]
            try:
                next(client.counter.get(["nobody"]).events())
            except ActorError as error:
                return got, error.code
        return got, "no error"

    got, code = await asyncio.to_thread(run)
    assert got == [ActorEvent(1, "changed", [1]), ActorEvent(2, "changed", [2])]
    assert code == "not_found"


async def test_refused_over_the_network(server: ServerProcess) -> None:
    async with create_client(server.url) as client:
        with pytest.raises(ActorError) as refused:
            await anext(client.counter.get(["nobody"]).events())
        assert refused.value.code == "not_found"

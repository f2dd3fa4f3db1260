"""The README Quickstart's order, over a real server: ``connect()`` (which returns at
once), listen, call the action over HTTP, and the event arrives, every time, although
the socket usually opens after the action's commit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.client import create_client
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(120)

ROUNDS = 20


async def test_an_event_after_connect_arrives_even_before_the_socket_opens(
    server: ServerProcess,
) -> None:
    async with create_client(server.url) as client:
        for round_ in range(ROUNDS):
            handle = client.counter.get_or_create([f"r{round_}"])
            conn = handle.connect()
            got: asyncio.Queue[int] = asyncio.Queue()
            conn.on("changed", got.put_nowait)
            assert await handle.increment(5) == 5  # over HTTP, not over the socket
            assert await asyncio.wait_for(got.get(), 10) == 5
            await conn.dispose()


async def test_the_blocking_client_too(server: ServerProcess) -> None:
    def run() -> list[int]:
        from queue import Queue

        from perdure.client import Client

        seen: list[int] = []
        with Client(server.url) as client:
            for round_ in range(5):
                handle = client.counter.get_or_create([f"s{round_}"])
                conn = handle.connect()
                got: Queue[int] = Queue()
                conn.on("changed", got.put)
                handle.increment(3)
                seen.append(got.get(timeout=10))
                conn.dispose()
        return seen

    assert await asyncio.to_thread(run) == [3] * 5


async def test_what_the_actor_sends_to_one_connection_is_not_taken_for_a_number(
    server: ServerProcess,
) -> None:
    async with create_client(server.url) as client:
        handle = client.counter.get_or_create(["w"])
        await handle.increment(1)
        conn = handle.connect()
        heard: list[Any] = []
        conn.on("other", heard.append)
        conn.on("changed", heard.append)
        await conn.whisper()  # over the connection: c.conn is this one
        await handle.increment(1)
        await eventually(lambda: len(heard) >= 2, timeout=10, what="both messages")
        assert heard[-2:] == [7, 2]  # 7 is no event number
        await conn.dispose()

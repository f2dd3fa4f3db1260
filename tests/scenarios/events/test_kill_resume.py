"""A subscriber sees every event exactly once, in order, across three ``kill -9`` of the
server: after each restart its connection resumes from the last number it received,
and the events it had not received (in flight when the server died, or emitted before
it reconnected) come from the actor's event log.

Each event carries the counter's value after the increment that emitted it, and the
value and the event are written in one commit, so what the subscriber must have seen
is exactly ``1..final``, whatever the fate of the calls cut short by a kill.
"""

from __future__ import annotations

import asyncio

import pytest

from perdure.client import create_client
from tests.scenarios.events.drive import caught_up, drive
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(180)

KILLS = 3


async def test_every_event_once_in_order_across_three_kills(server: ServerProcess) -> None:
    async with create_client(server.url) as client:
        handle = client.counter.get_or_create(["k"])
        conn = handle.connect()
        seen: list[int] = []
        gaps: list[object] = []
        conn.on("changed", seen.append)
        conn.on_gap(gaps.append)
        await asyncio.wait_for(conn.wait_open(), 10)
        stop = asyncio.Event()
        drivers = [asyncio.create_task(drive(handle, stop)) for _ in range(4)]
        try:
            for _ in range(KILLS):
                before = len(seen)
                await eventually(lambda b=before: len(seen) >= b + 30, timeout=30, what="events")
                server.kill()
                await asyncio.sleep(0.3)
                server.restart()
            await eventually(lambda: len(seen) >= 30 + before, timeout=30, what="events")
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*drivers), 30)
        final = await caught_up(handle, seen)
        await conn.dispose()
    assert server.starts == KILLS + 1
    assert not gaps
    assert seen == list(range(1, final + 1)), (len(seen), final)

"""Retention of the event log, over a real server and its SQLite file: the log keeps at
most ``event_log_max_events`` events (plus the few a prune waits for) younger than
``event_log_max_age``; a subscriber cut off while more happened than the log holds is
told through ``on_gap`` and then gets every event that is still logged, in order.

The subscriber's socket goes through a TCP proxy the test cuts (``refuse``), while the
events are caused over HTTP directly, so the test decides exactly what it misses. The
``short`` actor keeps 20 events for 2 seconds (tests/scenarios/events/app.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from perdure.client import AsyncActorConnection, AsyncActorHandle, create_client
from perdure.handles import EventGap
from tests.support.server import ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(120)

MAX_EVENTS = 20
PRUNE_SLACK = MAX_EVENTS // 8  # a prune rides on every 8th part of the window


@pytest.fixture
def proxy(server: ServerProcess) -> Iterator[TcpProxy]:
    """A proxy to the server for the subscriber's socket."""
    link = TcpProxy("127.0.0.1", server.port).start()
    try:
        yield link
    finally:
        link.close()


def logged(data_dir: Path) -> list[int]:
    """The sequence numbers in the SQLite file's event log (read beside the server)."""
    db = sqlite3.connect(f"file:{data_dir / 'perdure.db'}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT seq FROM actor_events ORDER BY seq")]
    finally:
        db.close()


@dataclass
class Watched:
    """An actor called directly, and a subscriber to it through the proxy."""

    handle: AsyncActorHandle
    conn: AsyncActorConnection
    seen: list[int] = field(default_factory=list)
    gaps: list[EventGap] = field(default_factory=list)


@contextlib.asynccontextmanager
async def watched(server: ServerProcess, proxy: TcpProxy, key: str) -> AsyncIterator[Watched]:
    async with (
        create_client(f"http://127.0.0.1:{proxy.port}") as subscriber,
        create_client(server.url) as client,
    ):
        conn = subscriber.short.get_or_create([key]).connect()
        watch = Watched(client.short.get_or_create([key]), conn)
        conn.on("changed", watch.seen.append)
        conn.on_gap(watch.gaps.append)
        await asyncio.wait_for(conn.wait_open(), 10)
        yield watch
        await conn.dispose()


async def test_count_bound_and_the_gap(server: ServerProcess, proxy: TcpProxy) -> None:
    async with watched(server, proxy, "g") as watch:
        handle, conn, seen, gaps = watch.handle, watch.conn, watch.seen, watch.gaps
        await handle.burst(3)
        await eventually(lambda: seen == [1, 2, 3], timeout=10, what="the first events")

        # Away while fewer events than the log holds happen: all of them come back.
        proxy.refuse()
        await eventually(lambda: not conn.is_connected, timeout=10, what="the cut")
        await handle.burst(10)
        proxy.resume()
        await eventually(lambda: len(seen) == 13, timeout=15, what="the missed events")
        assert seen == list(range(1, 14))
        assert not gaps

        # Away while more happen: the client is told what is gone, then gets the rest.
        proxy.refuse()
        await eventually(lambda: not conn.is_connected, timeout=10, what="the cut")
        assert await handle.burst(50) == 63
        stored = logged(server.data_dir)
        assert MAX_EVENTS <= len(stored) <= MAX_EVENTS + PRUNE_SLACK
        assert stored == list(range(64 - len(stored), 64))
        proxy.resume()
        await eventually(lambda: seen[-1:] == [63], timeout=15, what="the logged events")
        assert gaps == [EventGap(after=13, resumed_at=64 - MAX_EVENTS)]
        assert seen == list(range(1, 14)) + list(range(64 - MAX_EVENTS, 64))


async def test_age_bound(server: ServerProcess, proxy: TcpProxy) -> None:
    async with watched(server, proxy, "a") as watch:
        handle, conn, seen, gaps = watch.handle, watch.conn, watch.seen, watch.gaps
        await handle.burst(1)
        await eventually(lambda: seen == [1], timeout=10, what="the first event")
        proxy.refuse()
        await eventually(lambda: not conn.is_connected, timeout=10, what="the cut")
        await handle.burst(3)  # 2..4, older than 2 s when the subscriber is back
        await asyncio.sleep(2.5)
        # Still stored (pruning rides on later commits), but no longer readable.
        assert logged(server.data_dir)[-3:] == [2, 3, 4]
        proxy.resume()
        await eventually(lambda: bool(gaps), timeout=15, what="the gap")
        assert gaps == [EventGap(after=1, resumed_at=5)]
        await handle.burst(2)  # 5, 6: their commits prune what is too old
        await eventually(lambda: seen == [1, 5, 6], timeout=10, what="the new events")
        assert logged(server.data_dir) == [5, 6]

"""Readiness (``/ready``) is whether the store answers (issue 16): one query per ``ttl``
however many probes ask, and a closed store is not ready.

A real server's ``/ready`` is in tests/scenarios/edge/test_ready.py, its outage side
(503 while PostgreSQL is unreachable, 200 after) in test_store_outage.py there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from perdure.runtime.host.readiness import Readiness
from perdure.store import SQLiteStore


class _CountingStore(SQLiteStore):
    pings = 0

    async def ping(self, timeout: float) -> None:
        self.pings += 1
        await asyncio.sleep(0.05)
        await super().ping(timeout)


async def test_a_probe_storm_costs_one_query_per_second(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path / "ready.db")
    await store.open()
    try:
        readiness = Readiness(store, ttl=1.0)
        answers = await asyncio.gather(*(readiness.check() for _ in range(200)))
        assert answers == [None] * 200
        assert await readiness.check() is None
        assert store.pings == 1
    finally:
        await store.close()


async def test_a_closed_store_is_not_ready(tmp_path: Path) -> None:
    readiness = Readiness(SQLiteStore(tmp_path / "never-opened.db"), ttl=0.0)
    error = await readiness.check()
    assert error is not None
    assert error.identifier == "store.unavailable"
    assert error.status == 503

"""``/ready`` beside ``/health``: readiness is whether the store answers (issue 16).

The outage side (``/ready`` 503 while PostgreSQL is unreachable, 200 after) is in
``test_store_outage.py``; here, a healthy server and a storm of probes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from perdure.runtime.host.readiness import Readiness
from perdure.store import SQLiteStore
from tests.support.server import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess("tests.edge.outage_app:registry", tmp_path / "data").start()
    try:
        yield process
    finally:
        process.kill()


async def test_ready_answers_200_while_the_store_answers(server: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        responses = await asyncio.gather(*(http.get(f"{server.url}/ready") for _ in range(50)))
        health = await http.get(f"{server.url}/health")
    assert {response.status_code for response in responses} == {200}
    assert responses[0].json()["status"] == "ready"
    assert health.json()["status"] == "ok"


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

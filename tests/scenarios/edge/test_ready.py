"""``/ready`` beside ``/health`` on a real ``perdure serve``: 200 while the store answers, under
a storm of probes (the outage side is in test_store_outage.py; the readiness cache in process is
tests/runtime/host/test_readiness.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess("tests.support.apps.outage:registry", tmp_path / "data").start()
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

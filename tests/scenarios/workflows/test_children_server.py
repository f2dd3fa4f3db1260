"""Child workflows over a real ``perdure serve`` (SQLite, and PostgreSQL), with
``kill -9``: a parent killed mid-run starts each child exactly once, a parent and its
child both asleep after a kill are woken by the child's end, and a cancel of the parent
reaches its child."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from perdure.client import AsyncClient
from perdure.errors import WorkflowCancelled
from tests.scenarios.workflows.children_app import LOG_ENV
from tests.support.server import ServerProcess
from tests.support.wait import eventually

REGISTRY = "tests.scenarios.workflows.children_app:registry"
WAIT = 30.0


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "children.log"


@pytest.fixture
def server(tmp_path: Path, log: Path, store_args: list[str]) -> Iterator[ServerProcess]:
    process = ServerProcess(
        REGISTRY,
        tmp_path / "data",
        env={LOG_ENV: str(log)},
        extra_args=["--log-level", "warning", *store_args],
    )
    process.start()
    try:
        yield process
    finally:
        process.kill()


def _created(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("created")]


async def _at_least(log: Path, count: int) -> bool:
    return len(_created(log)) >= count


async def test_a_parent_killed_mid_run_starts_each_child_exactly_once(
    server: ServerProcess, log: Path
) -> None:
    async with AsyncClient(server.url) as client:
        await client.order.get_or_create("o1").resolve()
        await eventually(lambda: _at_least(log, 1), timeout=WAIT)
    server.kill()  # between the first start and the next
    server.start()
    await eventually(lambda: _at_least(log, 3), timeout=WAIT)  # it resumed alone
    server.kill()  # while it waits for children that are working
    server.start()
    async with AsyncClient(server.url) as client:
        assert await client.order.get("o1").workflow_result(timeout=WAIT) == 0 + 10 + 20
    # Three child actors, whatever the kills hit (on_create may run again for one of
    # them if a kill lands between its creation and its first commit: the same actor).
    assert len(set(_created(log))) == 3
    async with httpx.AsyncClient(base_url=server.url) as admin:
        charges = (await admin.get("/admin/actors", params={"name": "charge"})).json()
    assert len(charges["actors"]) == 3


async def test_a_sleeping_parent_is_woken_by_its_childs_end_after_kill_9(
    server: ServerProcess,
) -> None:
    async with AsyncClient(server.url) as client:
        parent_id = await client.slow_order.get_or_create("s1").resolve()
        child = client.hold.get([parent_id, "hold"])
        await eventually(lambda: _status_is(child, "running"), timeout=WAIT)
    server.kill()  # both wait, with no alarm: only the child's end wakes the parent
    server.start()
    async with AsyncClient(server.url) as client:
        result = asyncio.ensure_future(client.slow_order.get("s1").workflow_result(timeout=WAIT))
        await asyncio.sleep(0.5)
        assert not result.done()
        await client.hold.get([parent_id, "hold"]).send("go", {"paid": True})
        assert await result == {"paid": True}


async def test_cancelling_a_parent_cancels_its_child(server: ServerProcess) -> None:
    async with AsyncClient(server.url) as client:
        parent = client.slow_order.get_or_create("s2")
        parent_id = await parent.resolve()
        child = client.hold.get([parent_id, "hold"])
        await eventually(lambda: _status_is(child, "running"), timeout=WAIT)
        await parent.cancel_workflow("changed my mind")
        with pytest.raises(WorkflowCancelled):
            await parent.workflow_result(timeout=WAIT)
        with pytest.raises(WorkflowCancelled) as child_cancelled:
            await child.workflow_result(timeout=WAIT)
        assert "changed my mind" in str(child_cancelled.value.reason)


async def _status_is(handle: object, status: str) -> bool:
    try:
        answer = await handle.workflow_status()  # type: ignore[attr-defined]
    except Exception:
        return False  # not created yet
    return bool(answer["status"] == status)

"""What only the in-process implementations show: the status right after a wake, the
seed's progress client run against ``runtime.client()``, and ``await handle.connect()``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import examples.progress_client
import pytest
from examples.app import registry as examples_registry

from perdure import ActorRuntime
from perdure.errors import PerdureError
from perdure.handles import Client
from perdure.runtime.local.client import LocalClient
from perdure.store import MemoryStore, SQLiteStore
from tests.support.apps import handles as app
from tests.support.wait import eventually


async def test_a_woken_workflow_reports_its_stored_status_not_pending(tmp_path: Path) -> None:
    async with ActorRuntime(app.registry, SQLiteStore(tmp_path / "db.sqlite")) as runtime:
        waiter = runtime.client().waiter.get_or_create(["w"])
        flow = runtime.client().flow.get_or_create(["f"])

        async def settled() -> bool:
            running = (await waiter.workflow_status())["status"] == "running"
            return running and (await flow.workflow_status())["status"] == "completed"

        await eventually(settled, what="one workflow waiting, one completed")
        for handle, expected in ((waiter, "running"), (flow, "completed")):
            for _ in range(3):  # each time woken by the status request itself
                await runtime.dispatch.ref(await handle.resolve()).sleep()
                assert (await handle.workflow_status())["status"] == expected


async def test_the_seeds_progress_client_runs_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with ActorRuntime(examples_registry, MemoryStore()) as runtime:

        @contextlib.asynccontextmanager
        async def in_process(endpoint: str) -> AsyncIterator[LocalClient]:
            async with runtime.client() as client:
                yield client

        # main() as written, with runtime.client() where it creates a network client.
        monkeypatch.setattr(examples.progress_client, "create_client", in_process)
        state = await examples.progress_client.main("in-process", "seed")
        assert state["sum"] == 12
        assert state["progress"]["completed"] == 2


async def test_connect_may_still_be_awaited_and_a_refusal_is_raised() -> None:
    async with ActorRuntime(app.registry, MemoryStore()) as runtime:
        client: Client = runtime.client()  # the in-process client is the Protocol's
        conn = await client.counter.get_or_create(["c"]).connect()
        assert conn.is_connected
        assert await conn.increment(1) == 1
        await conn.dispose()
        missing = client.counter.get(["nobody"]).connect()
        with pytest.raises(PerdureError) as refused:
            await missing.wait_open()
        assert refused.value.code == "not_found"
        await missing.dispose()

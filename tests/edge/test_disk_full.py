"""SQLite with a full disk (issue 16, outages): writes fail cleanly and the store recovers.

The full disk is simulated with a cap on the database file (``PRAGMA max_page_count``,
set through ``SQLiteStore(max_size=…)`` / ``set_max_size`` or ``?max_size=`` in the
URL): SQLite then answers a write that needs another page with ``SQLITE_FULL``, exactly
as on a full file system, and this works in CI without mounting anything. A write that
does not fit fails with 507 ``store.full``; nothing of it is applied, every acknowledged
write stays, and writes succeed again once there is room (the cap raised).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from perdure.errors import StoreFull
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.store import SQLiteStore
from tests.edge.outage_app import registry
from tests.support.server import ServerProcess

BIG = 300_000  # entries too many for the capped file (each is a CBOR integer)


def _file_size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


async def test_a_full_database_refuses_the_write_keeps_the_rest_and_recovers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "full.db"
    store = SQLiteStore(path)
    async with ActorRuntime(registry, store) as runtime:
        actor_id, _ = await runtime.get_or_create_actor("ledger", "k")
        assert await runtime.call(actor_id, "add", [1]) == 1
        await store.set_max_size(_file_size(path) + 64 * 1024)

        # One action stores a state far over the cap: refused whole.
        with pytest.raises(StoreFull) as refused:
            await runtime.call(actor_id, "add", [list(range(BIG))])
        assert refused.value.identifier == "store.full"
        assert refused.value.status == 507
        # Nothing half-applied: memory does not run ahead of the store either (the
        # instance was dropped and wakes from the stored state).
        assert await runtime.call(actor_id, "entries", []) == [1]
        # Small writes still fit in the room left.
        assert await runtime.call(actor_id, "add", [2]) == 2
        # A create needing room fails the same way and leaves nothing behind.
        with pytest.raises(StoreFull):
            await runtime.get_or_create_actor("ledger", "big", list(range(BIG)))
        assert await store.find_actor("ledger", ("big",)) is None

        await store.set_max_size(None)  # space returns
        assert await runtime.call(actor_id, "add", [3]) == 3
        assert await runtime.call(actor_id, "entries", []) == [1, 2, 3]
    # Every acknowledged write is in the file, read by a new store.
    reopened = SQLiteStore(path)
    async with ActorRuntime(registry, reopened) as runtime:
        assert await runtime.call(actor_id, "entries", []) == [1, 2, 3]


def test_the_server_answers_507_store_full_with_retry_after(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "capped.db"
    # 200 KB: room for the schema and a few small actors, not for a big state.
    capped = ServerProcess(
        "tests.edge.outage_app:registry",
        data,
        extra_args=["--store", f"sqlite:///{db}?max_size=204800"],
    ).start()
    url = f"{capped.url}/gateway/ledger/action/add?rvt-namespace=default&rvt-method=getOrCreate"
    try:
        with httpx.Client(timeout=30) as http:
            assert http.post(f"{url}&rvt-key=a", json={"args": [1]}).status_code == 200
            response = http.post(f"{url}&rvt-key=a", json={"args": [list(range(BIG))]})
            assert response.status_code == 507, response.text
            assert response.json()["code"] == "full"
            assert response.headers["x-rivet-error"] == "store.full"
            assert int(response.headers["retry-after"]) >= 1
            assert http.post(f"{url}&rvt-key=a", json={"args": [2]}).status_code == 200
    finally:
        assert capped.terminate() == 0
    # Space returns (the cap raised): the acknowledged writes are there, new ones fit.
    roomy = ServerProcess(
        "tests.edge.outage_app:registry",
        data,
        port=capped.port,
        extra_args=["--store", f"sqlite:///{db}"],
    ).start()
    try:
        with httpx.Client(timeout=30) as http:
            response = http.post(f"{url}&rvt-key=a", json={"args": [list(range(BIG))]})
            assert response.status_code == 200, response.text
            entries = http.post(
                url.replace("action/add", "action/entries") + "&rvt-key=a", json={"args": []}
            )
            assert entries.json()["output"][:2] == [1, 2]
            assert len(entries.json()["output"]) == 3
    finally:
        roomy.kill()

"""SQLite with a full disk, in process (issue 16, outages): a write that does not fit fails
whole with ``store.full``, every acknowledged write stays, and writes succeed again once
there is room. The full disk is a cap on the database file (``SQLiteStore.set_max_size``);
the server's side (507 with ``Retry-After``) is in tests/scenarios/edge/test_disk_full.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perdure.errors import StoreFull
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.store import SQLiteStore
from tests.support.apps.outage import registry

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
        assert await runtime.dispatch.ref(actor_id).call("add", [1]) == 1
        await store.set_max_size(_file_size(path) + 64 * 1024)

        # One action stores a state far over the cap: refused whole.
        with pytest.raises(StoreFull) as refused:
            await runtime.dispatch.ref(actor_id).call("add", [list(range(BIG))])
        assert refused.value.identifier == "store.full"
        assert refused.value.status == 507
        # Nothing half-applied: memory does not run ahead of the store either (the
        # instance was dropped and wakes from the stored state).
        assert await runtime.dispatch.ref(actor_id).call("entries", []) == [1]
        # Small writes still fit in the room left.
        assert await runtime.dispatch.ref(actor_id).call("add", [2]) == 2
        # A create needing room fails the same way and leaves nothing behind.
        with pytest.raises(StoreFull):
            await runtime.get_or_create_actor("ledger", "big", list(range(BIG)))
        assert await store.find_actor("ledger", ("big",)) is None

        await store.set_max_size(None)  # space returns
        assert await runtime.dispatch.ref(actor_id).call("add", [3]) == 3
        assert await runtime.dispatch.ref(actor_id).call("entries", []) == [1, 2, 3]
    # Every acknowledged write is in the file, read by a new store.
    reopened = SQLiteStore(path)
    async with ActorRuntime(registry, reopened) as runtime:
        assert await runtime.dispatch.ref(actor_id).call("entries", []) == [1, 2, 3]

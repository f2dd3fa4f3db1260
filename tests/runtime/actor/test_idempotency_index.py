"""What a keyed request reads (docs/idempotency.md, "What a key costs"), counted on every
store (PostgreSQL when a server answers): a fresh key reads nothing (one range read of
the actor's keys at the instance's first keyed request), a retry reads its record and
gets the first answer, a restarted instance finds the keys written before the restart,
an index too small for the actor's keys reads the store for the keys it does not hold
and still replays and refuses, and a withdrawn key leaves nothing behind."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from perdure.errors import IdempotencyError, PerdureError
from perdure.runtime.kernel.idempotency import IdempotencyKeys
from perdure.store import MemoryStore, SQLiteStore, Store
from perdure.testing import ActorTestEnv
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

# The counter of test_idempotency.py (add, total, size; a queue of at most 3 messages;
# keys kept 60 s) and its start time.
from .test_idempotency import START, registry

# Builds a store on the test's database: each call a new, unopened one (a restart).
Stores = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "memory":
        memory = MemoryStore()  # keeps its data from one open() to the next
        yield lambda: memory
    elif request.param == "sqlite":
        yield lambda: SQLiteStore(tmp_path / "store.db")
    else:
        require_postgres()
        schema = new_schema_name()
        try:
            yield lambda: postgres_store(schema)
        finally:
            drop_schema(schema)


def counted(store: Store) -> Counter[str]:
    """Count ``store``'s reads of idempotency keys (its instance's methods, wrapped)."""
    calls: Counter[str] = Counter()
    for name in ("load_idempotency", "load_idempotency_keys"):
        method = getattr(store, name)

        @functools.wraps(method)
        async def counting(*args: Any, _method: Any = method, _name: str = name) -> Any:
            calls[_name] += 1
            return await _method(*args)

        setattr(store, name, counting)
    return calls


def reads(point: int, ranges: int = 1) -> Counter[str]:
    return Counter({"load_idempotency": point, "load_idempotency_keys": ranges})


async def test_a_fresh_key_reads_nothing_and_a_retry_its_record(stores: Stores) -> None:
    store = stores()
    calls = counted(store)
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.counter.get_or_create("c")
        await handle.resolve()
        # The first keyed requests arrive together: one of them loads the index.
        sends = (handle.send("jobs", i, idempotency_key=f"send-{i}") for i in range(3))
        await asyncio.gather(*sends)
        for index in range(20):
            assert await handle.with_idempotency_key(f"add-{index}").add(1) == index + 1
        assert calls == reads(0)  # 23 fresh keys: the one range read, no point read
        # A retry reads its record and gets the first answer, applied once.
        await handle.send("jobs", 1, idempotency_key="send-1")
        assert await handle.with_idempotency_key("add-4").add(1) == 5
        with pytest.raises(IdempotencyError) as reused:
            await handle.with_idempotency_key("add-4").add(2)
        assert reused.value.code == "key_reused"
        assert calls == reads(3)
        assert (await handle.total(), await handle.size()) == (20, 3)


async def test_a_restarted_instance_replays_keys_written_before(stores: Stores) -> None:
    async with ActorTestEnv(registry, store=stores(), start=START) as env:
        handle = env.client.counter.get_or_create("c")
        assert await handle.with_idempotency_key("k").add(7) == 7
        await handle.send("jobs", "x", idempotency_key="s")
    store = stores()
    calls = counted(store)
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.counter.get_or_create("c")
        assert await handle.with_idempotency_key("k").add(7) == 7  # the first answer
        await handle.send("jobs", "x", idempotency_key="s")
        with pytest.raises(IdempotencyError) as reused:
            await handle.send("jobs", "y", idempotency_key="s")
        assert reused.value.code == "key_reused"
        assert calls == reads(3)  # the index held all three: each read its record
        assert await handle.with_idempotency_key("new").add(1) == 8
        assert calls == reads(3)  # a fresh key: none
        assert (await handle.total(), await handle.size()) == (8, 1)


async def test_an_index_too_small_reads_the_keys_it_does_not_hold(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(IdempotencyKeys, "index_limit", 4)
    store = stores()
    calls = counted(store)
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.counter.get_or_create("c")
        for index in range(5):  # the fifth sheds the two oldest (down to 3 of 4)
            await handle.with_idempotency_key(f"k{index}").add(1)
        assert calls == reads(0)
        # Shed keys are read from the store: replayed, or refused when reused.
        assert await handle.with_idempotency_key("k0").add(1) == 1
        with pytest.raises(IdempotencyError):
            await handle.with_idempotency_key("k1").add(2)
        assert calls == reads(2)
        # A fresh key is read too (it might be one of the shed ones), then applied.
        assert await handle.with_idempotency_key("fresh").add(1) == 6
        assert calls == reads(3)
    store = stores()
    calls = counted(store)
    # Awake throughout (no sleep as the clock moves): one instance, one index.
    async with ActorTestEnv(registry, store=store, start=START, idle_sleep=False) as env:
        handle = env.client.counter.get_or_create("c")
        # Six keys stored, four fit: the range read finds more than fit.
        assert await handle.with_idempotency_key("k0").add(1) == 1
        assert await handle.with_idempotency_key("fresh").add(1) == 6
        with pytest.raises(IdempotencyError):
            await handle.with_idempotency_key("k2").add(5)
        assert await handle.with_idempotency_key("new").add(1) == 7
        assert calls == reads(4)
        # Once every key the index could not hold is past the window, it is sure again.
        await env.advance(61)
        assert await handle.with_idempotency_key("k0").add(1) == 8  # expired: applied
        assert await handle.with_idempotency_key("later").add(1) == 9
        assert calls == reads(4)


async def test_a_withdrawn_key_leaves_nothing(stores: Stores) -> None:
    store = stores()
    calls = counted(store)
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.counter.get_or_create("c")
        for index in range(3):
            await handle.send("jobs", index)
        with pytest.raises(PerdureError) as full:
            await handle.send("jobs", 9, idempotency_key="late")
        assert full.value.code == "full"
        assert await store.load_idempotency(await handle.resolve(), "late") is None
        calls.clear()
        # Not applied, so not remembered: the same key runs (and is refused again).
        with pytest.raises(PerdureError) as again:
            await handle.send("jobs", 9, idempotency_key="late")
        assert again.value.code == "full"
        assert calls == Counter()

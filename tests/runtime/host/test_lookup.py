"""Finding an actor by name and key: an awake actor, or one found or created before, needs
no store read; concurrent lookups of one key share one read; a destroyed actor's key is
looked up in the store again, also when another node destroyed it (the id the runtime
remembered names no actor: the request asks the store for the key's actor now)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from perdure import ActionContext, ActorRuntime, Registry, actor, setup
from perdure.errors import PerdureError
from perdure.keys import Key
from perdure.runtime.actor.operations import ActorAddress
from perdure.store import ActorRecord, MemoryStore


def _registry() -> Registry:
    def increment(c: ActionContext) -> int:
        c.state["n"] += 1
        return int(c.state["n"])

    return setup(use={"counter": actor(state={"n": 0}, actions={"increment": increment})})


Counters = tuple[ActorRuntime, MemoryStore]


@pytest.fixture
async def counters() -> AsyncIterator[Counters]:
    """A runtime of counters on a memory store, and the store."""
    store = MemoryStore()
    async with ActorRuntime(_registry(), store) as runtime:
        yield runtime, store


def _counting_lookups(store: MemoryStore) -> list[tuple[str, Key]]:
    """Record every ``find_actor`` the runtime asks ``store`` for (the store still answers)."""
    asked: list[tuple[str, Key]] = []
    find: Callable[[str, Key], Awaitable[ActorRecord | None]] = store.find_actor

    async def counting(name: str, key: Key) -> ActorRecord | None:
        asked.append((name, key))
        await asyncio.sleep(0.01)  # a read takes a while: concurrent callers overlap
        return await find(name, key)

    store.find_actor = counting  # type: ignore[method-assign]
    return asked


async def test_an_awake_actor_is_found_by_key_without_a_store_read(counters: Counters) -> None:
    runtime, store = counters
    counter = runtime.client().counter
    assert await counter.get_or_create("a").increment() == 1
    asked = _counting_lookups(store)
    for expected in range(2, 52):
        # A new handle each time: each call resolves the key again.
        assert await counter.get_or_create("a").increment() == expected
    assert await counter.get("a").increment() == 52
    assert asked == []


async def test_concurrent_first_calls_on_one_key_share_one_read(counters: Counters) -> None:
    runtime, store = counters
    asked = _counting_lookups(store)
    counter = runtime.client().counter
    results: list[Any] = await asyncio.gather(
        *(counter.get_or_create("new").increment() for _ in range(200))
    )
    assert sorted(results) == list(range(1, 201))
    # One read for the key; at most one more, shared by the callers who tried to create
    # the actor while it was being created (each one read the store before).
    assert 1 <= len(asked) <= 2
    assert set(asked) == {("counter", ("new",))}


async def test_a_sleeping_actor_is_found_without_a_read_and_a_destroyed_one_again(
    counters: Counters,
) -> None:
    runtime, store = counters
    counter = runtime.client().counter
    first = await counter.get_or_create("d").resolve()
    await counter.get_or_create("d").increment()

    await runtime.sleep_actor(first)
    asked = _counting_lookups(store)
    assert await counter.get_or_create("d").increment() == 2  # woken from the store
    assert asked == []  # its id was remembered

    await runtime.destroy_actor(first)
    second = await counter.get_or_create("d").resolve()
    assert second != first  # a new actor, not the destroyed one's id
    assert asked == [("counter", ("d",))]
    assert await counter.get_or_create("d").increment() == 1


async def test_a_key_whose_actor_was_destroyed_elsewhere_is_looked_up_again(
    counters: Counters,
) -> None:
    """As when another node destroyed the actor: the store no longer has it, and this
    runtime still remembers its id. getOrCreate creates a new actor (once), get answers
    actor.not_found, and a handle that reached the old actor stays bound to it."""
    runtime, store = counters
    counter = runtime.client().counter
    gone: dict[str, str] = {}
    for key in ("for-getorcreate", "for-get"):
        await counter.get_or_create(key).increment()
        gone[key] = await counter.get_or_create(key).resolve()
        await runtime.sleep_actor(gone[key])
        await store.delete_actor(gone[key])  # behind the runtime's back
        assert runtime.remembers("counter", key)
    old = counter.get_for_id(gone["for-getorcreate"])

    results = await asyncio.gather(
        *(counter.get_or_create("for-getorcreate").increment() for _ in range(5))
    )
    assert sorted(results) == [1, 2, 3, 4, 5]  # one new actor
    assert await counter.get_or_create("for-getorcreate").resolve() != gone["for-getorcreate"]
    with pytest.raises(PerdureError) as missing:
        await counter.get("for-get").increment()
    assert missing.value.code == "not_found"
    assert not runtime.remembers("counter", "for-get")  # the read replaced the memory
    with pytest.raises(PerdureError):
        await old.increment()  # bound to the destroyed actor


async def test_a_get_first_resolution_ends_in_the_keys_actor_when_memory_is_stale(
    counters: Counters,
) -> None:
    """The gateway with a creation gate asks ``get`` first (creating nothing), passing
    its getOrCreate as ``then``: when the remembered id's actor is gone, the request
    goes on with the key's actor now, created."""
    runtime, store = counters
    await runtime.client().counter.get_or_create("gated").increment()
    first = await runtime.client().counter.get_or_create("gated").resolve()
    await runtime.sleep_actor(first)
    await store.delete_actor(first)  # behind the runtime's back
    get_or_create = ActorAddress(name="counter", key=("gated",), method="getOrCreate")
    ref = await runtime.dispatch.resolve(replace(get_or_create, method="get"), then=get_or_create)
    assert ref.actor_id == first  # remembered
    assert await ref.call("increment", []) == 1
    assert ref.actor_id != first

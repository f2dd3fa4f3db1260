"""The ownership part of the store contract (perdure.store.base), run against every
backend: claims, leases, wake-up watching.

Times passed as ``now`` are far in the past or future of the real clock, so that the
store's own clock (wall clock, or PostgreSQL's) sees those leases as expired or live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perdure.errors import ActorNotFound
from perdure.store import (
    ActorCommit,
    ActorOwnedElsewhere,
    Lease,
    MemoryStore,
    SQLiteStore,
    Store,
    StoreClosed,
)

from .test_contract import NOW, TIMEOUT, record

StoreFactory = Callable[[Path], Store]
# A lease acquired "now" with this ttl is live for the whole test on any clock.
LONG = 3_600_000
# Leases acquired at PAST expired long ago on the store's clock.
PAST = 1_000_000


async def test_acquire_counts_a_generation_and_records_the_owner(store: Store) -> None:
    await store.create_actor(record("a1", generation=3, state=b"s"))
    taken, lease = await store.acquire_lease("a1", "n1", 1_000, now=PAST)
    assert (taken.generation, taken.state) == (4, b"s")
    assert lease == Lease("a1", "n1", 4, PAST + 1_000)
    assert await store.get_actor("a1") == taken
    assert await store.get_lease("a1") == lease
    assert await store.get_lease("ghost") is None
    with pytest.raises(ActorNotFound):
        await store.acquire_lease("ghost", "n1", 1_000)
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.acquire_lease("a1", "n1", 0)


async def test_a_commit_fenced_with_the_lease_applies_until_the_actor_is_taken_again(
    store: Store,
) -> None:
    await store.create_actor(record("a1"))
    _, lease = await store.acquire_lease("a1", "n1", 1_000, now=PAST)
    await store.commit(ActorCommit("a1", fence=lease.generation, state=b"mine"))
    _, newer = await store.acquire_lease("a1", "n2", LONG)  # n1's lease has expired
    assert newer.generation == lease.generation + 1
    with pytest.raises(ActorNotFound):
        await store.commit(ActorCommit("a1", fence=lease.generation, state=b"stale"))
    stored = await store.get_actor("a1")
    assert stored is not None
    assert stored.state == b"mine"


async def test_a_live_lease_keeps_other_nodes_out(store: Store) -> None:
    await store.create_actor(record("a1"))
    _, lease = await store.acquire_lease("a1", "n1", LONG)
    with pytest.raises(ActorOwnedElsewhere) as refused:
        await store.acquire_lease("a1", "n2", 1_000)
    error = refused.value
    assert error.identifier == "actor.owned_elsewhere"
    assert error.metadata == {"actor_id": "a1", "owner_node": "n1", "expires_at": lease.expires_at}
    with pytest.raises(ActorOwnedElsewhere):
        await store.claim_actor("a1")  # the one-node claim respects it too
    # Refusals change nothing: n1's lease and generation stand.
    assert await store.get_lease("a1") == lease
    await store.commit(ActorCommit("a1", fence=lease.generation, state=b"n1"))
    # The owner itself may acquire again: a new instance, a new generation.
    _, again = await store.acquire_lease("a1", "n1", LONG)
    assert again.generation == lease.generation + 1


async def test_an_expired_lease_is_taken_over_on_the_store_clock(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.acquire_lease("a1", "n1", 1_000, now=NOW)
    # Live at NOW + 999 by the caller's clock, expired at NOW + 1_000.
    with pytest.raises(ActorOwnedElsewhere):
        await store.acquire_lease("a1", "n2", 1_000, now=NOW + 999)
    _, lease = await store.acquire_lease("a1", "n2", 1_000, now=NOW + 1_000)
    assert lease == Lease("a1", "n2", 2, NOW + 2_000)
    # NOW is long past on the store's own clock: the one-node claim takes it too.
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    assert claimed.generation == 3


async def test_release_gives_the_actor_back_only_if_still_ours(store: Store) -> None:
    await store.create_actor(record("a1"))
    _, old = await store.acquire_lease("a1", "n1", 1_000, now=PAST)
    _, current = await store.acquire_lease("a1", "n2", LONG)
    await store.release_lease(old)  # stale: nothing to give back
    assert await store.get_lease("a1") == current
    await store.release_lease(current)
    assert await store.get_lease("a1") is None
    await store.release_lease(current)  # twice is fine
    # Released, the generation still fences: a last commit of that instance applies.
    await store.commit(ActorCommit("a1", fence=current.generation, state=b"last"))
    _, taken = await store.acquire_lease("a1", "n3", LONG)
    assert taken.generation == current.generation + 1


async def test_deleting_an_actor_removes_its_lease(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.acquire_lease("a1", "n1", LONG)
    await store.delete_actor("a1")
    assert await store.get_lease("a1") is None


async def test_the_one_node_claim_clears_a_lease_and_fences_it(store: Store) -> None:
    await store.create_actor(record("a1"))
    _, lease = await store.acquire_lease("a1", "n1", 1_000, now=PAST)
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    assert claimed.generation == lease.generation + 1
    assert await store.get_lease("a1") is None  # no owner recorded: nobody is kept out
    with pytest.raises(ActorNotFound):
        await store.commit(ActorCommit("a1", fence=lease.generation, state=b"stale"))
    _, taken = await store.acquire_lease("a1", "n2", LONG)
    assert taken.generation == claimed.generation + 1


# --- wake-up notifications --------------------------------------------------------------


async def test_watching_wakeups_reports_earlier_alarms_where_others_write(store: Store) -> None:
    """PostgreSQL reports every committed earlier alarm (its other cases are in
    postgres/test_store.py); memory and SQLite, which one process writes, report nothing."""
    seen: list[int] = []
    stop = await store.watch_wakeups(seen.append)
    await store.create_actor(record("a1", wake_at=NOW + 100))
    await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 50))
    expected = [] if isinstance(store, (MemoryStore, SQLiteStore)) else [NOW + 100, NOW + 50]
    async with asyncio.timeout(TIMEOUT):
        while len(seen) < len(expected):
            await asyncio.sleep(0.01)
    stop()
    stop()  # idempotent
    await store.commit(ActorCommit("a1", set_wake_at=True, wake_at=NOW + 10))
    await asyncio.sleep(0.2)
    assert seen == expected


async def test_a_closed_store_refuses_ownership_and_membership_calls(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    closed = store_factory(tmp_path)
    lease = Lease("a1", "n1", 1, NOW)
    calls: list[Any] = [
        closed.acquire_lease("a1", "n1", 1_000),
        closed.release_lease(lease),
        closed.get_lease("a1"),
        closed.watch_wakeups(print),
        closed.register_node("n1", "http://n1:6420", 1_000),
        closed.heartbeat_node("n1", 1_000),
        closed.deregister_node("n1"),
        closed.list_nodes(),
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            await call

"""The per-actor event log in the store contract, on every backend (docs/events.md):
events are written with the commit that carries them and numbered by the caller,
``event_seq`` is kept on the actor row, ``load_events`` reads a range from a number,
retention prunes by count and age before the commit's puts, a failed commit writes no
event, and deleting the actor deletes its log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.errors import ActorNotFound
from perdure.store import ActorCommit, EventRecord, MemoryStore, Store

from .conftest import StoreFactory
from .test_contract import TIMEOUT, record


def event(seq: int, at: int = 1_000) -> EventRecord:
    return EventRecord(seq, f"e{seq % 3}", bytes([seq % 256]) * 3, at + seq)


def emitted(*seqs: int, at: int = 1_000) -> ActorCommit:
    """What the runtime writes: state, the events and the last number given."""
    return ActorCommit(
        "a1", state=b"s%d" % seqs[-1], event_put=[event(s, at) for s in seqs], event_seq=seqs[-1]
    )


async def test_events_are_logged_and_numbered(store: Store) -> None:
    await store.create_actor(record("a1"))
    assert (await store.get_actor("a1")).event_seq == 0  # type: ignore[union-attr]
    await store.commit(emitted(1, 2))
    await store.commit(emitted(3))
    assert await store.load_events("a1", 0, 100) == [event(1), event(2), event(3)]
    assert await store.load_events("a1", 1, 1) == [event(2)]
    assert await store.load_events("a1", 3, 100) == []
    assert await store.load_events("a1", 0, 0) == []
    assert await store.load_events("nobody", 0, 10) == []
    stored = await store.get_actor("a1")
    assert stored is not None
    assert stored.event_seq == 3
    assert stored.state == b"s3"
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    assert claimed.event_seq == 3


async def test_an_event_without_a_state_change_is_written(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", event_put=[event(1)], event_seq=1))
    assert await store.load_events("a1", 0, 10) == [event(1)]
    assert (await store.get_actor("a1")).event_seq == 1  # type: ignore[union-attr]


async def test_retention_prunes_by_count_and_age_before_puts(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(emitted(*range(1, 11)))  # emitted_at 1001..1010
    # Count: keep seq > 4; age: drop emitted_at < 1007 (seq 1..6). Puts are never pruned.
    prune = ActorCommit("a1", event_put=[event(11, at=0)], event_seq=11, event_prune=(4, 1_007))
    await store.commit(prune)
    assert [e.seq for e in await store.load_events("a1", 0, 100)] == [7, 8, 9, 10, 11]
    # Numbering continues after a log pruned empty.
    await store.commit(ActorCommit("a1", event_prune=(11, 0)))
    assert await store.load_events("a1", 0, 100) == []
    assert (await store.get_actor("a1")).event_seq == 11  # type: ignore[union-attr]


async def test_a_fenced_commit_writes_no_event(store: Store) -> None:
    await store.create_actor(record("a1"))
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    stale = ActorCommit("a1", fence=claimed.generation - 1, event_put=[event(1)], event_seq=1)
    with pytest.raises(ActorNotFound):
        await store.commit(stale)
    assert await store.load_events("a1", 0, 10) == []
    assert (await store.get_actor("a1")).event_seq == 0  # type: ignore[union-attr]


async def test_events_of_commits_written_together(store: Store) -> None:
    # Commits of distinct actors submitted together (one merged statement where a
    # backend groups), one of them to a missing actor: it alone fails.
    ids = [f"a{index}" for index in range(4)]
    for actor_id in ids[:3]:
        await store.create_actor(record(actor_id))
    commits = [
        ActorCommit(
            actor_id,
            state=b"s",
            event_put=[event(5 * index + 1), event(5 * index + 2)],
            event_seq=5 * index + 2,
        )
        for index, actor_id in enumerate(ids)
    ]
    results = await asyncio.wait_for(
        asyncio.gather(*(store.commit(c) for c in commits), return_exceptions=True), TIMEOUT
    )
    assert [isinstance(r, ActorNotFound) for r in results] == [False, False, False, True]
    for index, actor_id in enumerate(ids[:3]):
        logged = await store.load_events(actor_id, 0, 10)
        assert logged == [event(5 * index + 1), event(5 * index + 2)]
        assert (await store.get_actor(actor_id)).event_seq == 5 * index + 2  # type: ignore[union-attr]
    assert await store.load_events("a3", 0, 10) == []


async def test_delete_actor_deletes_its_events(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(emitted(1, 2))
    assert await store.delete_actor("a1")
    await store.create_actor(record("a1"))
    assert await store.load_events("a1", 0, 10) == []
    assert (await store.get_actor("a1")).event_seq == 0  # type: ignore[union-attr]


async def test_events_survive_reopening(store_factory: StoreFactory, tmp_path: Path) -> None:
    first = store_factory(tmp_path)
    if isinstance(first, MemoryStore):
        pytest.skip("a new memory store starts empty")
    await first.open()
    try:
        await first.create_actor(record("a1"))
        await first.commit(emitted(1, 2, 3))
    finally:
        await first.close()
    second = store_factory(tmp_path)
    await second.open()
    try:
        assert await second.load_events("a1", 1, 10) == [event(2), event(3)]
        assert (await second.get_actor("a1")).event_seq == 3  # type: ignore[union-attr]
    finally:
        await second.close()

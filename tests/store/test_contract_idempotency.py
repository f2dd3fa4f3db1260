"""Idempotency keys in the store contract, on every backend (docs/idempotency.md): a
key's record is written by the commit that carries it, with the commit's other writes or
not at all (a fenced commit writes none), ``load_idempotency`` reads it back by actor and
key, a prune removes the actor's records created before its bound before the commit's
puts, commits written together keep their keys apart, deleting the actor deletes its
keys, and the records survive reopening. ``load_idempotency_keys`` lists an actor's
newest keys of a window, newest first, at most a limit (what a live actor keeps in
memory so that a fresh key costs no read)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.errors import ActorNotFound
from perdure.store import ActorCommit, IdempotencyRecord, MemoryStore, QueueMessageRecord, Store

from .conftest import StoreFactory
from .test_contract import TIMEOUT, record


def key(name: str, at: int = 1_000, answer: bytes = b"\xa1ao\x01") -> IdempotencyRecord:
    return IdempotencyRecord(name, f"fp-{name}", at, answer)


def sent(actor_id: str, message_id: int, *keys: IdempotencyRecord) -> ActorCommit:
    """What a keyed send writes: the message and its key, in one commit."""
    message = QueueMessageRecord(message_id, "jobs", b"\x01", 1_000)
    return ActorCommit(
        actor_id, queue_put=[message], queue_next_id=message_id + 1, key_put=list(keys)
    )


async def test_a_key_is_written_with_its_commit_and_read_back(store: Store) -> None:
    await store.create_actor(record("a1"))
    assert await store.load_idempotency("a1", "k1") is None
    await store.commit(sent("a1", 1, key("k1")))
    assert await store.load_idempotency("a1", "k1") == key("k1")
    assert [m.id for m in await store.load_queue("a1")] == [1]
    assert await store.load_idempotency("a1", "k2") is None
    assert await store.load_idempotency("nobody", "k1") is None
    # A key alone (a read-only action's answer) is a write too.
    alone = ActorCommit("a1", key_put=[key("k2", answer=b"")])
    assert not alone.is_empty()
    await store.commit(alone)
    assert await store.load_idempotency("a1", "k2") == key("k2", answer=b"")


async def test_keys_are_per_actor(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2", name="other"))
    await store.commit(sent("a1", 1, key("k", answer=b"one")))
    await store.commit(sent("a2", 1, key("k", answer=b"two")))
    assert (await store.load_idempotency("a1", "k")).answer == b"one"  # type: ignore[union-attr]
    assert (await store.load_idempotency("a2", "k")).answer == b"two"  # type: ignore[union-attr]


async def test_a_long_key_and_a_large_answer_round_trip(store: Store) -> None:
    await store.create_actor(record("a1"))
    long = "k" * 255 + "é"
    big = bytes(range(256)) * 4096  # 1 MiB
    await store.commit(ActorCommit("a1", key_put=[key(long, answer=big)]))
    assert await store.load_idempotency("a1", long) == key(long, answer=big)


async def test_a_fenced_commit_writes_no_key(store: Store) -> None:
    await store.create_actor(record("a1"))
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    stale = sent("a1", 1, key("k1"))
    stale.fence = claimed.generation - 1
    with pytest.raises(ActorNotFound):
        await store.commit(stale)
    assert await store.load_idempotency("a1", "k1") is None
    assert await store.load_queue("a1") == []
    with pytest.raises(ActorNotFound):
        await store.commit(sent("missing", 1, key("k1")))
    assert await store.load_idempotency("missing", "k1") is None


async def test_prune_removes_old_keys_before_puts(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2", name="other"))
    await store.commit(ActorCommit("a1", key_put=[key(f"k{at}", at=at) for at in range(5)]))
    await store.commit(ActorCommit("a2", key_put=[key("old", at=0)]))
    # Drop created_at < 3; a put of an old key in the same commit is kept (puts last).
    await store.commit(ActorCommit("a1", key_put=[key("k0", at=10)], key_prune=3))
    kept = [k for k in ("k0", "k1", "k2", "k3", "k4") if await store.load_idempotency("a1", k)]
    assert kept == ["k0", "k3", "k4"]
    assert (await store.load_idempotency("a1", "k0")).created_at == 10  # type: ignore[union-attr]
    assert await store.load_idempotency("a2", "old") == key("old", at=0)  # another actor's
    await store.commit(ActorCommit("a1", key_prune=1_000_000))
    assert all([await store.load_idempotency("a1", k) is None for k in ("k0", "k3", "k4")])


async def test_keys_of_commits_written_together(store: Store) -> None:
    # Commits of distinct actors submitted together, one of them to a missing actor:
    # it alone fails, and its key is not written.
    ids = [f"a{index}" for index in range(4)]
    for actor_id in ids[:3]:
        await store.create_actor(record(actor_id))
    commits = [sent(actor_id, 1, key(f"k-{actor_id}")) for actor_id in ids]
    commits[1].state = b"s"  # a state change beside the key
    results = await asyncio.wait_for(
        asyncio.gather(*(store.commit(c) for c in commits), return_exceptions=True), TIMEOUT
    )
    assert [isinstance(r, ActorNotFound) for r in results] == [False, False, False, True]
    for actor_id in ids[:3]:
        assert await store.load_idempotency(actor_id, f"k-{actor_id}") == key(f"k-{actor_id}")
    assert await store.load_idempotency("a3", "k-a3") is None


async def test_load_keys_lists_the_newest_of_a_window(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2", name="other"))
    assert await store.load_idempotency_keys("a1", 0, 10) == []
    # Committed out of order, over two commits: the list is by created_at, newest first.
    await store.commit(ActorCommit("a1", key_put=[key(f"k{at}", at=at) for at in (3, 1, 5)]))
    await store.commit(sent("a1", 1, key("k4", at=4), key("k2", at=2)))
    await store.commit(ActorCommit("a2", key_put=[key("other", at=9)]))
    everything = [("k5", 5), ("k4", 4), ("k3", 3), ("k2", 2), ("k1", 1)]
    assert await store.load_idempotency_keys("a1", 0, 10) == everything
    assert await store.load_idempotency_keys("a1", 3, 10) == everything[:3]  # at or after
    assert await store.load_idempotency_keys("a1", 0, 2) == everything[:2]  # the newest
    assert await store.load_idempotency_keys("a1", 6, 10) == []
    assert await store.load_idempotency_keys("a1", 0, 0) == []
    assert await store.load_idempotency_keys("a1", 0, -1) == []
    assert await store.load_idempotency_keys("nobody", 0, 10) == []
    assert await store.load_idempotency_keys("a2", 0, 10) == [("other", 9)]
    # A key put again moves to its new time; a prune takes keys out of the list.
    await store.commit(ActorCommit("a1", key_put=[key("k1", at=7)], key_prune=3))
    assert await store.load_idempotency_keys("a1", 0, 10) == [
        ("k1", 7),
        ("k5", 5),
        ("k4", 4),
        ("k3", 3),
    ]
    long = "k" * 255 + "é"
    await store.commit(ActorCommit("a2", key_put=[key(long, at=10)]))
    assert await store.load_idempotency_keys("a2", 10, 1) == [(long, 10)]
    assert await store.delete_actor("a1")
    assert await store.load_idempotency_keys("a1", 0, 10) == []


async def test_delete_actor_deletes_its_keys(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(sent("a1", 1, key("k1")))
    assert await store.delete_actor("a1")
    await store.create_actor(record("a1"))
    assert await store.load_idempotency("a1", "k1") is None


async def test_keys_survive_reopening(store_factory: StoreFactory, tmp_path: Path) -> None:
    first = store_factory(tmp_path)
    if isinstance(first, MemoryStore):
        pytest.skip("a new memory store starts empty")
    await first.open()
    try:
        await first.create_actor(record("a1"))
        await first.commit(sent("a1", 1, key("k1")))
    finally:
        await first.close()
    second = store_factory(tmp_path)
    await second.open()
    try:
        assert await second.load_idempotency("a1", "k1") == key("k1")
    finally:
        await second.close()

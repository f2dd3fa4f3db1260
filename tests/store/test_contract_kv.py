"""An actor's KV space in the store contract, on every backend (store/kv.py): records
are written by the commit that carries them, with its other writes or not at all (a
fenced commit writes none); range deletes, then deletes, then puts; ``kv_get`` reads a
batch in the order asked; ``kv_list`` gives one range ``[start, end)`` in bytewise key
order, either way, with a limit; records are per actor, go with their actor, survive
reopening, and commits written together keep them apart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.errors import ActorNotFound
from perdure.store import ActorCommit, MemoryStore, Store

from .conftest import StoreFactory
from .test_contract import TIMEOUT, record

# Keys chosen so that bytewise order differs from a naive one: 0x00 and 0xff bytes,
# a prefix of another key, a high byte before a longer key.
KEYS = [b"", b"\x00", b"a", b"a\x00", b"ab", b"a\xff", b"b", b"\xff", b"\xff\xff"]


def puts(*keys: bytes, actor_id: str = "a1") -> ActorCommit:
    return ActorCommit(actor_id, kv_put={key: b"v" + key for key in keys})


async def listed(store: Store, **kwargs: object) -> list[bytes]:
    return [key for key, _ in await store.kv_list("a1", **kwargs)]  # type: ignore[arg-type]


async def test_records_are_written_with_their_commit_and_read_back(store: Store) -> None:
    await store.create_actor(record("a1"))
    assert await store.kv_get("a1", [b"a"]) == [None]
    commit = puts(b"a", b"b")
    commit.state = b"\x01"
    assert not ActorCommit("a1", kv_delete={b"x"}).is_empty()
    await store.commit(commit)
    assert await store.kv_get("a1", [b"b", b"missing", b"a", b"b"]) == [b"vb", None, b"va", b"vb"]
    assert (await store.get_actor("a1")).state == b"\x01"  # type: ignore[union-attr]
    assert await store.kv_get("a1", []) == []
    assert await store.kv_get("nobody", [b"a"]) == [None]


async def test_list_is_bytewise_ordered_either_way_with_a_limit(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(puts(*reversed(KEYS)))
    assert await listed(store) == KEYS
    assert await listed(store, reverse=True) == KEYS[::-1]
    assert await listed(store, limit=3) == KEYS[:3]
    assert await listed(store, reverse=True, limit=3) == KEYS[::-1][:3]
    assert await listed(store, limit=0) == []
    assert await listed(store, limit=-1) == []
    assert await listed(store, limit=100) == KEYS
    # [start, end): start included, end excluded.
    assert await listed(store, start=b"a", end=b"b") == [b"a", b"a\x00", b"ab", b"a\xff"]
    assert await listed(store, start=b"a", end=b"b", reverse=True, limit=2) == [b"a\xff", b"ab"]
    assert await listed(store, start=b"a\x00") == KEYS[3:]
    assert await listed(store, start=b"b", end=b"b") == []
    assert await listed(store, start=b"c", end=b"a") == []
    values = await store.kv_list("a1", start=b"a\xff", end=b"b\x00")
    assert values == [(b"a\xff", b"va\xff"), (b"b", b"vb")]
    assert await store.kv_list("nobody") == []


async def test_deletes_and_ranges_apply_before_puts(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(puts(*KEYS))
    await store.commit(ActorCommit("a1", kv_delete={b"a", b"never"}))
    assert await store.kv_get("a1", [b"a", b"ab"]) == [None, b"vab"]
    # A range [a\x00, b) and everything from \xff on; the commit puts a\xff again.
    commit = ActorCommit(
        "a1",
        kv_delete_range=[(b"a\x00", b"b"), (b"\xff", None)],
        kv_delete={b"b"},
        kv_put={b"a\xff": b"new", b"b": b"kept"},
    )
    await store.commit(commit)
    assert await store.kv_list("a1") == [
        (b"", b"v"),
        (b"\x00", b"v\x00"),
        (b"a\xff", b"new"),
        (b"b", b"kept"),
    ]
    # A put overwrites.
    await store.commit(ActorCommit("a1", kv_put={b"": b"again"}))
    assert await store.kv_get("a1", [b""]) == [b"again"]


async def test_a_fenced_commit_writes_no_record(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(puts(b"old"))
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    stale = ActorCommit(
        "a1",
        fence=claimed.generation - 1,
        state=b"\x02",
        kv_put={b"new": b"x"},
        kv_delete={b"old"},
        kv_delete_range=[(b"", None)],
    )
    with pytest.raises(ActorNotFound):
        await store.commit(stale)
    assert await store.kv_list("a1") == [(b"old", b"vold")]
    with pytest.raises(ActorNotFound):
        await store.commit(puts(b"k", actor_id="missing"))
    assert await store.kv_get("missing", [b"k"]) == [None]
    # The current generation writes.
    fenced = puts(b"new")
    fenced.fence = claimed.generation
    await store.commit(fenced)
    assert await store.kv_get("a1", [b"new"]) == [b"vnew"]


async def test_records_are_per_actor(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2", name="other"))
    await store.commit(ActorCommit("a1", kv_put={b"k": b"one"}))
    await store.commit(ActorCommit("a2", kv_put={b"k": b"two", b"l": b"x"}))
    await store.commit(ActorCommit("a1", kv_delete_range=[(b"", None)]))
    assert await store.kv_get("a1", [b"k"]) == [None]
    assert await store.kv_list("a2") == [(b"k", b"two"), (b"l", b"x")]


async def test_records_of_commits_written_together(store: Store) -> None:
    # Commits of distinct actors submitted together, one to a missing actor: it alone
    # fails, and writes nothing; an actor's two commits apply in submission order.
    ids = [f"a{index}" for index in range(4)]
    for actor_id in ids[:3]:
        await store.create_actor(record(actor_id))
    commits = [puts(b"k", b"l", actor_id=actor_id) for actor_id in ids]
    commits[1].state = b"s"
    commits.append(ActorCommit("a0", kv_delete={b"k"}, kv_put={b"l": b"second"}))
    results = await asyncio.wait_for(
        asyncio.gather(*(store.commit(c) for c in commits), return_exceptions=True), TIMEOUT
    )
    assert [isinstance(r, ActorNotFound) for r in results] == [False, False, False, True, False]
    assert await store.kv_list("a0") == [(b"l", b"second")]
    for actor_id in ids[1:3]:
        assert await store.kv_list(actor_id) == [(b"k", b"vk"), (b"l", b"vl")]
    assert await store.kv_list("a3") == []


async def test_large_keys_and_values_and_many_records(store: Store) -> None:
    await store.create_actor(record("a1"))
    long_key = bytes(range(256)) * 8
    big = bytes(range(256)) * 4096  # 1 MiB
    many = {index.to_bytes(4, "big"): b"%d" % index for index in range(2_000)}
    await store.commit(ActorCommit("a1", kv_put={long_key: big, **many}))
    assert await store.kv_get("a1", [long_key]) == [big]
    keys = list(many)
    assert await store.kv_get("a1", keys) == list(many.values())
    assert await listed(store, start=keys[10], end=keys[20]) == keys[10:20]
    assert await listed(store, end=keys[-1], reverse=True, limit=2) == [keys[-2], keys[-3]]


async def test_delete_actor_deletes_its_records(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(puts(b"k"))
    assert await store.delete_actor("a1")
    await store.create_actor(record("a1"))
    assert await store.kv_list("a1") == []


async def test_records_survive_reopening(store_factory: StoreFactory, tmp_path: Path) -> None:
    first = store_factory(tmp_path)
    if isinstance(first, MemoryStore):
        pytest.skip("a new memory store starts empty")
    await first.open()
    try:
        await first.create_actor(record("a1"))
        await first.commit(puts(b"k", b"\xff"))
    finally:
        await first.close()
    second = store_factory(tmp_path)
    await second.open()
    try:
        assert await second.kv_list("a1") == [(b"k", b"vk"), (b"\xff", b"v\xff")]
    finally:
        await second.close()

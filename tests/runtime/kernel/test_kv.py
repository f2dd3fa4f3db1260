"""The KV space of a live actor by itself (runtime/kernel/kv.py, store/kv.py): reads see
staged writes, and writes whose commit is still in flight, until that commit is durable;
a commit that lands forgets only the writes it carried (a later write of the same key
stays); and the overlay's merge agrees with a plain model for any mix of puts, deletes,
range deletes and list ranges, limits and directions (hypothesis)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from perdure.runtime.kernel.kv import ActorKv
from perdure.store import MemoryStore
from perdure.store.base import ActorCommit, ActorRecord
from perdure.store.kv import KvLayer

from .test_commits import Actor, Sink


class Core:
    """What ActorKv uses of the core: the pipeline, the store, the id."""

    def __init__(self, store: MemoryStore, sink: Sink) -> None:
        self.actor_id = "a1"
        self.store = store
        self.commits = Actor().pipeline(sink, fence=None)


async def _land(store: MemoryStore, sink: Sink, index: int) -> None:
    """Apply submitted commit ``index`` to the store, then say it is durable."""
    await store.commit(sink.commits[index])
    sink.futures[index].set_result(None)
    await asyncio.sleep(0)  # the done callbacks


async def _setup() -> tuple[MemoryStore, Sink, ActorKv]:
    store = MemoryStore()
    await store.open()
    await store.create_actor(ActorRecord("a1", "thing", ("k",), 0))
    sink = Sink(settle=False)
    return store, sink, ActorKv(Core(store, sink))  # type: ignore[arg-type]


async def test_writes_in_flight_are_read_until_durable_then_forgotten() -> None:
    store, sink, kv = await _setup()
    kv.put(b"a", b"1")
    kv.put(b"b", b"2")
    assert await kv.get([b"a", b"b", b"c"]) == [b"1", b"2", None]
    kv._core.commits.flush_now()  # type: ignore[attr-defined]
    assert len(sink.commits) == 1
    assert sink.commits[0].kv_put == {b"a": b"1", b"b": b"2"}
    assert await store.kv_get("a1", [b"a"]) == [None]  # not yet in the store
    assert await kv.get([b"a"]) == [b"1"]  # in flight: the overlay answers
    kv.put(b"a", b"3")  # a later write, staged for the next commit
    await _land(store, sink, 0)
    assert kv._overlay.entries.keys() == {b"a"}  # b forgotten; the later a kept
    assert await kv.get([b"a", b"b"]) == [b"3", b"2"]
    kv._core.commits.flush_now()  # type: ignore[attr-defined]
    await _land(store, sink, 1)
    assert not kv._overlay
    assert await kv.scan(b"", None, False, None) == [(b"a", b"3"), (b"b", b"2")]


async def test_a_range_delete_in_flight_hides_stored_records_under_a_limit() -> None:
    store, sink, kv = await _setup()
    await store.commit(ActorCommit("a1", kv_put={bytes([i]): b"v" for i in range(10)}))
    kv.delete_range(bytes([2]), bytes([8]))
    kv.put(bytes([5]), b"new")
    kv._core.commits.flush_now()  # type: ignore[attr-defined]
    rows = await kv.scan(b"", None, False, 4)
    assert rows == [(b"\x00", b"v"), (b"\x01", b"v"), (b"\x05", b"new"), (b"\x08", b"v")]
    assert [k for k, _ in await kv.scan(b"", None, True, 3)] == [b"\x09", b"\x08", b"\x05"]
    await _land(store, sink, 0)
    assert not kv._overlay
    assert [k[0] for k, _ in await kv.scan(b"", None, False, None)] == [0, 1, 5, 8, 9]


class DictKv:
    """A plain model of a RawKv: a dict, sorted on every scan."""

    def __init__(self, records: dict[bytes, bytes]) -> None:
        self.records = dict(records)

    async def get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return [self.records.get(key) for key in keys]

    async def scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> list[tuple[bytes, bytes]]:
        keys = sorted(k for k in self.records if k >= start and (end is None or k < end))
        keys = keys[::-1] if reverse else keys
        keys = keys if limit is None else keys[: max(limit, 0)]
        return [(k, self.records[k]) for k in keys]

    def put(self, key: bytes, value: bytes) -> None:
        self.records[key] = value

    def delete(self, key: bytes) -> None:
        self.records.pop(key, None)

    def delete_range(self, start: bytes, end: bytes | None) -> None:
        for key in [k for k in self.records if k >= start and (end is None or k < end)]:
            del self.records[key]

    def staged_writes(self) -> int:
        return 0


_KEY = st.sampled_from([b"", b"\x00", b"a", b"a\x00", b"ab", b"a\xff", b"b", b"\xff", b"\xff\xff"])
_OP = st.one_of(
    st.tuples(st.just("put"), _KEY, st.binary(max_size=2)),
    st.tuples(st.just("delete"), _KEY, st.none()),
    st.tuples(st.just("range"), _KEY, st.one_of(st.none(), _KEY)),
)


@settings(max_examples=300, deadline=None)
@given(
    base=st.dictionaries(_KEY, st.binary(max_size=2)),
    ops=st.lists(_OP, max_size=12),
    start=_KEY,
    end=st.one_of(st.none(), _KEY),
    reverse=st.booleans(),
    limit=st.one_of(st.none(), st.integers(0, 6)),
)
def test_the_overlay_agrees_with_a_model(
    base: dict[bytes, bytes],
    ops: list[tuple[str, bytes, Any]],
    start: bytes,
    end: bytes | None,
    reverse: bool,
    limit: int | None,
) -> None:
    below, model = DictKv(base), DictKv(base)
    layer = KvLayer(below)  # type: ignore[arg-type]
    for kind, key, extra in ops:
        for target in (layer, model):
            if kind == "put":
                target.put(key, extra)
            elif kind == "delete":
                target.delete(key)
            else:
                target.delete_range(key, extra)

    async def check() -> None:
        keys = list(set(base) | {k for _, k, _ in ops})
        assert await layer.get(keys) == await model.get(keys)
        assert await layer.scan(start, end, reverse, limit) == await model.scan(
            start, end, reverse, limit
        )
        layer.keep()  # and staged below, the net effect is the same
        assert below.records == model.records

    asyncio.run(check())

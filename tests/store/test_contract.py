"""The store contract (perdure.store.base), run against every backend."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from perdure.errors import ActorAlreadyExists, ActorNotFound, InvalidRequest
from perdure.keys import Key
from perdure.store import (
    ActorCommit,
    ActorRecord,
    MemoryStore,
    QueueMessageRecord,
    Store,
    StoreClosed,
)
from perdure.store.encoding import decode_value, encode_value

StoreFactory = Callable[[Path], Store]
TIMEOUT = 10.0
NOW = 1_700_000_000_000


def record(
    actor_id: str, name: str = "counter", key: Key | None = None, **fields: Any
) -> ActorRecord:
    """An actor record whose key defaults to its id."""
    fields.setdefault("created_at", NOW)
    return ActorRecord(
        actor_id=actor_id, name=name, key=(actor_id,) if key is None else key, **fields
    )


def message(message_id: int, body: bytes = b"body", name: str = "jobs") -> QueueMessageRecord:
    return QueueMessageRecord(id=message_id, name=name, body=body, created_at=NOW + message_id)


async def wait(awaitable: Any) -> Any:
    """Every wait in these tests has a timeout."""
    return await asyncio.wait_for(awaitable, TIMEOUT)


# --- create / get / find ----------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [(), ("main",), ("a/b", "c\\d", ""), ("",), ("/",), ("région", "東京")],
)
async def test_create_then_get_and_find(store: Store, key: Key) -> None:
    created = record("a1", key=key, input=b"\x00input", state=b"s", wake_at=NOW, generation=3)
    await store.create_actor(created)
    assert await store.get_actor("a1") == created
    assert await store.find_actor("counter", key) == created


async def test_find_and_get_missing_return_none(store: Store) -> None:
    await store.create_actor(record("a1", key=("k",)))
    assert await store.get_actor("nope") is None
    assert await store.find_actor("counter", ("other",)) is None
    assert await store.find_actor("other-name", ("k",)) is None


async def test_keys_that_serialise_alike_are_distinct(store: Store) -> None:
    keys: list[Key] = [(), ("",), ("/",), ("", ""), ("a", "b"), ("a/b",), ("a\\", "b")]
    for index, key in enumerate(keys):
        await store.create_actor(record(f"a{index}", key=key))
    for index, key in enumerate(keys):
        found = await store.find_actor("counter", key)
        assert found is not None
        assert found.actor_id == f"a{index}"


async def test_defaults_of_a_new_record(store: Store) -> None:
    await store.create_actor(record("a1"))
    got = await store.get_actor("a1")
    assert got == ActorRecord("a1", "counter", ("a1",), NOW)
    assert got.state is None
    assert got.initialized is False
    assert got.queue_next_id == 1


async def test_list_key_is_stored_as_tuple(store: Store) -> None:
    await store.create_actor(record("a1", key=["x", "y"]))  # type: ignore[arg-type]
    got = await store.get_actor("a1")
    assert got is not None
    assert got.key == ("x", "y")
    assert await store.find_actor("counter", ("x", "y")) == got


async def test_duplicate_name_and_key_raises_and_keeps_the_first(store: Store) -> None:
    first = record("a1", key=("k",), state=b"first")
    await store.create_actor(first)
    with pytest.raises(ActorAlreadyExists) as caught:
        await store.create_actor(record("a2", key=("k",), state=b"second"))
    assert caught.value.metadata == {"name": "counter", "key": ["k"]}
    assert await store.get_actor("a1") == first
    assert await store.get_actor("a2") is None
    assert await store.count_actors() == 1


async def test_same_key_under_another_name_is_fine(store: Store) -> None:
    await store.create_actor(record("a1", name="counter", key=("k",)))
    await store.create_actor(record("a2", name="chat", key=("k",)))
    assert (await store.find_actor("chat", ("k",))) == record("a2", name="chat", key=("k",))


async def test_duplicate_actor_id_raises_invalid_request(store: Store) -> None:
    await store.create_actor(record("a1", key=("one",)))
    with pytest.raises(InvalidRequest):
        await store.create_actor(record("a1", key=("two",)))
    assert await store.find_actor("counter", ("two",)) is None


# --- commit -----------------------------------------------------------------------------


async def test_commit_applies_every_field(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(
        ActorCommit(
            "a1",
            state=b"state-1",
            initialized=True,
            generation=7,
            set_wake_at=True,
            wake_at=NOW + 5,
            queue_next_id=4,
            queue_put=[message(1), message(2), message(3)],
            history_put={"step-a": b"A", "loop/~0/step": b"L0"},
        )
    )
    got = await store.get_actor("a1")
    assert got == ActorRecord(
        "a1",
        "counter",
        ("a1",),
        NOW,
        generation=7,
        initialized=True,
        state=b"state-1",
        wake_at=NOW + 5,
        queue_next_id=4,
    )
    assert await store.load_queue("a1") == [message(1), message(2), message(3)]
    assert await store.load_history("a1") == {"step-a": b"A", "loop/~0/step": b"L0"}

    await store.commit(
        ActorCommit(
            "a1",
            state=b"state-2",
            queue_delete=[1, 3],
            queue_put=[message(4)],
            history_put={"step-b": b"B"},
            history_delete=["loop/~0/step"],
        )
    )
    assert await store.load_queue("a1") == [message(2), message(4)]
    assert await store.load_history("a1") == {"step-a": b"A", "step-b": b"B"}


async def test_none_fields_are_left_unchanged(store: Store) -> None:
    await store.create_actor(
        record("a1", state=b"s", initialized=True, generation=2, wake_at=NOW, queue_next_id=9)
    )
    before = await store.get_actor("a1")
    await store.commit(ActorCommit("a1", history_put={"x": b"1"}))
    assert await store.get_actor("a1") == before
    await store.commit(ActorCommit("a1", wake_at=NOW + 100))  # set_wake_at is False
    assert await store.get_actor("a1") == before


async def test_falsy_values_are_written(store: Store) -> None:
    await store.create_actor(record("a1", state=b"s", initialized=True, generation=5))
    await store.commit(ActorCommit("a1", state=b"", initialized=False, generation=0))
    got = await store.get_actor("a1")
    assert got is not None
    assert (got.state, got.initialized, got.generation) == (b"", False, 0)


async def test_empty_commit_checks_the_actor(store: Store) -> None:
    await store.create_actor(record("a1", state=b"s"))
    assert ActorCommit("a1").is_empty()
    await store.commit(ActorCommit("a1"))
    assert (await store.get_actor("a1")) == record("a1", state=b"s")
    with pytest.raises(ActorNotFound):
        await store.commit(ActorCommit("missing"))


async def test_commit_to_missing_actor_writes_nothing(store: Store) -> None:
    with pytest.raises(ActorNotFound):
        await store.commit(
            ActorCommit(
                "ghost",
                state=b"s",
                queue_put=[message(1)],
                history_put={"step": b"x"},
                set_wake_at=True,
                wake_at=NOW,
            )
        )
    assert await store.get_actor("ghost") is None
    assert await store.load_queue("ghost") == []
    assert await store.load_history("ghost") == {}
    assert await store.next_wake_at() is None
    assert await store.count_actors() == 0


async def test_commit_to_deleted_actor_raises(store: Store) -> None:
    await store.create_actor(record("a1"))
    assert await store.delete_actor("a1") is True
    with pytest.raises(ActorNotFound):
        await store.commit(ActorCommit("a1", history_put={"step": b"x"}))
    assert await store.load_history("a1") == {}


async def test_failure_isolation_with_many_writes_in_flight(store: Store) -> None:
    for index in range(20):
        await store.create_actor(record(f"a{index}"))
    await store.create_actor(record("taken", key=("dup",)))
    await store.create_actor(record("doomed"))

    writes: list[Any] = []
    for index in range(20):
        writes.append(store.commit(ActorCommit(f"a{index}", state=b"ok", history_put={"s": b"1"})))
        if index == 5:
            writes.append(store.commit(ActorCommit("ghost", state=b"bad", queue_put=[message(1)])))
            writes.append(store.create_actor(record("dup-2", key=("dup",))))
            writes.append(store.delete_actor("doomed"))
            writes.append(store.commit(ActorCommit("doomed", history_put={"s": b"late"})))
            writes.append(store.create_actor(record("fresh")))
    results = await wait(asyncio.gather(*writes, return_exceptions=True))

    errors = [result for result in results if isinstance(result, BaseException)]
    assert [type(error) for error in errors] == [ActorNotFound, ActorAlreadyExists, ActorNotFound]
    for index in range(20):
        got = await store.get_actor(f"a{index}")
        assert got is not None
        assert got.state == b"ok"
        assert await store.load_history(f"a{index}") == {"s": b"1"}
    assert await store.get_actor("ghost") is None
    assert await store.load_queue("ghost") == []
    assert await store.get_actor("dup-2") is None
    assert await store.get_actor("doomed") is None
    assert await store.load_history("doomed") == {}
    assert await store.get_actor("fresh") == record("fresh")


async def test_commits_to_one_actor_apply_in_call_order(store: Store) -> None:
    await store.create_actor(record("a1"))
    writes = [
        store.commit(
            ActorCommit(
                "a1",
                state=str(index).encode(),
                history_put={"last": str(index).encode()},
                history_delete=[f"h{index - 1}"],
                queue_put=[message(index)],
                queue_delete=[index - 1],
            )
        )
        for index in range(1, 101)
    ]
    await wait(asyncio.gather(*writes))
    got = await store.get_actor("a1")
    assert got is not None
    assert got.state == b"100"
    assert await store.load_history("a1") == {"last": b"100"}
    assert await store.load_queue("a1") == [message(100)]


async def test_claim_counts_a_generation_and_returns_the_record(store: Store) -> None:
    await store.create_actor(record("a1", generation=3))
    await store.commit(ActorCommit("a1", state=b"s"))
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    assert (claimed.generation, claimed.state) == (4, b"s")
    assert await store.get_actor("a1") == claimed
    assert await store.claim_actor("ghost") is None


async def test_a_commit_fenced_with_an_older_generation_writes_nothing(store: Store) -> None:
    await store.create_actor(record("a1", generation=1))
    await store.commit(ActorCommit("a1", fence=1, state=b"mine", history_put={"h": b"1"}))
    assert await store.claim_actor("a1") is not None  # a newer instance: generation 2
    stale = [
        ActorCommit("a1", fence=1, state=b"late", queue_put=[message(1)]),
        ActorCommit("a1", fence=1, history_put={"h": b"late"}),  # no actor column
        ActorCommit("a1", fence=1, set_wake_at=True, wake_at=5),
    ]
    for commit in stale:
        with pytest.raises(ActorNotFound):
            await store.commit(commit)
    await store.commit(ActorCommit("a1", fence=2, history_put={"h2": b"2"}))
    got = await store.get_actor("a1")
    assert got is not None
    assert (got.state, got.generation, got.wake_at) == (b"mine", 2, None)
    assert await store.load_queue("a1") == []
    assert await store.load_history("a1") == {"h": b"1", "h2": b"2"}


async def test_fenced_commits_in_one_group_fail_alone(store: Store) -> None:
    for actor_id in ("a1", "a2", "a3"):
        await store.create_actor(record(actor_id, generation=7))
    writes = [
        store.commit(ActorCommit("a1", fence=7, state=b"1", history_put={"h": b"1"})),
        store.commit(ActorCommit("a2", fence=6, state=b"2", history_put={"h": b"2"})),
        store.commit(ActorCommit("a3", fence=7, state=b"3", queue_put=[message(1)])),
    ]
    results = await wait(asyncio.gather(*writes, return_exceptions=True))
    assert [type(result) for result in results] == [type(None), ActorNotFound, type(None)]
    states = [getattr(await store.get_actor(a), "state", None) for a in ("a1", "a2", "a3")]
    assert states == [b"1", None, b"3"]
    assert await store.load_history("a2") == {}
    assert await store.load_queue("a3") == [message(1)]


async def test_interleaved_commits_of_several_actors_in_one_group(store: Store) -> None:
    # Submitted together, so a grouping backend writes them in one transaction: each
    # actor's commits must still apply in order although they set different columns, and
    # a commit that sets no column of a missing actor must fail alone.
    for actor_id in ("a1", "a2"):
        await store.create_actor(record(actor_id))
    writes = [
        store.commit(ActorCommit("a1", state=b"1", queue_next_id=2, queue_put=[message(1)])),
        store.commit(ActorCommit("a2", state=b"1", history_put={"h": b"1"})),
        store.commit(ActorCommit("ghost", history_put={"h": b"x"})),
        store.commit(ActorCommit("a1", state=b"2", queue_delete=[1], history_put={"h": b"2"})),
        store.commit(ActorCommit("a2", set_wake_at=True, wake_at=5, history_delete=["h"])),
        store.commit(ActorCommit("a1", history_put={"h": b"3"})),
    ]
    results = await wait(asyncio.gather(*writes, return_exceptions=True))
    assert [type(result) for result in results] == [
        type(None),
        type(None),
        ActorNotFound,
        type(None),
        type(None),
        type(None),
    ]
    first, second = await store.get_actor("a1"), await store.get_actor("a2")
    assert first is not None
    assert second is not None
    assert (first.state, first.queue_next_id, first.wake_at) == (b"2", 2, None)
    assert (second.state, second.wake_at) == (b"1", 5)
    assert await store.load_queue("a1") == []
    assert await store.load_history("a1") == {"h": b"3"}
    assert await store.load_history("a2") == {}
    assert await store.load_history("ghost") == {}


async def test_many_concurrent_commits_lose_nothing(store: Store) -> None:
    actors, steps = 24, 40
    for index in range(actors):
        await store.create_actor(record(f"a{index}"))

    async def run(actor_id: str) -> None:
        for step in range(steps):
            await store.commit(
                ActorCommit(
                    actor_id,
                    state=encode_value({"step": step}),
                    history_put={f"loop/~{step}/step": encode_value(step)},
                    queue_put=[message(step + 1)],
                    queue_next_id=step + 2,
                )
            )

    await wait(asyncio.gather(*(run(f"a{index}") for index in range(actors))))
    for index in range(actors):
        actor_id = f"a{index}"
        got = await store.get_actor(actor_id)
        assert got is not None
        assert got.state is not None
        assert decode_value(got.state) == {"step": steps - 1}
        assert got.queue_next_id == steps + 1
        history = await store.load_history(actor_id)
        assert {decode_value(entry) for entry in history.values()} == set(range(steps))
        assert [m.id for m in await store.load_queue(actor_id)] == list(range(1, steps + 1))


# --- queue and history ------------------------------------------------------------------


async def test_queue_is_ordered_by_id_and_put_overwrites(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", queue_put=[message(10), message(2), message(7)]))
    await store.commit(ActorCommit("a1", queue_put=[message(1), message(7, body=b"new")]))
    queue = await store.load_queue("a1")
    assert [m.id for m in queue] == [1, 2, 7, 10]
    assert queue[2] == message(7, body=b"new")
    await store.commit(ActorCommit("a1", queue_delete=[2, 999]))
    assert [m.id for m in await store.load_queue("a1")] == [1, 7, 10]


async def test_queues_and_histories_are_per_actor(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2"))
    await store.commit(ActorCommit("a1", queue_put=[message(1)], history_put={"s": b"1"}))
    await store.commit(ActorCommit("a2", queue_put=[message(1, b"two")], history_put={"s": b"2"}))
    assert await store.load_queue("a1") == [message(1)]
    assert await store.load_queue("a2") == [message(1, b"two")]
    assert await store.load_history("a1") == {"s": b"1"}
    assert await store.load_history("a2") == {"s": b"2"}


async def test_history_put_overwrites_and_delete_of_missing_is_a_noop(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", history_put={"a": b"1", "b": b"2"}))
    await store.commit(ActorCommit("a1", history_put={"a": b"one"}, history_delete=["zzz"]))
    assert await store.load_history("a1") == {"a": b"one", "b": b"2"}
    await store.commit(ActorCommit("a1", history_delete=["a", "b"]))
    assert await store.load_history("a1") == {}


async def test_returned_data_is_a_copy(store: Store) -> None:
    await store.create_actor(record("a1"))
    history = {"a": b"1"}
    queue = [message(1)]
    commit = ActorCommit("a1", history_put=history, queue_put=queue)
    await store.commit(commit)
    history["b"] = b"2"
    queue.append(message(2))
    loaded = await store.load_history("a1")
    loaded["c"] = b"3"
    (await store.load_queue("a1")).clear()
    assert await store.load_history("a1") == {"a": b"1"}
    assert await store.load_queue("a1") == [message(1)]


# --- delete -----------------------------------------------------------------------------


async def test_delete_actor_removes_everything(store: Store) -> None:
    await store.create_actor(record("a1", key=("k",), wake_at=NOW))
    await store.create_actor(record("a2"))
    await store.commit(ActorCommit("a1", queue_put=[message(1)], history_put={"s": b"x"}))
    await store.commit(ActorCommit("a2", queue_put=[message(1)], history_put={"s": b"y"}))

    assert await store.delete_actor("a1") is True
    assert await store.delete_actor("a1") is False
    assert await store.delete_actor("never") is False
    assert await store.get_actor("a1") is None
    assert await store.find_actor("counter", ("k",)) is None
    assert await store.load_queue("a1") == []
    assert await store.load_history("a1") == {}
    assert await store.due_actors(NOW, 10) == []
    assert await store.count_actors() == 1
    assert await store.load_history("a2") == {"s": b"y"}

    # The name and key are free again, and the new actor starts empty.
    await store.create_actor(record("a1", key=("k",)))
    assert await store.load_queue("a1") == []
    assert await store.load_history("a1") == {}


# --- list and count ---------------------------------------------------------------------


async def test_list_and_count_with_filter_and_pagination(store: Store) -> None:
    for index in range(7):
        await store.create_actor(record(f"c{index}", name="counter"))
    for index in range(3):
        await store.create_actor(record(f"b{index}", name="chat"))

    assert await store.count_actors() == 10
    assert await store.count_actors(name="counter") == 7
    assert await store.count_actors(name="chat") == 3
    assert await store.count_actors(name="none") == 0

    everything = [r.actor_id for r in await store.list_actors()]
    assert everything == ["b0", "b1", "b2", "c0", "c1", "c2", "c3", "c4", "c5", "c6"]

    pages: list[list[str]] = []
    after: str | None = None
    while True:
        page = await store.list_actors(name="counter", after=after, limit=3)
        if not page:
            break
        pages.append([r.actor_id for r in page])
        after = page[-1].actor_id
    assert pages == [["c0", "c1", "c2"], ["c3", "c4", "c5"], ["c6"]]
    assert [r.actor_id for r in await store.list_actors(after="b2", limit=2)] == ["c0", "c1"]
    assert await store.list_actors(limit=0) == []
    assert (await store.list_actors(name="chat"))[0] == record("b0", name="chat")


# --- alarms -----------------------------------------------------------------------------


async def test_due_actors_ordering_limit_and_until(store: Store) -> None:
    alarms = {"a": NOW + 30, "b": NOW + 10, "c": NOW + 20, "d": NOW + 10, "e": None}
    for actor_id, wake_at in alarms.items():
        await store.create_actor(record(actor_id, wake_at=wake_at))

    assert await store.due_actors(NOW + 100, 10) == [
        ("b", NOW + 10),
        ("d", NOW + 10),
        ("c", NOW + 20),
        ("a", NOW + 30),
    ]
    assert await store.due_actors(NOW + 20, 10) == [
        ("b", NOW + 10),
        ("d", NOW + 10),
        ("c", NOW + 20),
    ]
    assert await store.due_actors(NOW + 100, 2) == [("b", NOW + 10), ("d", NOW + 10)]
    assert await store.due_actors(NOW + 9, 10) == []
    assert await store.due_actors(NOW + 100, 0) == []


async def test_next_wake_at_and_clearing_an_alarm(store: Store) -> None:
    assert await store.next_wake_at() is None
    await store.create_actor(record("a"))
    assert await store.next_wake_at() is None
    await store.create_actor(record("b", wake_at=NOW + 50))
    await store.commit(ActorCommit("a", set_wake_at=True, wake_at=NOW + 20))
    assert await store.next_wake_at() == NOW + 20

    await store.commit(ActorCommit("a", set_wake_at=True, wake_at=None))
    got = await store.get_actor("a")
    assert got is not None
    assert got.wake_at is None
    assert await store.next_wake_at() == NOW + 50
    assert await store.due_actors(NOW + 100, 10) == [("b", NOW + 50)]

    await store.commit(ActorCommit("b", set_wake_at=True))
    assert await store.next_wake_at() is None
    assert await store.due_actors(NOW + 100, 10) == []


# --- values -----------------------------------------------------------------------------

_TRICKY_VALUES: dict[str, Any] = {
    "big": 2**64 + 1,
    "bigger": -(2**200),
    "bytes": b"\x00\xff\x10",
    "when": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC),
    "offset": dt.datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))
    ),
    "day": dt.date(2024, 2, 29),
    "money": Decimal("10.10"),
    "nested": {"list": [1, [2, {"deep": [None, True, 1.5]}]], "empty": {}, "tags": {"x", "y"}},
    "text": "héllo \u0000 world",
    "int_keys": {1: "one", 2: "two"},
}


async def test_values_round_trip_exactly(store: Store) -> None:
    value = encode_value(_TRICKY_VALUES, what="state")
    await store.create_actor(record("a1", input=encode_value(_TRICKY_VALUES["nested"])))
    await store.commit(
        ActorCommit(
            "a1",
            state=value,
            queue_put=[message(1, body=encode_value(_TRICKY_VALUES["big"]))],
            history_put={"step": encode_value(_TRICKY_VALUES)},
        )
    )
    got = await store.get_actor("a1")
    assert got is not None
    assert got.state is not None
    assert got.input is not None
    decoded = decode_value(got.state)
    assert decoded == _TRICKY_VALUES
    assert decoded["offset"].utcoffset() == dt.timedelta(hours=5, minutes=30)
    assert type(decoded["bytes"]) is bytes
    assert decode_value(got.input) == _TRICKY_VALUES["nested"]
    assert decode_value((await store.load_queue("a1"))[0].body) == 2**64 + 1
    assert decode_value((await store.load_history("a1"))["step"]) == _TRICKY_VALUES


async def test_large_values(store: Store) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", state=big, history_put={"s": big}))
    got = await store.get_actor("a1")
    assert got is not None
    assert got.state == big
    assert (await store.load_history("a1"))["s"] == big


async def test_large_integers_in_actor_fields(store: Store) -> None:
    """Times, generations and ids are 64-bit signed integers in every backend."""
    await store.create_actor(record("a1", created_at=2**62, wake_at=2**63 - 1))
    await store.commit(ActorCommit("a1", generation=2**63 - 1, queue_next_id=2**62))
    got = await store.get_actor("a1")
    assert got is not None
    assert (got.created_at, got.wake_at, got.generation) == (2**62, 2**63 - 1, 2**63 - 1)


# --- lifecycle --------------------------------------------------------------------------


async def test_data_survives_close_and_reopen(store_factory: StoreFactory, tmp_path: Path) -> None:
    first = store_factory(tmp_path)
    if isinstance(first, MemoryStore):
        pytest.skip("the memory store keeps nothing once closed")
    await wait(first.open())
    try:
        await wait(first.create_actor(record("a1", wake_at=5)))
        await wait(
            first.commit(
                ActorCommit("a1", state=b"kept", queue_put=[message(1)], history_put={"step": b"h"})
            )
        )
    finally:
        await wait(first.close())
    second = store_factory(tmp_path)
    await wait(second.open())
    try:
        assert await second.get_actor("a1") == record("a1", wake_at=5, state=b"kept")
        assert await second.load_queue("a1") == [message(1)]
        assert await second.load_history("a1") == {"step": b"h"}
        assert await second.next_wake_at() == 5
    finally:
        await wait(second.close())


async def test_a_cancelled_commit_is_still_applied(store: Store) -> None:
    await wait(store.create_actor(record("a1")))
    task = asyncio.ensure_future(store.commit(ActorCommit("a1", state=b"cancelled")))
    await asyncio.sleep(0)  # submitted: the caller gives up, the write goes on
    task.cancel()
    await wait(store.commit(ActorCommit("a1", history_put={"after": b"x"})))
    got = await store.get_actor("a1")
    assert got is not None
    assert got.state == b"cancelled"


async def test_open_and_close_are_idempotent(store_factory: StoreFactory, tmp_path: Path) -> None:
    instance = store_factory(tmp_path)
    await instance.open()
    await instance.open()
    await instance.create_actor(record("a1"))
    await instance.close()
    await instance.close()


async def test_a_closed_store_refuses_use(store_factory: StoreFactory, tmp_path: Path) -> None:
    instance = store_factory(tmp_path)
    with pytest.raises(StoreClosed):
        await instance.get_actor("a1")
    await instance.open()
    await instance.close()
    with pytest.raises(StoreClosed):
        await instance.get_actor("a1")
    with pytest.raises(StoreClosed):
        await instance.create_actor(record("a1"))
    with pytest.raises(StoreClosed):
        await instance.commit(ActorCommit("a1", state=b"x"))
    with pytest.raises(StoreClosed):
        await instance.due_actors(NOW, 1)


async def test_close_finishes_accepted_writes(store_factory: StoreFactory, tmp_path: Path) -> None:
    instance = store_factory(tmp_path)
    await instance.open()
    await instance.create_actor(record("a1"))
    pending = [
        asyncio.ensure_future(instance.commit(ActorCommit("a1", history_put={f"s{i}": b"x"})))
        for i in range(50)
    ]
    await asyncio.sleep(0)  # let every commit be submitted
    await wait(instance.close())
    await wait(asyncio.gather(*pending))
    await instance.open()
    try:
        assert len(await instance.load_history("a1")) == 50
    finally:
        await instance.close()

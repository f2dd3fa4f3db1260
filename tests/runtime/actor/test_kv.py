"""``c.kv`` in process (docs/storage.md): get, put, delete and their batch forms, list by
prefix and by range (ascending and descending, with a limit), str and bytes keys kept
apart, any stored value round-tripping; reads see the actor's own writes before they
are durable (listing merges them with the store's records, limits included); writes are
durable with the action's commit and not before; the bounds refuse with kv.* codes;
the records survive a restart. On the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from perdure import ActionContext, actor, setup
from perdure.errors import PerdureError
from perdure.store import SQLiteStore
from perdure.store.kv import MAX_KEY_SIZE, MAX_VALUE_SIZE, MAX_WRITES, encode_key
from perdure.testing import ActorTestEnv
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

GATE: dict[str, asyncio.Event] = {}


async def put(c: ActionContext, key: Any, value: Any) -> None:
    await c.kv.put(key, value)


async def get(c: ActionContext, key: Any) -> Any:
    return await c.kv.get(key)


async def put_many(c: ActionContext, entries: dict[str, Any], field: str | None = None) -> None:
    c.kv.put_batch(entries)
    if field is not None:
        c.state[field] = len(entries)
    if "gate" in GATE:
        await GATE["gate"].wait()  # the writes are staged, not yet durable


async def listing(
    c: ActionContext, prefix: Any = "", options: dict[str, Any] | None = None
) -> list[list[Any]]:
    return [[k, v] for k, v in await c.kv.list(prefix, **(options or {}))]


async def ranging(
    c: ActionContext, start: Any, end: Any, options: dict[str, Any] | None = None
) -> list[list[Any]]:
    return [[k, v] for k, v in await c.kv.list_range(start, end, **(options or {}))]


async def unflushed(c: ActionContext) -> dict[str, Any]:
    """Reads inside one action, of writes not yet durable, merged with stored ones."""
    c.kv.delete("k03")
    c.kv.delete_batch(["k05", "missing"])
    c.kv.put("k04", "new")
    c.kv.put("k10x", "added")
    c.kv.delete_range("k07", "k09")
    c.kv.put("k08", "back")
    keys = ["k03", "k04", "k05", "k07", "k08", "k09"]
    return {
        "batch": await c.kv.get_batch(keys),
        "first4": [k for k, _ in await c.kv.list("k", limit=4)],
        "last3": [k for k, _ in await c.kv.list("k", reverse=True, limit=3)],
        "all": [k for k, _ in await c.kv.list("k")],
        "range": [k for k, _ in await c.kv.list_range("k02", "k09", limit=5)],
    }


async def attempt(c: ActionContext, what: str) -> None:
    if what == "long_key":
        c.kv.put("k" * (MAX_KEY_SIZE + 1), 1)
    elif what == "big_value":
        c.kv.put("k", b"x" * MAX_VALUE_SIZE)
    elif what == "too_many":
        c.kv.put_batch({f"k{i}": i for i in range(MAX_WRITES + 1)})
    elif what == "bad_range":
        await c.kv.list_range("a", b"b")
    elif what == "bad_key":
        c.kv.put(3, 1)  # type: ignore[arg-type]
    elif what == "bad_value":
        c.kv.put("k", object())


def state(c: ActionContext) -> Any:
    return c.state


store = actor(
    state={},
    actions={
        "put": put,
        "get": get,
        "putMany": put_many,
        "list": listing,
        "range": ranging,
        "unflushed": unflushed,
        "attempt": attempt,
        "state": state,
    },
)
registry = setup(use={"kvs": store})


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    GATE.clear()
    if request.param != "postgres":
        async with ActorTestEnv(registry, store=request.param) as test_env:
            yield test_env
        return
    require_postgres()
    schema = new_schema_name()
    try:
        async with ActorTestEnv(registry, store=postgres_store(schema)) as test_env:
            yield test_env
    finally:
        drop_schema(schema)


async def test_get_put_delete_and_values_round_trip(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    assert await kvs.get("missing") is None
    values: list[Any] = [
        "text",
        2**70,
        -1.5,
        b"\x00\xff",
        {"nested": [1, {"b": None}]},
        True,
        Decimal("1.10"),
        dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC),
    ]
    for index, value in enumerate(values):
        await kvs.put(f"v{index}", value)
    for index, value in enumerate(values):
        assert await kvs.get(f"v{index}") == value
    await kvs.put("v0", "overwritten")
    assert await kvs.get("v0") == "overwritten"


async def test_str_and_bytes_keys_are_apart(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    await kvs.put("a", "str")
    await kvs.put(b"a", "bytes")
    await kvs.put(b"\xff", "high")
    assert await kvs.get("a") == "str"
    assert await kvs.get(b"a") == "bytes"
    assert await kvs.list("") == [["a", "str"]]  # a str prefix lists str keys
    assert await kvs.list(b"") == [[b"a", "bytes"], [b"\xff", "high"]]


async def test_list_by_prefix_and_range_either_way_with_a_limit(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    await kvs.putMany({"user:2": 2, "user:10": 10, "user:1": 1, "users": 0, "user;": 9, "b": 0})
    keys = [k for k, _ in await kvs.list("user:")]
    assert keys == ["user:1", "user:10", "user:2"]  # bytewise, not numeric
    assert await kvs.list("user:", {"reverse": True}) == [
        ["user:2", 2],
        ["user:10", 10],
        ["user:1", 1],
    ]
    assert await kvs.list("user:", {"limit": 2}) == [["user:1", 1], ["user:10", 10]]
    assert await kvs.list("user:", {"reverse": True, "limit": 1}) == [["user:2", 2]]
    assert await kvs.list("user:", {"limit": 0}) == []
    assert [k for k, _ in await kvs.list("")] == [
        "b",
        "user:1",
        "user:10",
        "user:2",
        "user;",
        "users",
    ]
    assert [k for k, _ in await kvs.range("user:1", "user:2")] == ["user:1", "user:10"]
    assert [k for k, _ in await kvs.range("a", "user;", {"reverse": True, "limit": 2})] == [
        "user:2",
        "user:10",
    ]
    assert await kvs.range("z", "a") == []


async def test_reads_see_writes_not_yet_durable(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    await kvs.putMany({f"k{i:02}": i for i in range(10)})
    seen = await kvs.unflushed()
    assert seen == {
        "batch": [None, "new", None, None, "back", 9],
        "first4": ["k00", "k01", "k02", "k04"],
        "last3": ["k10x", "k09", "k08"],
        "all": ["k00", "k01", "k02", "k04", "k06", "k08", "k09", "k10x"],
        "range": ["k02", "k04", "k06", "k08"],
    }
    # And once durable, the store alone holds the same.
    rows = await env.store.kv_list(await kvs.resolve(), start=encode_key("k"))
    assert [k for k, _ in rows] == [encode_key(k) for k in seen["all"]]


async def test_writes_are_durable_with_the_commit_and_not_before(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    actor_id = await kvs.resolve()
    GATE["gate"] = asyncio.Event()
    call = asyncio.ensure_future(kvs.putMany({"x": 1, "y": 2}, "count"))
    await asyncio.sleep(0.05)
    stored = [encode_key("x"), encode_key("y")]
    assert await env.store.kv_get(actor_id, stored) == [None, None]
    GATE["gate"].set()
    await call
    assert await env.store.kv_get(actor_id, stored) == [b"\x01", b"\x02"]
    assert await kvs.state() == {"count": 2}


@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("long_key", "key_too_large"),
        ("big_value", "value_too_large"),
        ("too_many", "too_many_writes"),
        ("bad_range", "invalid_range"),
        ("bad_key", "key_invalid"),
    ],
)
async def test_bounds_refuse_with_codes(env: ActorTestEnv, what: str, code: str) -> None:
    kvs = env.client.kvs.get_or_create("a")
    with pytest.raises(PerdureError) as raised:
        await kvs.attempt(what)
    assert (raised.value.group, raised.value.code) == ("kv", code)
    assert await kvs.list("") == []  # nothing of a refused batch was staged


async def test_a_value_that_cannot_be_stored_is_refused(env: ActorTestEnv) -> None:
    kvs = env.client.kvs.get_or_create("a")
    with pytest.raises(PerdureError) as raised:
        await kvs.attempt("bad_value")
    assert raised.value.identifier == "state.not_serializable"


async def test_records_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    for round_ in range(2):
        async with ActorTestEnv(registry, store=SQLiteStore(path)) as env:
            kvs = env.client.kvs.get_or_create("a")
            if round_ == 0:
                await kvs.putMany({"a": 1, "b": [2]})
            else:
                assert await kvs.list("") == [["a", 1], ["b", [2]]]

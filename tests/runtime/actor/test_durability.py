"""State survives restarts, and an action's effect is on disk before its result returns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import actor, setup
from perdure.errors import ActorAborted
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from perdure.store import SQLiteStore
from perdure.store.encoding import decode_value
from tests.support.runtimes import WAIT, RuntimeFactory, read_state_from_disk, stored_state

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)


def _registry() -> Registry:
    def increment(c: ActionContext, by: int = 1) -> int:
        c.state["n"] += by
        return int(c.state["n"])

    def remember(c: ActionContext, value: Any) -> None:
        c.state["values"].append(value)

    def get(c: ActionContext) -> dict[str, Any]:
        return dict(c.state)

    return setup(
        use={
            "counter": actor(
                state={"n": 0, "values": []},
                actions={"increment": increment, "remember": remember, "get": get},
            )
        }
    )


async def test_state_survives_closing_and_reopening_the_store(
    make_runtime: RuntimeFactory,
) -> None:
    registry = _registry()
    runtime = await make_runtime(registry)
    client = runtime.client()
    values: list[Any] = [2**70, -(2**64), b"\x00\xff", {"nested": [1, {"deep": None}]}, 1.5]
    for value in values:
        await client.counter.get_or_create("a").remember(value)
    for _ in range(3):
        await client.counter.get_or_create("a").increment()
    await client.counter.get_or_create(["b", "c"]).increment(10)
    actor_id = await client.counter.get("a").resolve()
    await runtime.stop()

    # A new runtime on a new store object over the same database (same file for SQLite).
    reopened = await make_runtime(registry)
    client = reopened.client()
    assert reopened.live_count == 0
    again = client.counter.get("a")
    assert await again.resolve() == actor_id
    assert await again.get() == {"n": 3, "values": values}
    assert (await client.counter.get(["b", "c"]).get())["n"] == 10


async def test_effect_is_on_disk_before_the_result_returns(
    make_sqlite_runtime: RuntimeFactory,
) -> None:
    runtime = await make_sqlite_runtime(_registry())
    path = make_sqlite_runtime.stores.path
    handle = runtime.client().counter.get_or_create("a")
    actor_id = await handle.resolve()
    # Seen through a separate sqlite3 connection, with the runtime still running: the
    # runtime's own caches cannot be what answers.
    for expected in range(1, 21):
        assert await handle.increment() == expected
        assert read_state_from_disk(path, actor_id)["n"] == expected

    # Concurrent callers share group commits; each one still returns only after its
    # increment is on disk, so the disk never lags behind what a caller was told.
    async def increment_and_check() -> None:
        told = await handle.increment()
        assert read_state_from_disk(path, actor_id)["n"] >= told

    await asyncio.gather(*(increment_and_check() for _ in range(50)))
    assert read_state_from_disk(path, actor_id)["n"] == 70


async def test_a_second_store_on_the_same_file_sees_committed_state(
    make_sqlite_runtime: RuntimeFactory,
) -> None:
    runtime = await make_sqlite_runtime(_registry())
    handle = runtime.client().counter.get_or_create("a")
    await handle.increment(41)
    reader = SQLiteStore(make_sqlite_runtime.stores.path)
    await reader.open()
    try:
        await handle.increment()
        record = await reader.find_actor("counter", ("a",))
        assert record is not None
        assert (await stored_state(runtime, record.actor_id))["n"] == 42
        assert record.state is not None
        assert decode_value(record.state)["n"] == 42
    finally:
        await reader.close()


async def test_an_action_that_outlives_the_grace_period_cannot_overwrite_newer_state(
    make_runtime: RuntimeFactory,
) -> None:
    """After sleep, a late action of the old instance must not write over the new one's."""
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow_increment(c: ActionContext) -> None:
        entered.set()
        await gate.wait()
        c.state["n"] += 1  # the old instance's copy of the state

    def put(c: ActionContext, value: int) -> None:
        c.state["n"] = value

    registry = setup(
        use={
            "counter": actor(
                state={"n": 0},
                actions={"slow_increment": slow_increment, "put": put},
                options={"sleep_grace_period": 0.02},
            )
        }
    )
    runtime = await make_runtime(registry)
    handle = runtime.client().counter.get_or_create("a")
    actor_id = await handle.resolve()
    late = asyncio.create_task(handle.slow_increment())
    async with asyncio.timeout(WAIT):
        await entered.wait()
    await runtime.sleep_actor(actor_id)  # waits out the grace period, then stops
    await handle.put(100)  # wakes a new instance, durably sets 100
    gate.set()
    with pytest.raises(ActorAborted):
        async with asyncio.timeout(WAIT):
            await late
    assert (await stored_state(runtime, actor_id))["n"] == 100

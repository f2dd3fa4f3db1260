"""Idle actors hibernate (and leave memory); work and connections keep them awake; destroy."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest

from perdure import ActorNotFound, actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from tests.support.runtimes import WAIT, RuntimeFactory, eventually, stored_state

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)

SLEEP_TIMEOUT = 0.05
# Long enough that an actor that should have slept would have: several sleep timeouts.
LONGER_THAN_SLEEP = SLEEP_TIMEOUT * 4


def _registry(
    calls: list[str], gate: asyncio.Event | None = None, sleep_timeout: float = SLEEP_TIMEOUT
) -> Registry:
    def create_state(c: ActorContext, input: Any) -> dict[str, Any]:
        calls.append("create_state")
        return {"n": 0}

    def on_sleep(c: ActorContext) -> None:
        calls.append("on_sleep")

    def on_wake(c: ActorContext) -> None:
        calls.append("on_wake")

    def on_destroy(c: ActorContext) -> None:
        calls.append(f"on_destroy n={c.state['n']}")

    def increment(c: ActionContext) -> int:
        c.state["n"] += 1
        return int(c.state["n"])

    def get(c: ActionContext) -> int:
        return int(c.state["n"])

    async def wait_for_gate(c: ActionContext) -> None:
        assert gate is not None
        await gate.wait()

    def hold_awake(c: ActionContext) -> None:
        assert gate is not None
        c.keep_awake(gate.wait())

    def go_to_sleep(c: ActionContext) -> None:
        c.sleep()

    def destroy(c: ActionContext) -> None:
        c.destroy()

    return setup(
        use={
            "counter": actor(
                create_state=create_state,
                on_sleep=on_sleep,
                on_wake=on_wake,
                on_destroy=on_destroy,
                actions={
                    "increment": increment,
                    "get": get,
                    "wait_for_gate": wait_for_gate,
                    "hold_awake": hold_awake,
                    "go_to_sleep": go_to_sleep,
                    "destroy": destroy,
                },
                options={"sleep_timeout": sleep_timeout},
            )
        }
    )


async def test_idle_actor_hibernates_then_wakes_with_its_state(
    make_runtime: RuntimeFactory,
) -> None:
    calls: list[str] = []
    runtime = await make_runtime(_registry(calls))
    handles = [runtime.client().counter.get_or_create(str(i)) for i in range(3)]
    for handle in handles:
        await handle.increment()
        await handle.increment()
    ids = [await handle.resolve() for handle in handles]
    assert runtime.live_count == 3

    await eventually(lambda: runtime.live_count == 0, what="all actors to hibernate")
    assert not any(runtime.is_live(actor_id) for actor_id in ids)
    assert calls.count("on_sleep") == 3
    assert [await stored_state(runtime, actor_id) for actor_id in ids] == [{"n": 2}] * 3

    assert await handles[1].increment() == 3
    assert runtime.is_live(ids[1])
    assert runtime.live_count == 1
    assert calls.count("create_state") == 3
    assert calls.count("on_wake") == 4
    await eventually(lambda: runtime.live_count == 0, what="the woken actor to sleep again")


async def test_hibernated_instance_is_freed(make_runtime: RuntimeFactory) -> None:
    """Sleep frees the instance: nothing the runtime keeps still refers to it."""
    runtime = await make_runtime(_registry([]))
    handle = runtime.client().counter.get_or_create("a")
    await handle.increment()
    instance = weakref.ref(await runtime.instance(await handle.resolve()))
    await eventually(lambda: runtime.live_count == 0, what="hibernation")
    await asyncio.sleep(0)  # let the finished stop task be released
    gc.collect()
    assert instance() is None, gc.get_referrers(instance())


async def test_open_connection_keeps_the_actor_awake(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(_registry([]))
    handle = runtime.client().counter.get_or_create("a")
    actor_id = await handle.resolve()
    conn = await handle.connect()
    await asyncio.sleep(LONGER_THAN_SLEEP)
    assert runtime.is_live(actor_id)
    assert await conn.action("increment") == 1
    await conn.dispose()
    await eventually(lambda: not runtime.is_live(actor_id), what="sleep after disconnect")


async def test_in_flight_action_keeps_the_actor_awake(make_runtime: RuntimeFactory) -> None:
    gate = asyncio.Event()
    runtime = await make_runtime(_registry([], gate))
    handle = runtime.client().counter.get_or_create("a")
    actor_id = await handle.resolve()
    slow = asyncio.create_task(handle.wait_for_gate())
    try:
        await asyncio.sleep(LONGER_THAN_SLEEP)
        assert runtime.is_live(actor_id)
    finally:
        gate.set()
        async with asyncio.timeout(WAIT):
            await slow
    await eventually(lambda: not runtime.is_live(actor_id), what="sleep after the action")


async def test_keep_awake_keeps_the_actor_awake(make_runtime: RuntimeFactory) -> None:
    gate = asyncio.Event()
    calls: list[str] = []
    runtime = await make_runtime(_registry(calls, gate))
    handle = runtime.client().counter.get_or_create("a")
    actor_id = await handle.resolve()
    await handle.hold_awake()  # returns at once; the awaitable goes on in the background
    await asyncio.sleep(LONGER_THAN_SLEEP)
    assert runtime.is_live(actor_id)
    assert "on_sleep" not in calls
    gate.set()
    await eventually(lambda: not runtime.is_live(actor_id), what="sleep after keep_awake")
    assert calls.count("on_sleep") == 1


async def test_sleep_forces_hibernation(make_runtime: RuntimeFactory) -> None:
    calls: list[str] = []
    runtime = await make_runtime(_registry(calls, sleep_timeout=60.0))
    handle = runtime.client().counter.get_or_create("a")
    await handle.increment()
    actor_id = await handle.resolve()
    await handle.go_to_sleep()
    await eventually(lambda: not runtime.is_live(actor_id), what="the forced sleep")
    assert calls == ["create_state", "on_wake", "on_sleep"]
    assert await handle.get() == 1


async def test_destroy_deletes_the_actor(make_runtime: RuntimeFactory) -> None:
    calls: list[str] = []
    runtime = await make_runtime(_registry(calls))
    client = runtime.client()
    handle = client.counter.get_or_create("a")
    await handle.increment()
    actor_id = await handle.resolve()
    await handle.destroy()
    await eventually(lambda: not runtime.is_live(actor_id), what="the destroy")
    assert calls == ["create_state", "on_wake", "on_destroy n=1"]
    assert await runtime.store.get_actor(actor_id) is None
    assert await runtime.store.find_actor("counter", ("a",)) is None

    with pytest.raises(ActorNotFound) as by_id:
        await handle.get()
    assert by_id.value.identifier == "actor.not_found"
    with pytest.raises(ActorNotFound):
        await client.counter.get("a").get()

    fresh = client.counter.get_or_create("a")
    assert await fresh.get() == 0
    assert await fresh.resolve() != actor_id
    assert calls.count("create_state") == 2


async def test_destroying_a_sleeping_actor_wakes_it_for_on_destroy(
    make_runtime: RuntimeFactory,
) -> None:
    calls: list[str] = []
    runtime = await make_runtime(_registry(calls))
    handle = runtime.client().counter.get_or_create("a")
    await handle.increment()
    actor_id = await handle.resolve()
    await eventually(lambda: runtime.live_count == 0, what="hibernation")

    await runtime.destroy_actor(actor_id)
    assert calls[-2:] == ["on_wake", "on_destroy n=1"]
    assert not runtime.is_live(actor_id)
    assert await runtime.store.count_actors() == 0
    with pytest.raises(ActorNotFound):
        await handle.get()

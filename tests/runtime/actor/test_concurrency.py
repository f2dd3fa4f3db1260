"""Many actors, many concurrent actions per actor: no update is lost, before or after restart."""

from __future__ import annotations

import asyncio

import pytest

from perdure import actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from tests.support.runtimes import RuntimeFactory

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)

ACTORS = 50
CALLS_PER_ACTOR = 200


def _registry() -> Registry:
    async def increment(c: ActionContext) -> int:
        # Yield first so that the concurrent calls of one actor really interleave.
        await asyncio.sleep(0)
        c.state["n"] += 1
        return int(c.state["n"])

    def get(c: ActionContext) -> int:
        return int(c.state["n"])

    return setup(
        use={"counter": actor(state={"n": 0}, actions={"increment": increment, "get": get})}
    )


async def test_many_actors_many_concurrent_actions_lose_no_update(
    make_runtime: RuntimeFactory,
) -> None:
    registry = _registry()
    runtime = await make_runtime(registry)
    client = runtime.client()
    handles = [client.counter.get_or_create(f"c{i}") for i in range(ACTORS)]
    results = await asyncio.gather(
        *(handle.increment() for handle in handles for _ in range(CALLS_PER_ACTOR))
    )
    # Every caller saw a distinct count: each actor's results are exactly 1..CALLS.
    for index in range(ACTORS):
        mine = results[index * CALLS_PER_ACTOR : (index + 1) * CALLS_PER_ACTOR]
        assert sorted(mine) == list(range(1, CALLS_PER_ACTOR + 1))
    assert await runtime.store.count_actors(name="counter") == ACTORS
    await runtime.stop()

    reopened = await make_runtime(registry)
    client = reopened.client()
    counts = await asyncio.gather(*(client.counter.get(f"c{i}").get() for i in range(ACTORS)))
    assert counts == [CALLS_PER_ACTOR] * ACTORS


async def test_concurrent_first_calls_on_new_keys_create_each_actor_once(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    client = runtime.client()
    # Fresh handles for every call: each one resolves (get_or_create) on its own.
    await asyncio.gather(
        *(client.counter.get_or_create(f"k{i % 20}").increment() for i in range(400))
    )
    assert await runtime.store.count_actors() == 20
    counts = [await client.counter.get(f"k{i}").get() for i in range(20)]
    assert counts == [20] * 20

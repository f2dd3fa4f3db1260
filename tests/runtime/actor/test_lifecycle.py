"""Hooks fire in the documented order (rivet-behaviour §1.2), recorded and asserted exactly."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from perdure import UserError, actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.connections import Connection
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from tests.support.runtimes import WAIT, RuntimeFactory, eventually, stored_state

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)


class Recorder:
    """Records every hook call of an actor definition, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def registry(self, **extra: Any) -> Registry:
        calls = self.calls

        def create_state(c: ActorContext, input: Any) -> dict[str, Any]:
            calls.append("create_state")
            return {"n": 0, "slept": 0}

        async def on_create(c: ActorContext, input: Any) -> None:
            calls.append("on_create")

        def create_vars(c: ActorContext) -> dict[str, Any]:
            calls.append("create_vars")
            return {}

        async def on_wake(c: ActorContext) -> None:
            calls.append("on_wake")

        async def run(c: ActorContext) -> None:
            calls.append("run")

        async def on_sleep(c: ActorContext) -> None:
            # The abort signal fires before the stop hook runs.
            calls.append(f"on_sleep aborted={c.aborted}")
            c.state["slept"] += 1

        def on_destroy(c: ActorContext) -> None:
            calls.append("on_destroy")

        async def on_before_connect(c: ActorContext, params: Any) -> None:
            calls.append(f"on_before_connect {params['user']}")
            if params["user"] == "mallory":
                raise UserError("Not allowed.", code="forbidden")

        def create_conn_state(c: ActorContext, params: Any) -> dict[str, Any]:
            calls.append("create_conn_state")
            return {"user": params["user"]}

        async def on_connect(c: ActorContext, conn: Connection) -> None:
            # The connection is already listed when on_connect runs.
            calls.append(f"on_connect {conn.state['user']} listed={conn.id in c.conns}")

        async def on_disconnect(c: ActorContext, conn: Connection) -> None:
            calls.append(f"on_disconnect {conn.state['user']}")

        def increment(c: ActionContext) -> int:
            c.state["n"] += 1
            return int(c.state["n"])

        hooks: dict[str, Any] = {
            "create_state": create_state,
            "on_create": on_create,
            "create_vars": create_vars,
            "on_wake": on_wake,
            "run": run,
            "on_sleep": on_sleep,
            "on_destroy": on_destroy,
            "on_before_connect": on_before_connect,
            "create_conn_state": create_conn_state,
            "on_connect": on_connect,
            "on_disconnect": on_disconnect,
        }
        hooks.update(extra)
        return setup(use={"thing": actor(actions={"increment": increment}, **hooks)})


FIRST_START = ["create_state", "on_create", "create_vars", "on_wake", "run"]
WAKE = ["create_vars", "on_wake", "run"]


async def test_create_sleep_wake_order(make_runtime: RuntimeFactory) -> None:
    recorder = Recorder()
    runtime = await make_runtime(recorder.registry())
    handle = runtime.client().thing.get_or_create("a")
    assert await handle.increment() == 1
    actor_id = await handle.resolve()
    await eventually(lambda: "run" in recorder.calls, what="run to start")
    assert recorder.calls == FIRST_START

    await runtime.sleep_actor(actor_id)
    assert recorder.calls == [*FIRST_START, "on_sleep aborted=True"]
    # State changed in on_sleep is part of the final flush.
    assert await stored_state(runtime, actor_id) == {"n": 1, "slept": 1}

    assert await handle.increment() == 2  # wakes it: never create_state/on_create again
    await eventually(lambda: recorder.calls.count("run") == 2, what="run after wake")
    assert recorder.calls == [*FIRST_START, "on_sleep aborted=True", *WAKE]


async def test_connect_and_disconnect_order(make_runtime: RuntimeFactory) -> None:
    recorder = Recorder()
    runtime = await make_runtime(recorder.registry(run=None))
    handle = runtime.client().thing.get_or_create("a")
    await handle.resolve()
    recorder.calls.clear()

    conn = await handle.connect({"user": "ada"})
    assert conn.conn is not None
    assert conn.conn.params == {"user": "ada"}
    assert conn.conn.state == {"user": "ada"}
    assert recorder.calls == [
        "on_before_connect ada",
        "create_conn_state",
        "on_connect ada listed=True",
    ]
    await conn.dispose()
    assert recorder.calls[-1] == "on_disconnect ada"
    assert len(recorder.calls) == 4
    await conn.dispose()  # disposing twice runs on_disconnect once
    assert len(recorder.calls) == 4


async def test_rejecting_in_on_before_connect_refuses_the_connection(
    make_runtime: RuntimeFactory,
) -> None:
    recorder = Recorder()
    runtime = await make_runtime(recorder.registry(run=None))
    handle = runtime.client().thing.get_or_create("a")
    actor_id = await handle.resolve()
    recorder.calls.clear()

    with pytest.raises(UserError) as caught:
        await handle.connect({"user": "mallory"})
    assert caught.value.code == "forbidden"
    assert recorder.calls == ["on_before_connect mallory"]
    instance = await runtime.instance(actor_id)
    assert instance.conns == {}
    assert instance.activity.is_idle()


async def test_failing_on_connect_removes_the_connection(make_runtime: RuntimeFactory) -> None:
    def on_connect(c: ActorContext, conn: Connection) -> None:
        raise UserError("nope")

    runtime = await make_runtime(Recorder().registry(run=None, on_connect=on_connect))
    handle = runtime.client().thing.get_or_create("a")
    with pytest.raises(UserError):
        await handle.connect({"user": "ada"})
    assert (await runtime.instance(await handle.resolve())).conns == {}


async def test_forced_sleep_with_a_connection_runs_on_sleep_then_on_disconnect(
    make_runtime: RuntimeFactory,
) -> None:
    recorder = Recorder()
    runtime = await make_runtime(recorder.registry(run=None))
    handle = runtime.client().thing.get_or_create("a")
    actor_id = await handle.resolve()
    conn = await handle.connect({"user": "ada"})
    recorder.calls.clear()

    await runtime.sleep_actor(actor_id)
    assert recorder.calls == ["on_sleep aborted=True", "on_disconnect ada"]
    assert conn.closed == (1000, "actor.sleeping")
    assert not runtime.is_live(actor_id)


async def test_vars_are_rebuilt_at_each_wake_and_never_stored(
    make_runtime: RuntimeFactory,
) -> None:
    wakes = itertools.count(1)

    def create_vars(c: ActorContext) -> dict[str, Any]:
        return {"wake": next(wakes), "hits": 0}

    def hit(c: ActionContext) -> dict[str, Any]:
        c.vars["hits"] += 1
        c.state["calls"] += 1
        return dict(c.vars)

    static_hits: list[int] = []

    def static_hit(c: ActionContext) -> None:
        c.vars["hits"] += 1
        static_hits.append(c.vars["hits"])

    registry = setup(
        use={
            "made": actor(state={"calls": 0}, create_vars=create_vars, actions={"hit": hit}),
            "static": actor(state={}, vars={"hits": 0}, actions={"hit": static_hit}),
        }
    )
    runtime = await make_runtime(registry)
    client = runtime.client()
    made = client.made.get_or_create("a")
    assert await made.hit() == {"wake": 1, "hits": 1}
    assert await made.hit() == {"wake": 1, "hits": 2}
    actor_id = await made.resolve()
    await runtime.sleep_actor(actor_id)
    assert await made.hit() == {"wake": 2, "hits": 1}
    assert await stored_state(runtime, actor_id) == {"calls": 3}

    # Static vars are copied at each wake: changes never leak into the definition.
    static = client.static.get_or_create("a")
    await static.hit()
    await static.hit()
    await runtime.sleep_actor(await static.resolve())
    await static.hit()
    assert static_hits == [1, 2, 1]


async def test_on_state_change_sees_the_new_state(make_runtime: RuntimeFactory) -> None:
    seen: list[dict[str, Any]] = []

    def on_state_change(c: ActorContext, state: Any) -> None:
        seen.append(dict(state))

    def set_value(c: ActionContext, value: int) -> None:
        c.state["value"] = value

    def read(c: ActionContext) -> int:
        return int(c.state["value"])

    registry = setup(
        use={
            "thing": actor(
                state={"value": 0},
                on_state_change=on_state_change,
                actions={"set": set_value, "read": read},
            )
        }
    )
    runtime = await make_runtime(registry)
    handle = runtime.client().thing.get_or_create("a")
    await handle.read()
    assert seen == []  # the initial state is not a change
    await handle.set(5)
    assert seen == [{"value": 5}]
    await handle.read()
    await handle.set(5)
    assert seen == [{"value": 5}]  # neither a read nor an identical write is a change
    await handle.set(6)
    assert seen == [{"value": 5}, {"value": 6}]


async def test_a_change_made_inside_on_state_change_does_not_fire_it_again(
    make_runtime: RuntimeFactory,
) -> None:
    fired: list[int] = []

    def on_state_change(c: ActorContext, state: Any) -> None:
        fired.append(state["value"])
        state["hook_calls"] += 1  # a change made by the hook itself

    def set_value(c: ActionContext, value: int) -> None:
        c.state["value"] = value

    registry = setup(
        use={
            "thing": actor(
                state={"value": 0, "hook_calls": 0},
                on_state_change=on_state_change,
                actions={"set": set_value, "read": lambda c: dict(c.state)},
            )
        }
    )
    runtime = await make_runtime(registry)
    handle = runtime.client().thing.get_or_create("a")
    await handle.set(10)
    await handle.read()
    await handle.read()
    assert fired == [10]  # once for the change; reads after it do not fire it
    assert await handle.read() == {"value": 10, "hook_calls": 1}
    # The hook's own change was committed with the change that fired it.
    actor_id = await handle.resolve()
    assert await stored_state(runtime, actor_id) == {"value": 10, "hook_calls": 1}
    await handle.set(11)
    assert fired == [10, 11]


async def test_save_state_immediate_is_durable_while_the_action_still_runs(
    make_runtime: RuntimeFactory,
) -> None:
    saved = asyncio.Event()
    gate = asyncio.Event()

    async def long_job(c: ActionContext) -> None:
        c.state["stage"] = "halfway"
        await c.save_state(immediate=True)
        saved.set()
        await gate.wait()
        c.state["stage"] = "done"

    registry = setup(use={"job": actor(state={"stage": "idle"}, actions={"run_job": long_job})})
    runtime = await make_runtime(registry)
    handle = runtime.client().job.get_or_create("a")
    actor_id = await handle.resolve()
    task = asyncio.create_task(handle.run_job())
    try:
        async with asyncio.timeout(WAIT):
            await saved.wait()
        assert await stored_state(runtime, actor_id) == {"stage": "halfway"}
    finally:
        gate.set()
        async with asyncio.timeout(WAIT):
            await task
    assert await stored_state(runtime, actor_id) == {"stage": "done"}


async def test_wait_until_delays_shutdown_and_its_changes_are_flushed(
    make_runtime: RuntimeFactory,
) -> None:
    gate = asyncio.Event()
    calls: list[str] = []

    async def finish_later(c: ActionContext) -> None:
        await gate.wait()
        c.state["finished"] = True
        calls.append("background done")

    def start(c: ActionContext) -> None:
        c.wait_until(finish_later(c))
        c.sleep()

    def on_sleep(c: ActorContext) -> None:
        calls.append("on_sleep")

    registry = setup(
        use={"job": actor(state={"finished": False}, on_sleep=on_sleep, actions={"start": start})}
    )
    runtime = await make_runtime(registry)
    handle = runtime.client().job.get_or_create("a")
    actor_id = await handle.resolve()
    await handle.start()
    await eventually(lambda: calls == ["on_sleep"], what="on_sleep")
    await asyncio.sleep(0.05)
    assert runtime.is_live(actor_id), "the stop finished before wait_until's work"
    gate.set()
    await eventually(lambda: not runtime.is_live(actor_id), what="the actor to sleep")
    assert calls == ["on_sleep", "background done"]
    assert await stored_state(runtime, actor_id) == {"finished": True}


async def test_runtime_stop_puts_every_awake_actor_to_sleep(
    make_runtime: RuntimeFactory,
) -> None:
    recorder = Recorder()
    registry = recorder.registry(run=None)
    runtime = await make_runtime(registry)
    client = runtime.client()
    ids = [await client.thing.get_or_create(str(i)).resolve() for i in range(5)]
    for i in range(3):  # two actors are put to sleep before stop: on_sleep runs once each
        await client.thing.get(str(i)).increment()
    await runtime.sleep_actor(ids[3])
    recorder.calls.clear()
    assert runtime.live_count == 4

    await runtime.stop()
    assert recorder.calls == ["on_sleep aborted=True"] * 4
    assert runtime.live_count == 0

    reopened = await make_runtime(registry)
    states = [await stored_state(reopened, actor_id) for actor_id in ids]
    assert states == [
        {"n": 1, "slept": 1},
        {"n": 1, "slept": 1},
        {"n": 1, "slept": 1},
        {"n": 0, "slept": 1},
        {"n": 0, "slept": 1},
    ]

"""Every lifecycle hook fires under rivetkit 2.3.19's conditions and in its order.

One recorder follows an actor through create → connect → action → disconnect → sleep →
wake → destroy, including the transient connection rivetkit opens around each HTTP action
and ``on_before_action_response`` on every action's output.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.connections import Connection
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from perdure.runtime.actor.operations import CallAction
from tests.support.runtimes import RuntimeFactory, eventually

pytestmark = pytest.mark.timeout(20)


def recording_registry(calls: list[str], **extra: Any) -> Registry:
    """An actor whose every hook appends its name (and what it saw) to ``calls``."""

    def create_state(c: ActorContext, input: Any) -> dict[str, Any]:
        calls.append(f"create_state {input}")
        return {"n": 0}

    def on_create(c: ActorContext, input: Any) -> None:
        calls.append(f"on_create {input}")

    def create_vars(c: ActorContext) -> dict[str, Any]:
        calls.append("create_vars")
        return {}

    async def on_wake(c: ActorContext) -> None:
        calls.append("on_wake")

    def on_sleep(c: ActorContext) -> None:
        calls.append(f"on_sleep conns={len(c.conns)}")

    async def on_destroy(c: ActorContext) -> None:
        calls.append(f"on_destroy conns={len(c.conns)}")

    def on_before_connect(c: ActorContext, params: Any) -> None:
        calls.append(f"on_before_connect {params}")

    def create_conn_state(c: ActorContext, params: Any) -> dict[str, Any]:
        calls.append("create_conn_state")
        return {"user": params}

    async def on_connect(c: ActorContext, conn: Connection) -> None:
        calls.append(f"on_connect {conn.state['user']}")

    def on_disconnect(c: ActorContext, conn: Connection) -> None:
        calls.append(f"on_disconnect {conn.state['user']}")

    def on_before_action_response(c: ActorContext, name: str, args: list[Any], output: Any) -> Any:
        calls.append(f"on_before_action_response {name} {args} {output}")
        return {"wrapped": output}

    def add(c: ActionContext, amount: int) -> int:
        user = c.conn.state["user"] if c.conn is not None else None
        calls.append(f"action add {user}")
        c.state["n"] += amount
        return int(c.state["n"])

    hooks: dict[str, Any] = {
        fn.__name__: fn
        for fn in (
            *(create_state, on_create, create_vars, on_wake, on_sleep, on_destroy),
            *(on_before_connect, create_conn_state, on_connect, on_disconnect),
            on_before_action_response,
        )
    }
    hooks.update(extra)
    return setup(use={"thing": actor(actions={"add": add}, **hooks)})


CONNECT = ["on_before_connect {user}", "create_conn_state", "on_connect {user}"]


def connect(user: str) -> list[str]:
    return [step.format(user=user) for step in CONNECT]


def in_connection(user: str, amount: int, total: int) -> list[str]:
    """The hooks of one action sent over a connection of its own, opened and closed."""
    response = f"on_before_action_response add [{amount}] {total}"
    return [*connect(user), f"action add {user}", response, f"on_disconnect {user}"]


async def test_a_whole_lifecycle_fires_every_hook_in_rivetkits_order(
    make_runtime: RuntimeFactory,
) -> None:
    calls: list[str] = []
    runtime = await make_runtime(recording_registry(calls))
    handle = await runtime.client().thing.create("a", input="in")
    actor_id = await handle.resolve()
    assert calls == ["create_state in", "on_create in", "create_vars", "on_wake"]

    calls.clear()
    conn = await handle.connect("ada")
    assert await conn.action("add", 2) == {"wrapped": 2}
    await conn.dispose()
    assert calls == in_connection("ada", 2, 2)

    # An action sent with connection parameters (rivetkit's HTTP action) runs inside a
    # connection of its own: connect hooks, the action, the response hook, on_disconnect.
    calls.clear()
    output = await runtime.dispatch.ref(actor_id).perform(CallAction("add", [3]), params="bob")
    assert output == {"wrapped": 5}
    assert calls == in_connection("bob", 3, 5)

    # Sleep: on_sleep first (the connection is still listed), then on_disconnect.
    calls.clear()
    sleeper = await handle.connect("cy")
    await runtime.sleep_actor(actor_id)
    assert calls == [*connect("cy"), "on_sleep conns=1", "on_disconnect cy"]
    assert sleeper.closed == (1000, "actor.sleeping")

    # Wake: never create_state/on_create again; vars are rebuilt, then on_wake.
    calls.clear()
    assert await handle.add(1) == {"wrapped": 6}
    assert calls == [
        "create_vars",
        "on_wake",
        "action add None",
        "on_before_action_response add [1] 6",
    ]

    # Destroy: on_destroy (not on_sleep), then on_disconnect for what is still open.
    calls.clear()
    last = await handle.connect("dee")
    await runtime.destroy_actor(actor_id)
    assert calls == [*connect("dee"), "on_destroy conns=1", "on_disconnect dee"]
    assert last.closed == (1000, "actor.destroyed")


async def test_a_failing_on_before_action_response_sends_the_actions_own_output(
    make_runtime: RuntimeFactory,
) -> None:
    calls: list[str] = []

    def on_before_action_response(c: ActorContext, name: str, args: list[Any], output: Any) -> Any:
        raise ValueError("broken hook")

    runtime = await make_runtime(
        recording_registry(calls, on_before_action_response=on_before_action_response)
    )
    handle = runtime.client().thing.get_or_create("a")
    # As in rivetkit: the failure is logged, the action succeeded and its output is sent.
    assert await handle.add(4) == 4
    assert await handle.add(1) == 5


async def test_on_before_action_response_gets_the_actor_context_and_may_be_async(
    make_runtime: RuntimeFactory,
) -> None:
    calls: list[str] = []
    seen: list[type] = []

    async def on_before_action_response(
        c: ActorContext, name: str, args: list[Any], output: Any
    ) -> Any:
        seen.append(type(c))
        await asyncio.sleep(0)
        return output * 10

    runtime = await make_runtime(
        recording_registry(calls, on_before_action_response=on_before_action_response)
    )
    handle = runtime.client().thing.get_or_create("a")
    assert await handle.add(2) == 20
    # rivetkit passes the actor's context (no `conn`), not the action's.
    assert seen == [ActorContext]


async def test_on_sleep_is_cut_off_at_on_sleep_timeout(make_runtime: RuntimeFactory) -> None:
    calls: list[str] = []
    finished: list[str] = []

    async def on_sleep(c: ActorContext) -> None:
        calls.append("on_sleep")
        await asyncio.sleep(10)
        finished.append("on_sleep")

    runtime = await make_runtime(
        recording_registry(calls, on_sleep=on_sleep, options={"on_sleep_timeout": 0.05})
    )
    handle = runtime.client().thing.get_or_create("a")
    actor_id = await handle.resolve()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await runtime.sleep_actor(actor_id)
    assert loop.time() - started < 5  # well inside the 15 s grace period
    assert "on_sleep" in calls
    assert finished == []
    await eventually(lambda: not runtime.is_live(actor_id), what="the actor to stop")

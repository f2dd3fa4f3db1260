"""The alarm of a waiting run. Waits in several branches at once (a join, a race): the
actor's alarm is the soonest end among them, so a hibernated actor is woken for the first
one that ends. Each wait used to set the alarm to its own end, so the branch that began
waiting last decided: a receive with no end (or a longer sleep) begun after a race's timer
hid the timer, and the hibernated actor missed its timeout. And a wait for a child keeps
the run's deadline as its alarm (it set none)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from perdure import WorkflowContext, queue, setup, workflow
from perdure.testing import ActorTestEnv

START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
START_MS = int(START.timestamp() * 1000)
HOUR = 3600


async def _timer(branch: WorkflowContext) -> str:
    await branch.sleep("an-hour", HOUR)
    return "timer"


async def _receive(branch: WorkflowContext) -> str:
    await branch.queue.next("wait", names="q")
    return "message"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("timer_first", [True, False], ids=["timer-first", "receive-first"])
async def test_a_race_times_out_on_time_whichever_branch_waits_last(
    store: str, timer_first: bool
) -> None:
    branches = [("timer", _timer), ("receive", _receive)]

    async def run(ctx: WorkflowContext) -> Any:
        return await ctx.race("r", branches if timer_first else branches[::-1])

    registry = setup(use={"wf": workflow(queues={"q": queue()}, run=run)})
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.wf.get_or_create("k")
        actor_id = await handle.resolve()
        await env.advance(60)
        assert not env.runtime.is_live(actor_id)  # hibernated while both branches wait
        stored = await env.store.get_actor(actor_id)
        assert stored is not None
        assert stored.wake_at == START_MS + HOUR * 1000
        await env.advance(HOUR - 60)
        assert await handle.workflow_status() == {
            "status": "completed",
            "error": None,
            "output": ["timer", "timer"],
        }


async def test_a_join_wakes_for_its_soonest_sleep() -> None:
    woke: list[str] = []  # read without calling the actor, which would wake it

    def sleeper(hours: int) -> Any:
        async def branch(ctx: WorkflowContext) -> None:
            await ctx.sleep("nap", hours * HOUR)
            await ctx.step("woke", lambda s: woke.append(f"after {hours} h"))

        return branch

    async def run(ctx: WorkflowContext) -> None:
        await ctx.join("both", {"short": sleeper(1), "long": sleeper(2)})

    registry = setup(use={"wf": workflow(run=run)})
    async with ActorTestEnv(registry, start=START) as env:
        actor_id = await env.client.wf.get_or_create("k").resolve()
        await env.advance(60)
        stored = await env.store.get_actor(actor_id)
        assert stored is not None
        assert not env.runtime.is_live(actor_id)
        assert stored.wake_at == START_MS + HOUR * 1000
        await env.advance(HOUR - 60)
        assert woke == ["after 1 h"]
        await env.advance(HOUR)
        assert woke == ["after 1 h", "after 2 h"]


async def test_a_run_waiting_for_its_child_is_woken_at_its_deadline() -> None:
    """A child's end wakes its waiting parent, but so must the parent's own deadline:
    the wait for a child set no alarm at all, so a hibernated parent outlived it."""

    async def parent(ctx: WorkflowContext) -> Any:
        return await ctx.child("slow", "child")

    async def child(ctx: WorkflowContext) -> None:
        await ctx.sleep("a-day", 24 * HOUR)

    registry = setup(
        use={"parent": workflow(run=parent, timeout=HOUR), "child": workflow(run=child)}
    )
    async with ActorTestEnv(registry, start=START) as env:
        handle = env.client.parent.get_or_create("p")
        actor_id = await handle.resolve()
        await env.advance(60)
        assert not env.runtime.is_live(actor_id)
        stored = await env.store.get_actor(actor_id)
        assert stored is not None
        assert stored.wake_at == START_MS + HOUR * 1000
        await env.advance(HOUR - 60)
        status = await handle.workflow_status()
        assert (status["status"], status["error"]["code"]) == ("failed", "timed_out")

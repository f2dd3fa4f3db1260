"""``step.kv`` (docs/storage.md): a workflow step reads and writes the actor's KV space
as ``c.kv`` does; its writes commit with the step, and a step attempt that fails writes
none of them (the retry starts from what the actor has), nor does a step that runs out
of retries; reads inside a step see its own writes over the actor's. On the memory and
SQLite stores, and across a restart of the runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from perdure import ActionContext, StepContext, WorkflowContext, setup, workflow
from perdure.store import SQLiteStore
from perdure.store.kv import encode_key
from perdure.testing import ActorTestEnv

SEEN: list[Any] = []
WRITTEN: list[Any] = []


async def write(step: StepContext) -> list[Any]:
    step.kv.put_batch({"a": 1, "b": 2, "gone": 0})
    await step.kv.delete("gone")
    step.state["written"] = True
    WRITTEN.append([await step.kv.get("a"), await step.kv.get("gone"), await step.kv.list("")])


async def flaky(step: StepContext) -> str:
    # What the attempt sees of the actor's space before it writes anything.
    SEEN.append([await step.kv.get("a"), await step.kv.get("bad")])
    step.kv.delete_range("b", "c")
    step.kv.put("bad", "half")
    step.kv.delete("a")
    if len(SEEN) == 1:
        raise RuntimeError("first attempt fails after its writes")
    step.kv.put("a", "second")
    return "ok"


async def doomed(step: StepContext) -> None:
    step.kv.put("never", 1)
    raise RuntimeError("always")


async def run(ctx: WorkflowContext) -> None:
    await ctx.step("write", write)
    await ctx.step("flaky", flaky, retry_backoff_base=0.01)
    failed = await ctx.try_step("doomed", doomed, max_retries=0)
    assert not failed.ok


async def dump(c: ActionContext) -> list[list[Any]]:
    return [[k, v] for k, v in await c.kv.list("")]


async def status(c: ActionContext) -> Any:
    return c.state


registry = setup(use={"wf": workflow(state={}, run=run, actions={"dump": dump, "state": status})})


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    SEEN.clear()
    WRITTEN.clear()
    async with ActorTestEnv(registry, store=request.param) as test_env:
        yield test_env


async def _finished(env: ActorTestEnv) -> Any:
    handle = env.client.wf.get_or_create("w")
    await handle.resolve()
    await env.settle()
    await env.advance(1.0)  # the flaky step's retry
    return handle


async def test_step_writes_commit_with_the_step_and_a_failed_attempt_writes_none(
    env: ActorTestEnv,
) -> None:
    handle = await _finished(env)
    # The failed first attempt deleted `a` and wrote `bad`: the retry saw neither.
    assert SEEN == [[1, None], [1, None]]
    assert await handle.dump() == [["a", "second"], ["bad", "half"]]
    assert (await handle.state())["written"] is True
    # Nothing of the step that ran out of retries.
    actor_id = await handle.resolve()
    assert await env.store.kv_get(actor_id, [encode_key("never")]) == [None]


async def test_reads_in_a_step_see_its_own_writes(env: ActorTestEnv) -> None:
    await _finished(env)
    # Before the step's commit: its puts, its delete, and a list merging them.
    assert WRITTEN == [[1, None, [("a", 1), ("b", 2)]]]


async def test_step_writes_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SEEN.clear()
    async with ActorTestEnv(registry, store=SQLiteStore(path)) as env:
        await _finished(env)
    async with ActorTestEnv(registry, store=SQLiteStore(path)) as env:
        handle = env.client.wf.get_or_create("w")
        assert await handle.dump() == [["a", "second"], ["bad", "half"]]
    assert len(SEEN) == 2  # the finished workflow ran no step again


async def _reserve(step: StepContext) -> str:
    step.kv.put("seat", "held")
    return "r1"


async def _release(step: StepContext, output: str) -> None:
    step.kv.delete("seat")
    step.kv.put("released", output)


async def _saga(ctx: WorkflowContext) -> None:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", _reserve, rollback=_release)
    await ctx.step("charge", doomed, max_retries=0)


async def test_a_rollback_handler_writes_with_its_record() -> None:
    saga = setup(use={"saga": workflow(state={}, run=_saga, actions={"dump": dump})})
    async with ActorTestEnv(saga, store="sqlite") as env:
        handle = env.client.saga.get_or_create("s")
        await handle.resolve()
        await env.settle()
        # `charge` ran out of retries (its `never` is not written); the compensation of
        # `reserve` ran and its writes committed.
        assert await handle.dump() == [["released", "r1"]]

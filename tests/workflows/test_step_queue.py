"""A workflow step's sends leave with the step (src/perdure/workflows/step_queue.py):
checked at once, sent only when the attempt succeeds, in the commit that records it. A
failed attempt sends nothing, so a retried step sends once; a step that never succeeds
sends nothing at all; a bad send fails its attempt where it is made."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, queue, setup, workflow
from perdure.errors import WorkflowFailed
from perdure.store.encoding import decode_value
from perdure.testing import ActorTestEnv

attempts: dict[str, int] = {}


async def _send_then_fail_once(step: StepContext) -> str:
    attempts["flaky"] = attempts.get("flaky", 0) + 1
    await step.queue.send("outbox", {"attempt": attempts["flaky"]})
    if attempts["flaky"] == 1:
        raise RuntimeError("the first attempt fails after its send")
    return "sent"


async def _flaky(ctx: WorkflowContext) -> str:
    return str(await ctx.step("send", _send_then_fail_once, retry_backoff_base=0.01))


async def _send_then_always_fail(step: StepContext) -> None:
    await step.queue.send("outbox", "never")
    raise RuntimeError("every attempt fails")


async def _hopeless(ctx: WorkflowContext) -> None:
    await ctx.step("send", _send_then_always_fail, max_retries=2, retry_backoff_base=0.01)


async def _send_a_bad_body(step: StepContext) -> None:
    await step.queue.send("numbers", "not a number")


async def _bad(ctx: WorkflowContext) -> None:
    await ctx.step("send", _send_a_bad_body, max_retries=0)


registry = setup(
    use={
        name: workflow(run=run, queues={"outbox": queue(), "numbers": queue(int)})
        for name, run in (("flaky", _flaky), ("hopeless", _hopeless), ("bad", _bad))
    }
)


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    attempts.clear()
    async with ActorTestEnv(registry, store=request.param) as test_env:
        yield test_env


async def _outbox(env: ActorTestEnv, actor_id: str) -> list[Any]:
    return [decode_value(r.body) for r in await env.store.load_queue(actor_id)]


async def test_a_retried_step_sends_once_the_message_of_the_attempt_that_succeeded(
    env: ActorTestEnv,
) -> None:
    handle = env.client.flaky.get_or_create("f")
    await handle.resolve()
    await env.advance(1)  # past the retry's backoff, on the test kit's clock
    assert await handle.workflow_result(timeout=10) == "sent"
    assert attempts["flaky"] == 2
    assert await _outbox(env, await handle.resolve()) == [{"attempt": 2}]


async def test_a_step_that_never_succeeds_sends_nothing(env: ActorTestEnv) -> None:
    handle = env.client.hopeless.get_or_create("h")
    await handle.resolve()
    await env.advance(1)
    with pytest.raises(WorkflowFailed):
        await handle.workflow_result(timeout=10)
    assert await _outbox(env, await handle.resolve()) == []


async def test_a_bad_send_fails_its_attempt_where_it_is_made(env: ActorTestEnv) -> None:
    handle = env.client.bad.get_or_create("b")
    with pytest.raises(WorkflowFailed) as failed:
        await handle.workflow_result(timeout=10)
    assert "not a number" in str(failed.value.error) or "numbers" in str(failed.value.error)
    assert await _outbox(env, await handle.resolve()) == []

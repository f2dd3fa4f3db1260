"""A race's losing branch is cancelled while it waits for its step's commit: it stops
waiting, and the commit (shared with the other branches, or the store's own future) goes
on. It used to cancel the commit for everyone, which read as a failed write: the actor was
dropped ("a write failed; the actor restarts from its stored state") in the middle of the
race. Fails on the old code when the busy branch is listed first."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, setup, workflow
from perdure.testing import ActorTestEnv


def _bump(step: StepContext, name: str) -> int:
    step.state[name] = step.state.get(name, 0) + 1
    return step.state[name]


async def _fast(branch: WorkflowContext) -> str:
    await branch.step("one", lambda s: _bump(s, "fast"))
    await branch.step("two", lambda s: _bump(s, "fast"))
    return "fast"


async def _busy(branch: WorkflowContext) -> str:
    for i in range(50):
        await branch.step(f"busy-{i}", lambda s: _bump(s, "busy"))
    return "busy"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("order", ["fast-first", "busy-first"])
async def test_a_branch_cancelled_while_its_commit_is_in_flight(
    store: str, order: str, caplog: pytest.LogCaptureFixture
) -> None:
    branches = [("fast", _fast), ("busy", _busy)]
    if order == "busy-first":
        branches.reverse()

    async def run(ctx: WorkflowContext) -> Any:
        winner = await ctx.race("r", branches)
        await ctx.step("after", lambda s: _bump(s, "after"))
        return winner

    registry = setup(
        use={"wf": workflow(state={}, run=run, actions={"read": lambda c: dict(c.state)})}
    )
    with caplog.at_level(logging.WARNING):
        async with ActorTestEnv(registry, store=store) as env:
            handle = env.client.wf.get_or_create("k")
            for _ in range(200):
                status = await handle.workflow_status()
                if status["status"] != "running":
                    break
                await env.advance(0.01)
            assert status == {"status": "completed", "error": None, "output": ["fast", "fast"]}
            state = await handle.read()
            assert state["fast"] == 2
            assert state["after"] == 1
    assert "write failed" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text

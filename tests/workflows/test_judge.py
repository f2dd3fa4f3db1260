"""The judge on histories a real runtime wrote: concurrent branches, the progress line."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, StepContext, WorkflowContext, setup, workflow
from perdure.cli.check_command import PROGRESS_EVERY, _Progress
from perdure.registry import Registry
from perdure.runtime.local.client import LocalHandle
from perdure.store import SQLiteStore
from perdure.workflows.judge import Verdict, judge_history


def _branches(y_first: str) -> Registry:
    def mark(step: StepContext) -> str:
        step.state["steps"] += 1
        return step.location

    async def x(ctx: WorkflowContext) -> None:
        await ctx.step("x1", mark)
        await ctx.sleep("xs", 3600)

    async def y(ctx: WorkflowContext) -> None:
        await ctx.step(y_first, mark)
        await ctx.sleep("ys", 3600)

    async def run(ctx: WorkflowContext) -> Any:
        return await ctx.join("both", {"x": x, "y": y})

    flow = workflow(state={"steps": 0}, run=run, actions={"steps": lambda c: c.state["steps"]})
    return setup(use={"flow": flow})


Ready = Callable[[ActorRuntime, LocalHandle, str], Awaitable[bool]]


async def _judge_after(
    old: Registry, new: Registry, name: str, ready: Ready, path: Path
) -> Verdict:
    """Run ``old`` until ``ready``, then judge the history it stored with ``new``."""
    async with ActorRuntime(old, SQLiteStore(path)) as runtime:
        handle = runtime.client().actor(name).get_or_create("k")
        actor_id = await handle.resolve()
        async with asyncio.timeout(20):
            while not await ready(runtime, handle, actor_id):
                await asyncio.sleep(0.01)
        record = await runtime.store.get_actor(actor_id)
        assert record is not None
        raw = await runtime.store.load_history(actor_id)
    definition = new.get(name)
    assert definition is not None
    return await judge_history(definition, (actor_id, record.key), raw, record.state)


async def _both_sleep(runtime: ActorRuntime, handle: LocalHandle, actor_id: str) -> bool:
    if await handle.action("steps") < 2:
        return False
    return "both/y/ys" in await runtime.store.load_history(actor_id)


async def _judged_by(new: Registry, tmp_path: Path) -> Verdict:
    """Run the old code until both branches sleep, then judge its history with ``new``."""
    return await _judge_after(_branches("y1"), new, "flow", _both_sleep, tmp_path / "j.db")


async def test_a_divergence_in_one_branch_wins_over_a_frontier_in_another(
    tmp_path: Path,
) -> None:
    """Branch x replays to its sleep (a frontier) while branch y diverges: the join
    re-raises x's outcome first, yet the verdict is y's divergence."""
    verdict = await _judged_by(_branches("y1-renamed"), tmp_path)
    assert verdict.outcome == "diverged", verdict
    assert verdict.location == "both/y/y1"
    assert verdict.code == "step `both/y/y1-renamed`"
    assert verdict.problem


async def test_unchanged_branches_continue_at_their_frontier(tmp_path: Path) -> None:
    verdict = await _judged_by(_branches("y1"), tmp_path)
    assert verdict.outcome == "continues", verdict
    assert verdict.location in ("both/x/xs", "both/y/ys")
    assert not verdict.problem


def test_progress_lines_are_spaced_out() -> None:
    out = io.StringIO()
    progress = _Progress(out)
    progress(1, 10)
    assert out.getvalue() == ""  # a short check prints none
    progress._last -= PROGRESS_EVERY  # as if the interval had passed
    progress(5, 10)
    assert out.getvalue().startswith("perdure check: 5/10 actors checked ("), out.getvalue()


def _rejecting(reason: str) -> Registry:
    """Compensate, then fail: a step with a rollback, then a raise outside any step."""

    def reserve(step: StepContext) -> str:
        step.state["reserved"] += 1
        return "seat"

    def release(step: StepContext, _output: Any) -> None:
        step.state["reserved"] -= 1

    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", reserve, rollback=release)
        raise ValueError(reason)

    order = workflow(state={"reserved": 0}, run=run, actions={"ping": lambda c: "pong"})
    return setup(use={"order": order})


async def _failed(_runtime: ActorRuntime, handle: LocalHandle, _actor_id: str) -> bool:
    return (await handle.workflow_status())["status"] == "failed"


async def _failed_run_judged_by(new: Registry, tmp_path: Path) -> Verdict:
    """Run the old code until its workflow has failed, then judge its history with ``new``."""
    return await _judge_after(_rejecting("rejected"), new, "order", _failed, tmp_path / "f.db")


async def test_a_run_that_failed_by_raising_fails_the_same_way(tmp_path: Path) -> None:
    """The usual "compensate, then fail", replayed on unchanged code: it fails again as
    its stored outcome says, which is consistent, not an error."""
    verdict = await _failed_run_judged_by(_rejecting("rejected"), tmp_path)
    assert verdict.outcome == "fails", verdict
    assert verdict.status == "failed"
    assert verdict.message == "ValueError: rejected", verdict
    assert not verdict.problem


async def test_a_failed_run_that_now_raises_otherwise_is_an_error(tmp_path: Path) -> None:
    verdict = await _failed_run_judged_by(_rejecting("another reason"), tmp_path)
    assert verdict.outcome == "error", verdict
    assert verdict.status == "failed"
    assert verdict.message is not None
    assert "ValueError: another reason" in verdict.message, verdict
    assert "ValueError: rejected" in verdict.message, verdict

"""The judge on histories a real runtime wrote: concurrent branches, the progress line."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, StepContext, WorkflowContext, setup, workflow
from perdure.cli.check_command import PROGRESS_EVERY, _Progress
from perdure.registry import Registry
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


async def _judged_by(new: Registry, tmp_path: Path) -> Verdict:
    """Run the old code until both branches sleep, then judge its history with ``new``."""
    async with ActorRuntime(_branches("y1"), SQLiteStore(tmp_path / "j.db")) as runtime:
        handle = runtime.client().flow.get_or_create("k")
        actor_id = await handle.resolve()
        async with asyncio.timeout(20):
            while await handle.steps() < 2:
                await asyncio.sleep(0.01)
            while "both/y/ys" not in await runtime.store.load_history(actor_id):
                await asyncio.sleep(0.01)
        record = await runtime.store.get_actor(actor_id)
        assert record is not None
        raw = await runtime.store.load_history(actor_id)
    definition = new.get("flow")
    assert definition is not None
    return await judge_history(definition, (actor_id, record.key), raw, record.state)


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

"""The registry of the workflow-control scenarios (``perdure serve
tests.scenarios.workflows.control_app:registry``).

``saga`` reserves and charges (each with a compensation that writes to the state's log),
then runs a slow step and ships; ``paced`` counts ten steps a fifth of a second apart;
``timed`` sleeps its input's seconds and returns its input's value; ``eager``'s first
step marks a file (``PERDURE_MARKS``) and pauses a second.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from perdure import StepContext, WorkflowContext, setup, workflow


def _undo(what: str) -> Any:
    def undo(step: StepContext, output: Any) -> None:
        step.state["log"] = [*step.state["log"], f"undo {what}"]

    return undo


def _note(what: str) -> Any:
    def note(step: StepContext) -> str:
        step.state["log"] = [*step.state["log"], what]
        return what

    return note


async def _slow(step: StepContext) -> str:
    step.state["log"] = [*step.state["log"], "slow started"]
    await asyncio.sleep(1.5)
    step.state["log"] = [*step.state["log"], "slow done"]
    return "slow"


async def _saga(ctx: WorkflowContext) -> str:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", _note("reserve"), rollback=_undo("reserve"))
    await ctx.step("charge", _note("charge"), rollback=_undo("charge"))
    await ctx.step("slow", _slow, timeout=10, rollback=_undo("slow"))
    await ctx.step("ship", _note("ship"))
    return "shipped"


async def _paced(ctx: WorkflowContext) -> int:
    for index in range(10):
        await ctx.step(f"count-{index}", lambda s: s.state.update(count=s.state["count"] + 1))
        await ctx.sleep(f"pause-{index}", 0.2)
    return 10


async def _timed(ctx: WorkflowContext) -> Any:
    plan = await ctx.step("plan", lambda s: s.state["plan"])
    await ctx.sleep("wait", float(plan["seconds"]))
    return plan["value"]


def _append_mark(path: str) -> None:
    with open(path, "a") as marks:
        marks.write("mark\n")


async def _mark(step: StepContext) -> str:
    # A side effect outside the store (a file named by PERDURE_MARKS), then a pause: a
    # kill -9 in the pause leaves the step unrecorded, its mark written.
    await asyncio.to_thread(_append_mark, os.environ["PERDURE_MARKS"])
    await asyncio.sleep(1.0)
    return "marked"


async def _eager(ctx: WorkflowContext) -> str:
    return str(await ctx.step("mark", _mark, timeout=10))


registry = setup(
    use={
        "saga": workflow(state={"log": []}, run=_saga, actions={"log": lambda c: c.state["log"]}),
        "paced": workflow(
            state={"count": 0}, run=_paced, actions={"count": lambda c: c.state["count"]}
        ),
        "eager": workflow(run=_eager),
        "timed": workflow(
            create_state=lambda c, plan: {"plan": plan},
            run=_timed,
        ),
    }
)

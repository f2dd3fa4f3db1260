"""The registry of the child-workflow scenarios (``perdure serve
tests.scenarios.workflows.children_app:registry``).

``order`` starts three ``charge`` children, one after the other with a slow step between
(so a kill can fall between two starts), then waits for each; ``charge`` works a second
and returns ten times its input. Each ``charge`` creation writes a line to the file that
``$CHILDREN_LOG`` names, which survives the server's kills: the test counts them.
``slow_order`` starts one ``hold`` child, which waits for a ``go`` message.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from perdure import StepContext, WorkflowContext, queue, setup, workflow

LOG_ENV = "CHILDREN_LOG"


def _write(line: str) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


async def _pause(step: StepContext) -> None:
    await asyncio.sleep(0.4)


async def _order(ctx: WorkflowContext) -> int:
    children = []
    for index in range(3):
        children.append(await ctx.start_child(f"charge-{index}", "charge", input={"i": index}))
        await ctx.step(f"pause-{index}", _pause)
    total = 0
    for index, child in enumerate(children):
        total += int(await ctx.wait_child(f"charged-{index}", child))
    return total


def _created(c: Any, input: Any) -> None:
    c.state["i"] = int(input["i"])
    _write(f"created {c.actor_id}")


async def _work(step: StepContext) -> int:
    await asyncio.sleep(1.0)
    return int(step.state["i"]) * 10


async def _charge(ctx: WorkflowContext) -> int:
    return int(await ctx.step("work", _work, timeout=10))


async def _slow_order(ctx: WorkflowContext) -> Any:
    child = await ctx.start_child("hold", "hold")
    return await ctx.wait_child("held", child)


async def _hold(ctx: WorkflowContext) -> Any:
    message = await ctx.queue.next("go")
    return message.body


registry = setup(
    use={
        "order": workflow(run=_order),
        "charge": workflow(state={"i": 0}, on_create=_created, run=_charge),
        "slow_order": workflow(run=_slow_order, options={"sleep_timeout": 0.3}),
        "hold": workflow(queues={"go": queue()}, run=_hold),
    }
)

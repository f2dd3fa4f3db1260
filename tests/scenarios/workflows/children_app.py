"""The registry of the child-workflow scenarios (``perdure serve
tests.scenarios.workflows.children_app:registry``).

``order`` starts three ``charge`` children, one after the other with a slow step between
(so a kill can fall between two starts), then waits for each; ``charge`` works a second
and returns ten times its input. Each ``charge`` creation writes a line to the file that
``$CHILDREN_LOG`` names, which survives the server's kills: the test counts them.
``slow_order`` starts one ``hold`` child, which waits for a ``go`` message.

For the cluster (``test_children_cluster.py``): ``fanout`` starts three ``task`` children
and returns their outputs; its ``pid`` action says which node runs it. A ``task`` waits
for a ``go`` message first, and sleeps meanwhile (so the node the test sends ``go``
through takes it), then records its start (``begin``: the node's pid appended to its
state, durable with the step) and works a second. Its creation writes ``created <id>
<i>`` to ``$CHILDREN_LOG``, and pauses when the parent's plan names it (so a kill can
land inside it); each attempt of its work writes ``work <id> <pid>``.
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


FANOUT = 3


async def _fanout(ctx: WorkflowContext) -> list[int]:
    slow = await ctx.step("plan", lambda s: s.state["slow"])
    children = [
        await ctx.start_child(f"task-{i}", "task", input={"i": i, "slow": i == slow})
        for i in range(FANOUT)
    ]
    return [int(await ctx.wait_child(f"task-{i}-done", c)) for i, c in enumerate(children)]


async def _task_created(c: Any, input: Any) -> None:
    c.state["i"] = int(input["i"])
    _write(f"created {c.actor_id} {input['i']}")
    if input.get("slow"):
        await asyncio.sleep(1.0)  # the test kills the parent's node in here


def _begin(step: StepContext) -> None:
    step.state["starts"] = [*step.state["starts"], os.getpid()]


async def _task_work(step: StepContext) -> int:
    _write(f"work {step.actor_id} {os.getpid()}")
    await asyncio.sleep(1.0)
    step.state["works"] = [*step.state["works"], os.getpid()]
    return int(step.state["i"]) * 10


async def _task(ctx: WorkflowContext) -> int:
    await ctx.queue.next("go", names="go")
    await ctx.step("begin", _begin)
    return int(await ctx.step("work", _task_work, timeout=10))


registry = setup(
    use={
        "order": workflow(run=_order),
        "charge": workflow(state={"i": 0}, on_create=_created, run=_charge),
        "slow_order": workflow(run=_slow_order, options={"sleep_timeout": 0.3}),
        "hold": workflow(queues={"go": queue()}, run=_hold),
        "fanout": workflow(
            create_state=lambda c, input: {"slow": (input or {}).get("slow")},
            run=_fanout,
            actions={"pid": lambda c: os.getpid()},
        ),
        "task": workflow(
            state={"i": 0, "starts": [], "works": []},
            queues={"go": queue()},
            on_create=_task_created,
            run=_task,
            options={"sleep_timeout": 0.3},
        ),
    }
)

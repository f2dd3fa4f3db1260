"""The registry the admin API tests serve: ``perdure serve tests.support.apps.admin:registry``.

A step fails while a file named after the actor's key exists in the directory given by
``ADMIN_TEST_DIR``: that file is the "cause" a test fixes before retrying.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perdure import actor, event, queue, setup, workflow
from perdure.workflows import StepContext, WorkflowContext


def _cause(key: str) -> Path:
    return Path(os.environ.get("ADMIN_TEST_DIR", ".")) / f"fail-{key}"


def _bump(c: Any, by: int = 1, fire: Any = None) -> int:
    c.state["n"] += by
    c.broadcast("bumped", c.state["n"])
    return int(c.state["n"])


async def _plan(c: Any, seconds: float) -> str:
    return str(await c.schedule.after(seconds, "bump", 1))


async def _tick_every_minute(c: Any) -> None:
    await c.cron.every(name="tick", interval=60, action="bump", args=[1], max_history=5)


counter = actor(
    state={"n": 0},
    events={"bumped": event()},
    actions={"bump": _bump, "plan": _plan, "cron": _tick_every_minute},
)


def _apply(step: StepContext, key: str, value: int) -> int:
    if _cause(key).exists():
        raise RuntimeError(f"cannot apply {value}: the cause file exists")
    state = step.state
    state["applied"].append(value)
    state["runs"] += 1
    return value


async def _run_jobs(ctx: WorkflowContext) -> None:
    key = ctx.key[0] if ctx.key else ""

    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("take", names="jobs")
        value = int(message.body["value"])
        await loop_ctx.step(
            "apply",
            lambda step: _apply(step, key, value),
            max_retries=1,
            retry_backoff_base=0.01,
        )

    await ctx.loop("jobs", iteration)


jobs = workflow(
    state={"applied": [], "runs": 0},
    queues={"jobs": queue()},
    run=_run_jobs,
)


def _count(name: str) -> Any:
    def step(step_ctx: StepContext) -> int:
        runs = step_ctx.state["runs"]
        runs[name] = runs.get(name, 0) + 1
        if name == "charge" and _cause(step_ctx.key[0]).exists():
            raise RuntimeError("the card was declined")
        return int(runs[name])

    return step


async def _run_once(ctx: WorkflowContext) -> str:
    await ctx.step("reserve", _count("reserve"))
    await ctx.step("charge", _count("charge"), max_retries=0)
    await ctx.step("ship", _count("ship"))
    return "shipped"


once = workflow(state={"runs": {}}, run=_run_once)

registry = setup(use={"counter": counter, "jobs": jobs, "once": once})

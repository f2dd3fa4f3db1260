"""The registry the admin CLI tests serve: ``perdure serve tests.scenarios.cli.app:registry``.

- ``counter``: a plain actor with state, a queue nobody consumes (so messages stay to be
  listed), a one-shot schedule and a recurring job, to fill every part of an inspect
  report.
- ``job``: a workflow of three steps. ``fetch`` fails while a file ``block-<key>`` exists
  in the directory named by ``PERDURE_ADMIN_CLI_DIR`` (a test removes it to "fix the
  cause" and retries); every step appends a line to ``runs-<key>-<step>`` there, so a
  test counts how often each step ran (a replay reruns the steps from the one it names).
- ``sleepy``: a plain actor that falls asleep 0.3 s after its last request.
- ``waiter``: a workflow that runs a step, then waits for a message on ``go`` (with a
  deadline an hour away): a workflow that keeps running.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perdure import ActionContext, StepContext, UserError, WorkflowContext, actor, setup, workflow
from perdure import queue as queue_definition

DIRECTORY_VARIABLE = "PERDURE_ADMIN_CLI_DIR"


def _directory() -> Path:
    return Path(os.environ[DIRECTORY_VARIABLE])


def _count_run(step: StepContext) -> int:
    """Append a line to ``runs-<key>-<step>``; return how many runs that file now holds."""
    path = _directory() / f"runs-{step.key[0]}-{step.location.rsplit('/', 1)[-1]}"
    with path.open("a") as runs:
        runs.write("run\n")
    return len(path.read_text().splitlines())


def _prepare(step: StepContext) -> str:
    _count_run(step)
    step.state["stage"] = "prepared"
    return "prepared"


def _fetch(step: StepContext) -> int:
    _count_run(step)
    if (_directory() / f"block-{step.key[0]}").exists():
        raise UserError("The upstream is blocked.", code="blocked")
    step.state["stage"] = "fetched"
    return 42


def _finish(step: StepContext) -> int:
    runs = _count_run(step)
    step.state["stage"] = "finished"
    return runs


async def _run_job(ctx: WorkflowContext) -> dict[str, Any]:
    await ctx.step("prepare", _prepare)
    fetched = await ctx.step("fetch", _fetch, max_retries=1, retry_backoff_base=0.01)
    runs = await ctx.step("finish", _finish)
    return {"fetched": fetched, "finish_runs": runs}


async def _run_waiter(ctx: WorkflowContext) -> Any:
    await ctx.step("first", _count_run)
    message = await ctx.queue.next("wait-go", names="go", timeout=3600)
    return message.body


def _increment(c: ActionContext, amount: int = 1) -> int:
    c.state["count"] += amount
    return int(c.state["count"])


async def _plan(c: ActionContext) -> None:
    """A one-shot an hour away, and a job every second (whose fires a test waits for)."""
    await c.schedule.after(3600, "bump", 10)
    await c.cron.every(name="beat", interval=1, action="beat")


def _beat(c: ActionContext, fire: Any) -> None:
    c.state["beats"] += 1


def _bump(c: ActionContext, amount: int, fire: Any) -> None:
    c.state["count"] += amount


counter = actor(
    state={"count": 0, "beats": 0, "label": "café"},
    queues={"inbox": queue_definition()},
    actions={
        "increment": _increment,
        "getState": lambda c: c.state,
        "plan": _plan,
        "beat": _beat,
        "bump": _bump,
    },
    options={"min_cron_interval": 1.0},
)

job = workflow(
    state={"stage": "new"},
    run=_run_job,
    actions={"getState": lambda c: c.state},
)

sleepy = actor(
    state={"count": 0},
    actions={"increment": _increment},
    options={"sleep_timeout": 0.3},
)

waiter = workflow(
    state={},
    queues={"go": queue_definition()},
    run=_run_waiter,
    actions={"getState": lambda c: c.state},
)

registry = setup(use={"counter": counter, "job": job, "sleepy": sleepy, "waiter": waiter})

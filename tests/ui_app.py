"""The registry the inspector UI tests serve: ``perdure serve tests.ui_app:registry``.

- ``notes``: a plain actor (state, an action, a one-shot schedule and a cron job);
- ``pipeline``: a workflow. Each message on ``jobs`` is recorded by a ``record`` step in
  a loop; a message ``{"finish": GATE}`` ends the loop, and the ``check-gate`` step then
  fails while a file named GATE exists in the directory ``PERDURE_UI_GATES`` names
  (so does a ``record`` step whose message has ``"gate": GATE``). Deleting that file is
  "fixing the cause" before retrying the failed workflow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perdure import Loop, StepContext, WorkflowContext, actor, queue, setup, workflow

GATES_ENV = "PERDURE_UI_GATES"


def _add(c: Any, text: str, fire: Any = None) -> int:
    # A scheduled call passes its fire info after the arguments.
    c.state["notes"].append(text)
    return len(c.state["notes"])


def _fail(c: Any) -> None:
    raise ValueError("notes refuse this")


async def _plan(c: Any) -> str:
    await c.cron.every(name="tidy", interval=3600, action="add", args=["tidy"])
    return await c.schedule.after(3600, "add", "later")


notes = actor(
    state={"notes": []},
    actions={"add": _add, "fail": _fail, "plan": _plan},
)


def _record(step: StepContext, body: Any) -> int:
    if isinstance(body, dict) and "gate" in body:
        _check_gate(str(body["gate"]))
    step.state["seen"].append(body)
    return len(step.state["seen"])


def _check_gate(gate: str) -> str:
    folder = os.environ.get(GATES_ENV)
    if folder and (Path(folder) / gate).exists():
        raise RuntimeError(f"gate {gate!r} is closed: remove its file to open it")
    return f"gate {gate} open"


def _finish(step: StepContext) -> int:
    # Counts its runs: a replay from an earlier step runs it again.
    step.state["finished"] += 1
    return len(step.state["seen"])


async def _run(ctx: WorkflowContext) -> Any:
    async def iteration(loop: WorkflowContext) -> Any:
        message = await loop.queue.next("job")
        body = message.body
        if isinstance(body, dict) and "finish" in body:
            return Loop.break_(str(body["finish"]))
        await loop.step("record", lambda step: _record(step, body))
        return None

    gate = await ctx.loop("jobs", iteration)
    await ctx.step(
        "check-gate", lambda step: _check_gate(gate), max_retries=1, retry_backoff_base=0.05
    )
    return await ctx.step("finish", _finish)


pipeline = workflow(
    state={"seen": [], "finished": 0},
    queues={"jobs": queue()},
    actions={"getState": lambda c: c.state},
    run=_run,
)

registry = setup(use={"notes": notes, "pipeline": pipeline})

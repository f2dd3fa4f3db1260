"""The registry the inspector UI tests serve: ``perdure serve tests.scenarios.ui.app:registry``.

- ``notes``: a plain actor (state, actions, an event, a one-shot schedule and cron
  jobs, one of them quick, and a queue nothing consumes);
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

from perdure import Loop, StepContext, WorkflowContext, actor, event, queue, setup, workflow

GATES_ENV = "PERDURE_UI_GATES"


def _add(c: Any, text: str, fire: Any = None) -> int:
    # A scheduled call passes its fire info after the arguments.
    c.state["notes"].append(text)
    c.broadcast("added", text)
    return len(c.state["notes"])


def _fail(c: Any) -> None:
    raise ValueError("notes refuse this")


async def _plan(c: Any) -> str:
    await c.cron.every(name="tidy", interval=3600, action="add", args=["tidy"])
    return await c.schedule.after(3600, "add", "later")


async def _tick(c: Any) -> None:
    await c.cron.every(name="tick", interval=0.3, action="add", args=["tick"], max_history=3)


def _remember(c: Any, count: int) -> int:
    # KV records for the inspector's KV card: `count` string keys and one bytes key.
    c.kv.put_batch({f"note:{index:03d}": {"n": index} for index in range(count)})
    c.kv.put(b"\x01raw", "under a bytes key")
    return count


notes = actor(
    state={"notes": []},
    queues={"inbox": queue()},  # nothing consumes it: its messages stay to be seen
    events={"added": event()},
    actions={"add": _add, "fail": _fail, "plan": _plan, "tick": _tick, "remember": _remember},
    options={"min_cron_interval": 0.1},  # so that a test sees a cron job fire soon
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


async def _family(ctx: WorkflowContext) -> Any:
    # A parent whose child is a pipeline keyed like it: it waits for the child's end.
    child = await ctx.start_child("pipeline", "pipeline", key=[*ctx.key, "child"])
    return await ctx.wait_child("pipeline-done", child)


family = workflow(run=_family)

registry = setup(use={"notes": notes, "pipeline": pipeline, "family": family})

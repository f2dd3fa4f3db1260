"""The registry of the lease tests: ``perdure serve tests.support.apps.leases:registry``, and the
test kit's in-process runtime.

- ``worker``: a plain actor whose actions receive completable messages from ``jobs``
  (leased for ``LEASE`` seconds, a dead letter after ``MAX_ATTEMPTS`` deliveries; the
  environment variable ``PERDURE_LEASE_S`` changes the lease) and keep them in
  ``c.vars`` so that later calls complete or give them back. ``take_and_die`` kills
  its own process once it holds a message: a consumer that crashes at every attempt.
- ``looper``: a plain actor whose ``run`` consumes ``jobs`` with ``c.queue.iter`` and
  records each delivery without completing it (a consumer that always times out), so
  its alarm must wake it when a lease runs out.
- ``pipeline``: a workflow that takes every message of ``jobs`` in a loop and adds its
  value to ``sum`` in the same step (exactly once, through history), with an action
  that leases one of the same queue's messages outside the workflow. Each step takes
  ``PERDURE_STEP_S`` seconds (0 unless set).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from perdure import ActionContext, ActorContext, WorkflowContext, actor, setup, workflow
from perdure import queue as queue_definition

LEASE = float(os.environ.get("PERDURE_LEASE_S", "2.0"))
MAX_ATTEMPTS = 3
STEP_S = float(os.environ.get("PERDURE_STEP_S", "0"))


def _jobs() -> dict[str, Any]:
    return {"jobs": queue_definition(visibility_timeout=LEASE, max_attempts=MAX_ATTEMPTS)}


def _held(c: ActionContext) -> dict[int, Any]:
    held: dict[int, Any] = c.vars["held"]
    return held


def _view(message: Any) -> dict[str, Any] | None:
    if message is None:
        return None
    return {"id": message.id, "body": message.body, "attempts": message.attempts}


async def _take(
    c: ActionContext, timeout: float = 0.0, visibility: float | None = None
) -> dict[str, Any] | None:
    message = await c.queue.next(
        names="jobs", timeout=timeout, completable=True, visibility_timeout=visibility
    )
    if message is not None:
        _held(c)[message.id] = message
    return _view(message)


async def _take_and_die(c: ActionContext) -> None:
    message = await c.queue.next(names="jobs", timeout=5.0, completable=True)
    if message is not None:
        os.kill(os.getpid(), signal.SIGKILL)  # the consumer dies holding it


async def _complete(c: ActionContext, message_id: int) -> None:
    await _held(c).pop(message_id).complete("done")


async def _nack(
    c: ActionContext, message_id: int, delay: float = 0.0, error: str | None = None
) -> None:
    await _held(c).pop(message_id).nack(delay=delay, error=error)


async def _loop(c: ActorContext) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["deliveries"].append([message.id, message.attempts])


async def _pipeline(ctx: WorkflowContext) -> None:
    async def receive(loop: WorkflowContext) -> None:
        message = await loop.queue.next("job", names="jobs")

        async def apply(step: Any) -> None:
            await asyncio.sleep(STEP_S)  # slow enough for a kill to land mid-stream
            step.state["sum"] += message.body["value"]
            step.state["count"] += 1

        await loop.step("apply", apply)

    await ctx.loop("jobs", receive)


registry = setup(
    use={
        "worker": actor(
            state={},
            vars={"held": {}},
            queues=_jobs(),
            actions={
                "take": _take,
                "take_and_die": _take_and_die,
                "complete": _complete,
                "nack": _nack,
                "size": lambda c: c.queue.size(),
            },
        ),
        "looper": actor(
            state={"deliveries": []},
            queues=_jobs(),
            run=_loop,
            actions={"deliveries": lambda c: c.state["deliveries"]},
            options={"sleep_timeout": 1.0},
        ),
        "pipeline": workflow(
            state={"sum": 0, "count": 0},
            vars={"held": {}},
            queues=_jobs(),
            run=_pipeline,
            actions={
                "total": lambda c: [c.state["sum"], c.state["count"]],
                "take": _take,
                "size": lambda c: c.queue.size(),
            },
        ),
    }
)

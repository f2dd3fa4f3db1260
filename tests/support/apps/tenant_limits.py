"""The registry of the queue limit tests: ``perdure serve
tests.support.apps.tenant_limits:registry``, and the test kit's in-process runtime.

The newcomer's declaration: at most 2 jobs in progress per tenant, at most 10 started per
second per tenant, the tenant read from the job's body.

- ``jobs``: a plain actor whose actions receive completable messages (kept in
  ``c.vars`` so that later calls complete or give them back) or plain ones.
- ``farm``: a plain actor whose ``run`` consumes ``jobs`` with ``WORKERS`` receivers at
  once, each job taking ``PERDURE_WORK_S`` seconds; with ``PERDURE_LIMITS_LOG`` set, it
  appends ``start``/``end`` lines (tenant, message id, attempt, epoch ms) to that
  file: ``start`` once the message is received (its lease durable), ``end`` when the
  work is done, just before ``complete()``; a ``kill -9`` loses none of them.
- ``flow``: a workflow that receives ``jobs`` completable, one at a time, and completes
  each in a later step.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from perdure import ActionContext, ActorContext, WorkflowContext, actor, setup, workflow
from perdure import queue as queue_definition

CONCURRENCY = 2
RATE = (10, 1.0)
LEASE = float(os.environ.get("PERDURE_LEASE_S", "2.0"))
WORK_S = float(os.environ.get("PERDURE_WORK_S", "0.2"))
WORKERS = 8
LOG = os.environ.get("PERDURE_LIMITS_LOG")


def _queues() -> dict[str, Any]:
    return {
        "jobs": queue_definition(
            visibility_timeout=LEASE, concurrency=CONCURRENCY, rate=RATE, key="tenant"
        ),
        "other": queue_definition(),
    }


def _held(c: ActionContext) -> dict[int, Any]:
    held: dict[int, Any] = c.vars["held"]
    return held


def _view(message: Any) -> list[Any]:
    return [message.id, message.body["tenant"]]


async def _take(c: ActionContext, count: int = 1, timeout: float = 0.0) -> list[list[Any]]:
    messages = await c.queue.next_batch(
        names="jobs", count=count, timeout=timeout, completable=True
    )
    for message in messages:
        _held(c)[message.id] = message
    return [_view(m) for m in messages]


async def _take_plain(c: ActionContext) -> Any:
    message = await c.queue.next(names="jobs", timeout=0)
    return None if message is None else _view(message)


async def _complete(c: ActionContext, message_id: int) -> None:
    await _held(c).pop(message_id).complete("done")


async def _nack(c: ActionContext, message_id: int, delay: float = 0.0) -> None:
    await _held(c).pop(message_id).nack(delay=delay)


def _log(line: str) -> None:
    if LOG is not None:
        fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode() + b"\n")  # one write: whole lines, even at a kill
        finally:
            os.close(fd)


async def _farm(c: ActorContext) -> None:
    async def work() -> None:
        async for message in c.queue.iter(names="jobs", completable=True):
            tenant, attempt = message.body["tenant"], message.attempts
            _log(f"start {tenant} {message.id} {attempt} {int(time.time() * 1000)}")
            await asyncio.sleep(WORK_S)
            # Before complete(): once it returns the slot is another job's, and a kill
            # after it would leave a completed job with no end line.
            _log(f"end {tenant} {message.id} {attempt} {int(time.time() * 1000)}")
            await message.complete()

    await asyncio.gather(*(work() for _ in range(WORKERS)))


async def _flow(ctx: WorkflowContext) -> None:
    async def receive(loop: WorkflowContext) -> None:
        message = await loop.queue.next("job", names="jobs", completable=True)

        async def record(step: Any) -> None:
            step.state["seen"].append(message.body["tenant"])

        await loop.step("record", record)
        await loop.sleep("hold", 5.0)  # in progress meanwhile
        await message.complete()

    await ctx.loop("jobs", receive)


registry = setup(
    use={
        "jobs": actor(
            state={},
            vars={"held": {}},
            queues=_queues(),
            actions={
                "take": _take,
                "take_plain": _take_plain,
                "complete": _complete,
                "nack": _nack,
                "size": lambda c: c.queue.size(),
            },
        ),
        "farm": actor(
            state={},
            queues=_queues(),
            run=_farm,
            actions={"size": lambda c: c.queue.size()},
            options={"sleep_timeout": 60.0},
        ),
        "flow": workflow(
            state={"seen": []},
            vars={"held": {}},
            queues=_queues(),
            run=_flow,
            actions={"seen": lambda c: c.state["seen"], "take": _take, "complete": _complete},
        ),
    }
)

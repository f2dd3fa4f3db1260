"""The registry of the delayed-send tests: ``perdure serve
tests.support.apps.later:registry``, and the test kit's in-process runtime.

- ``inbox``: a workflow that takes every message of ``jobs`` and records its body; it sleeps
  after ``PERDURE_SLEEP_S`` idle seconds (1 unless set). ``send_later`` sends to its own
  queue with ``c.queue.send(..., delay=)``.
- ``worker``: a plain actor whose ``take`` receives one message of ``jobs`` without waiting.
- ``stepper``: a workflow whose first step sends a delayed message to its own queue
  (``step.queue.send(..., delay=)``), then waits for it.
"""

from __future__ import annotations

import os
from typing import Any

from perdure import ActionContext, WorkflowContext, actor, queue, setup, workflow

SLEEP_S = float(os.environ.get("PERDURE_SLEEP_S", "1.0"))


async def _inbox(ctx: WorkflowContext) -> None:
    async def receive(loop: WorkflowContext) -> None:
        message = await loop.queue.next("job", names="jobs")

        def record(step: Any) -> None:
            step.state["got"].append(message.body)

        await loop.step("record", record)

    await ctx.loop("jobs", receive)


async def _send_later(c: ActionContext, body: Any, delay: float) -> None:
    await c.queue.send("jobs", body, delay=delay)


def _take(c: ActionContext) -> Any:
    message = c.queue.try_next("jobs")
    return None if message is None else message.body


async def _stepper(ctx: WorkflowContext) -> None:
    async def send(step: Any) -> None:
        await step.queue.send("jobs", "later", delay=5.0)

    await ctx.step("send", send)
    message = await ctx.queue.next("wait", names="jobs")
    await ctx.step("got", lambda step: step.state["got"].append(message.body))


_SLEEPY = {"sleep_timeout": SLEEP_S}

registry = setup(
    use={
        "inbox": workflow(
            state={"got": []},
            queues={"jobs": queue()},
            run=_inbox,
            actions={
                "got": lambda c: c.state["got"],
                "send_later": _send_later,
                "size": lambda c: c.queue.size(),
            },
            options=_SLEEPY,
        ),
        "worker": actor(
            state={},
            queues={"jobs": queue()},
            actions={"take": _take, "size": lambda c: c.queue.size()},
            options=_SLEEPY,
        ),
        "stepper": workflow(
            state={"got": []},
            queues={"jobs": queue()},
            run=_stepper,
            actions={"got": lambda c: c.state["got"]},
            options=_SLEEPY,
        ),
    }
)

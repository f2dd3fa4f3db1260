"""The registry of the delayed-send and idle-expiry tests: ``perdure serve
tests.support.apps.later:registry``, and the test kit's in-process runtime.

- ``inbox``: a workflow that takes every message of ``jobs`` and records its body; it sleeps
  after ``PERDURE_SLEEP_S`` idle seconds (1 unless set). ``send_later`` sends to its own
  queue with ``c.queue.send(..., delay=)``.
- ``worker``: a plain actor whose ``take`` receives one message of ``jobs`` without waiting.
- ``stepper``: a workflow whose first step sends a delayed message to its own queue
  (``step.queue.send(..., delay=)``), then waits for it.
- ``temp``: a plain actor with ``idle_ttl`` ``PERDURE_TTL_S`` (10 s unless set); its
  ``on_destroy`` records its key in :data:`DESTROYED` and, when ``PERDURE_MARKER_DIR``
  is set, as a file there (a real server's tests read it).
- ``temp_flow``: a workflow with the same ttl that waits for one message of ``go``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perdure import ActionContext, ActorContext, WorkflowContext, actor, queue, setup, workflow

SLEEP_S = float(os.environ.get("PERDURE_SLEEP_S", "1.0"))
TTL_S = float(os.environ.get("PERDURE_TTL_S", "10.0"))
DESTROYED: list[str] = []  # keys of the temp actors whose on_destroy ran, in process


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
    message = c.queue.try_next(names="jobs")
    return None if message is None else message.body


async def _stepper(ctx: WorkflowContext) -> None:
    async def send(step: Any) -> None:
        await step.queue.send("jobs", "later", delay=5.0)

    await ctx.step("send", send)
    message = await ctx.queue.next("wait", names="jobs")
    await ctx.step("got", lambda step: step.state["got"].append(message.body))


def _destroyed(c: ActorContext) -> None:
    key = "/".join(c.key)
    DESTROYED.append(key)
    marker_dir = os.environ.get("PERDURE_MARKER_DIR")
    if marker_dir:
        (Path(marker_dir) / f"destroyed-{key}").write_text("on_destroy ran\n")


async def _schedule_touch(c: ActionContext, seconds: float) -> None:
    await c.schedule.after(seconds, "touch")


def _touch(c: ActionContext, *_fire: Any) -> int:
    c.state["touches"] += 1
    touches: int = c.state["touches"]
    return touches


async def _temp_flow(ctx: WorkflowContext) -> None:
    await ctx.queue.next("go", names="go")
    await ctx.step("done", lambda step: step.state.update(done=True))


_SLEEPY = {"sleep_timeout": SLEEP_S}
_TTL = {"sleep_timeout": SLEEP_S, "idle_ttl": TTL_S}

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
        "temp": actor(
            state={"touches": 0},
            queues={"jobs": queue()},
            on_destroy=_destroyed,
            actions={
                "touch": _touch,
                "touches": lambda c: c.state["touches"],
                "schedule_touch": _schedule_touch,
            },
            options=_TTL,
        ),
        "temp_flow": workflow(
            state={"done": False},
            queues={"go": queue()},
            run=_temp_flow,
            on_destroy=_destroyed,
            actions={"done": lambda c: c.state["done"]},
            options=_TTL,
        ),
    }
)

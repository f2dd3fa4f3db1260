"""The seed's queue-driven cron pattern.

Scheduling triggers actions, so a small scheduled action is the bridge: every interval it
enqueues a ``cron-tick`` message, and the workflow loop does the work durably, one step
per tick. The recurring job is created once, in ``on_create``: jobs persist, and the actor
sleeps between runs (its next run is its alarm, which wakes it).

The scheduled action receives a :class:`~perdure.ScheduledFireInfo` as its last
argument; ``fire.scheduled_at`` (``fire["scheduledAt"]`` on the wire) is the deadline the
fire was due at, in epoch milliseconds, even when the fire comes late after downtime.

Configuration (environment variables, read at import): ``PERDURE_CRON_INTERVAL`` is the
interval in seconds (default 60, as in the seed); ``PERDURE_CRON_SLEEP_TIMEOUT`` the idle
time before the actor sleeps (default 30 s). An interval under 5 s lowers the actor's
``min_cron_interval`` option to match, for demos and tests.
"""

from __future__ import annotations

import os

from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

from perdure import (
    ActionContext,
    ActorContext,
    ScheduledFireInfo,
    StepContext,
    WorkflowContext,
    queue,
    setup,
    workflow,
)

CRON_INTERVAL = float(os.environ.get("PERDURE_CRON_INTERVAL", "60"))
SLEEP_TIMEOUT = float(os.environ.get("PERDURE_CRON_SLEEP_TIMEOUT", "30"))


class CronTick(TypedDict):
    scheduledAt: int


async def on_create(c: ActorContext, input: object) -> None:
    await c.cron.every(
        name="workflow-tick",
        interval=CRON_INTERVAL,
        action="enqueueCronTick",
        args=[],
        max_history=100,
    )


async def enqueue_cron_tick(c: ActionContext, fire: ScheduledFireInfo) -> None:
    await c.queue.send("cron-tick", {"scheduledAt": fire.scheduled_at})


async def run_cron(ctx: WorkflowContext) -> None:
    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("wait-cron-tick")

        def run_cron_job(step: StepContext) -> None:
            step.state["runs"] += 1
            step.state["lastRunAt"] = message.body["scheduledAt"]

        await loop_ctx.step("run-cron-job", run_cron_job)

    await ctx.loop("cron-loop", iteration)


cron_actor = workflow(
    state={"runs": 0, "lastRunAt": None},
    queues={"cron-tick": queue(CronTick)},
    on_create=on_create,
    actions={
        "enqueueCronTick": enqueue_cron_tick,
        "getState": lambda c: c.state,
    },
    run=run_cron,
    options={
        "min_cron_interval": min(5.0, CRON_INTERVAL),
        "sleep_timeout": SLEEP_TIMEOUT,
    },
)

registry = setup(use={"cronActor": cron_actor})

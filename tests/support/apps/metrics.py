"""The actors of the metrics tests: ``perdure serve tests.support.apps.metrics:registry``.

- ``counter``: a state-changing action, two failing ones (a user error with a known code,
  a bug), an event, and a one-shot schedule;
- ``jobs``: a workflow that takes each job of queue ``jobs`` in one durable step (and
  leaves the messages of queue ``later`` waiting);
- ``flaky``: a workflow whose one step fails once, then succeeds;
- ``doomed``: a workflow whose one step always fails (one retry allowed).
"""

from __future__ import annotations

from typing import Any

from perdure import (
    ActionContext,
    StepContext,
    UserError,
    WorkflowContext,
    actor,
    event,
    queue,
    setup,
    workflow,
)

# Keys of the flaky actors whose step has failed once (the step's own attempt count is
# not visible to step code; a failed step's state changes do not persist either).
FAILED_ONCE: set[str] = set()
FAST_RETRY = {"max_retries": 1, "retry_backoff_base": 0.01, "retry_backoff_max": 0.05}


def inc(c: ActionContext) -> int:
    c.state["n"] += 1
    return int(c.state["n"])


def refuse(c: ActionContext) -> None:
    raise UserError("Refused on purpose.", code="refused")


def crash(c: ActionContext) -> None:
    raise RuntimeError("a bug")


def ping(c: ActionContext, text: str) -> None:
    c.broadcast("pinged", text)


async def ping_later(c: ActionContext, seconds: float) -> str:
    return await c.schedule.after(seconds, "fired")


def fired(c: ActionContext, fire: Any) -> None:
    c.state["fired"] += 1


def get_state(c: ActionContext) -> Any:
    return c.state


counter = actor(
    state={"n": 0, "fired": 0},
    events={"pinged": event(str)},
    actions={
        "inc": inc,
        "refuse": refuse,
        "crash": crash,
        "ping": ping,
        "pingLater": ping_later,
        "fired": fired,
        "getState": get_state,
    },
)


def apply_job(step: StepContext, value: int) -> None:
    step.state["sum"] += value
    step.state["done"] += 1


async def run_jobs(ctx: WorkflowContext) -> None:
    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("wait-job", names="jobs")
        value = message.body["value"]
        await loop_ctx.step("apply", lambda step: apply_job(step, value))

    await ctx.loop("jobs-loop", iteration)


jobs = workflow(
    state={"sum": 0, "done": 0},
    queues={"jobs": queue(), "later": queue()},
    run=run_jobs,
    actions={"getState": get_state},
)


async def run_flaky(ctx: WorkflowContext) -> str:
    key = ctx.key[0]

    def fail_once(step: StepContext) -> str:
        if key not in FAILED_ONCE:
            FAILED_ONCE.add(key)
            raise RuntimeError("first attempt fails")
        return "ok"

    return str(await ctx.step("fail-once", fail_once, **FAST_RETRY))


async def run_doomed(ctx: WorkflowContext) -> None:
    def always_fail(step: StepContext) -> None:
        raise RuntimeError("always fails")

    await ctx.step("always-fails", always_fail, **FAST_RETRY)


flaky = workflow(run=run_flaky)
doomed = workflow(run=run_doomed)

registry = setup(use={"counter": counter, "jobs": jobs, "flaky": flaky, "doomed": doomed})

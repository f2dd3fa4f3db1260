"""The actors of the tracing and log tests: ``perdure serve tests.support.apps.tracing:registry``.

- ``greeter``: actions that log through ``c.log`` (one logs an exception too), one that
  calls another greeter, one that fails;
- ``flaky``: a workflow whose one step fails once, then succeeds;
- ``worker``: a workflow that takes each message of queue ``jobs`` and applies it in a
  step (the metrics tests' ``jobs``);
- ``relay``: the same with a 60 s wait before the first message and after each one. Its
  actor sleeps as soon as it waits, and the runtime's alarm wakes it: on a manual clock
  a test stops the runtime while a message waits in the queue, or after the workflow
  received it and before the step that follows it.
"""

from __future__ import annotations

from typing import Any

from perdure import (
    ActionContext,
    StepContext,
    UserError,
    WorkflowContext,
    actor,
    queue,
    setup,
    workflow,
)

# The metrics tests' workflows: one step that fails once; a step per message of `jobs`.
from tests.support.apps.metrics import jobs as worker
from tests.support.apps.metrics import run_flaky


def hello(c: ActionContext, name: str) -> str:
    c.log.info("saying hello to %s", name)
    return f"hello {name}"


async def introduce(c: ActionContext, key: str, name: str) -> str:
    """Has another greeter say hello, through the in-process client."""
    greeting: str = await c.client().greeter.get_or_create([key]).hello(name)
    return greeting


def refuse(c: ActionContext) -> None:
    raise UserError("Not today.", code="refused")


def oops(c: ActionContext) -> None:
    try:
        raise ValueError("bad value")
    except ValueError:
        c.log.exception("could not go on")


def get_state(c: ActionContext) -> Any:
    return c.state


greeter = actor(
    state={}, actions={"hello": hello, "introduce": introduce, "refuse": refuse, "oops": oops}
)


def apply_job(step: StepContext, value: int) -> None:
    step.state["applied"].append(value)


async def run_relay(ctx: WorkflowContext) -> None:
    await ctx.sleep("warm-up", 60)

    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("take", names="jobs")
        value = message.body["value"]
        await loop_ctx.sleep("pause", 60)
        await loop_ctx.step("apply", lambda step: apply_job(step, value))

    await ctx.loop("jobs-loop", iteration)


flaky = workflow(state={}, run=run_flaky, actions={"getState": get_state})
relay = workflow(
    state={"applied": []},
    queues={"jobs": queue()},
    run=run_relay,
    actions={"getState": get_state},
    options={"sleep_timeout": 0.05},
)

registry = setup(use={"greeter": greeter, "flaky": flaky, "worker": worker, "relay": relay})

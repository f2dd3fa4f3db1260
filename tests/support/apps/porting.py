"""Actors written as a literal port of RivetKit code would be, traps included."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from perdure import (
    ActionContext,
    ActorContext,
    Registry,
    ScheduledFireInfo,
    StepContext,
    WorkflowContext,
    actor,
    queue,
    setup,
    workflow,
)


async def camel_case_on_create(c: ActorContext, input: Any) -> None:
    # RivetKit's spelling: `maxHistory` (Python's is `max_history`).
    await c.cron.every(
        name="workflow-tick",
        interval=60,
        action="tick",
        args=[],
        maxHistory=100,
    )


trap_cron = actor(
    state={"runs": 0},
    on_create=camel_case_on_create,
    actions={"tick": lambda c, fire: None, "getState": lambda c: c.state},
)


async def every_ten_seconds(c: ActorContext, input: Any) -> None:
    await c.cron.every(
        name="tick", interval=dt.timedelta(seconds=10), action="record", max_history=10
    )


def record(c: ActionContext, fire: ScheduledFireInfo) -> None:
    try:
        fire.scheduledAt  # noqa: B018 - the TypeScript spelling, on purpose
        hint = "no error"
    except AttributeError as exc:
        hint = str(exc)
    c.state["fires"].append(
        {"at": fire.scheduled_at, "time": fire.scheduled_time.isoformat(), "hint": hint}
    )


fires = actor(
    state={"fires": []},
    on_create=every_ten_seconds,
    actions={"record": record, "getState": lambda c: c.state},
    options={"min_cron_interval": 1.0},
)


@dataclass
class Resources:
    resource: str | None = None


def open_on_wake(c: ActorContext) -> None:
    c.vars.resource = "connected"


vars_object = actor(
    state={},
    create_vars=lambda c: Resources(),
    on_wake=open_on_wake,
    actions={"resource": lambda c: c.vars.resource},
)


def read_dict_vars_as_attribute(c: ActionContext) -> str:
    try:
        return str(c.vars.resource)
    except AttributeError as exc:
        return str(exc)


vars_dict = actor(
    state={},
    vars={"resource": "connected"},
    actions={"attribute": read_dict_vars_as_attribute, "key": lambda c: c.vars["resource"]},
)


async def receive(c: ActionContext) -> Any:
    message = await c.queue.next(names="jobs", timeout=dt.timedelta(milliseconds=50))
    if message is None:
        return None
    time = message.created_time.isoformat()
    return {"body": message.body, "at": message.created_at, "time": time}


async def receive_with_string_timeout(c: ActionContext) -> Any:
    return await c.queue.next(names="jobs", timeout="1000")


async def receive_with_camel_case(c: ActionContext) -> Any:
    return await c.queue.next(names="jobs", timeoutMs=1000)


queues = actor(
    state={},
    queues={"jobs": queue()},
    actions={
        "receive": receive,
        "stringTimeout": receive_with_string_timeout,
        "camelCase": receive_with_camel_case,
    },
)


def finish(step: StepContext) -> None:
    step.state["done"] = True


async def run_sleeper(ctx: WorkflowContext) -> str:
    await ctx.sleep("nap", dt.timedelta(milliseconds=20))
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=20)
    await ctx.sleep_until("until", soon)
    message = await ctx.queue.next("wait", timeout=dt.timedelta(seconds=10))
    await ctx.step("finish", finish, timeout=dt.timedelta(seconds=5))
    return str(message.created_time.year)


sleeper = workflow(
    state={"done": False},
    queues={"go": queue()},
    run=run_sleeper,
    actions={"getState": lambda c: c.state},
)


async def run_camel_case_step(ctx: WorkflowContext) -> None:
    await ctx.step("finish", finish, maxRetries=1)


async def run_string_sleep(ctx: WorkflowContext) -> None:
    await ctx.sleep("tick", "1000")


async def run_naive_sleep_until(ctx: WorkflowContext) -> None:
    await ctx.sleep_until("later", dt.datetime(2030, 1, 1))


def failing_workflow(run: Any) -> Any:
    return workflow(state={"done": False}, run=run, actions={"getState": lambda c: c.state})


def make_registry() -> Registry:
    """A fresh registry (definitions are validated, hence bound, per registry)."""
    return setup(
        use={
            "trapCron": trap_cron,
            "fires": fires,
            "varsObject": vars_object,
            "varsDict": vars_dict,
            "queues": queues,
            "sleeper": sleeper,
            "camelCaseStep": failing_workflow(run_camel_case_step),
            "stringSleep": failing_workflow(run_string_sleep),
            "naiveSleepUntil": failing_workflow(run_naive_sleep_until),
        }
    )


registry = make_registry()

"""The seed's setup & teardown pattern: one-time initialisation before a long-lived loop,
and a resource opened on every wake and closed on every sleep.

``vars`` are ephemeral: ``on_wake`` opens the resource each time the actor starts and
``on_sleep`` closes it. The workflow's ``setup`` step runs once in the actor's life; the
loop ticks once per second, durably (a crash never repeats or skips a tick's state change).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from perdure import ActorContext, StepContext, WorkflowContext, setup, workflow

# `perdure serve` prints these lines, so the demo shows every wake and sleep.
log = logging.getLogger("examples.setup_teardown")

# Counts what happened to the resource in this process, so a client can check that every
# wake was paired with a sleep (see the ``getLifecycle`` action).
lifecycle: list[str] = []


@dataclass
class Vars:
    """Ephemeral per-wake values (each actor gets its own copy): ``c.vars.resource``."""

    resource: str | None = None


def open_resource() -> str:
    lifecycle.append("open")
    return "connected"


def close_resource(resource: str) -> None:
    lifecycle.append("close")


def on_wake(c: ActorContext) -> None:
    c.vars.resource = open_resource()
    log.info("setupRunTeardownActor %s woke: resource opened", list(c.key))


def on_sleep(c: ActorContext) -> None:
    if not c.vars.resource:
        return
    close_resource(c.vars.resource)
    c.vars.resource = None
    log.info("setupRunTeardownActor %s going to sleep: resource closed", list(c.key))


def initialise(step: StepContext) -> None:
    if not step.vars.resource:
        step.vars.resource = open_resource()
    step.state["initialized"] = True


def tick(step: StepContext) -> None:
    step.state["ticks"] += 1


async def run(ctx: WorkflowContext) -> None:
    await ctx.step("setup", initialise)

    async def main_loop(loop_ctx: WorkflowContext) -> None:
        await loop_ctx.sleep("tick", 1.0)
        await loop_ctx.step("tick-step", tick)

    await ctx.loop("main-loop", main_loop)


setup_run_teardown_actor = workflow(
    vars=Vars(),
    state={"initialized": False, "ticks": 0},
    on_wake=on_wake,
    on_sleep=on_sleep,
    run=run,
    actions={
        "getState": lambda c: c.state,
        "getLifecycle": lambda c: list(lifecycle),
        # Not in the seed: lets a client (or a test) send the actor to sleep on demand.
        "goToSleep": lambda c: c.sleep(),
    },
)

registry = setup(use={"setupRunTeardownActor": setup_run_teardown_actor})

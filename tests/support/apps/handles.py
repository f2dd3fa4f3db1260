"""The registry the handle suite runs against, in process and behind ``perdure serve``.

- ``counter``: declares its events; ``increment(by=1)`` broadcasts ``newCount``;
  ``getCount()``, ``echo(*args)``.
- ``mailbox``: queue ``jobs`` answered by its ``run`` loop (``{"doubled": 2 * n}``) and
  queue ``held`` that nobody reads (a waiting sender times out).
- ``flow``: a workflow that completes at once with ``{"done": True}``.
- ``waiter``: a workflow that waits for a message forever; ``nap()`` puts it to sleep.
- ``host``: ``run(scenario, key)`` runs a scenario of the suite inside the actor with
  ``c.client()`` (the actor-to-actor implementation of the handle API).
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from perdure import ActionContext, ActorContext, WorkflowContext, actor, event, queue, setup
from perdure import workflow as workflow_actor


def _increment(c: ActionContext, by: int = 1) -> int:
    c.state["count"] += by
    c.broadcast("newCount", c.state["count"])
    return int(c.state["count"])


counter = actor(
    state={"count": 0},
    events={"newCount": event()},
    actions={
        "increment": _increment,
        "getCount": lambda c: c.state["count"],
        "echo": lambda c, *args: list(args),
    },
)


async def _answer_jobs(c: ActorContext) -> None:
    while True:
        message = await c.queue.next(names="jobs", completable=True)
        if message is not None:
            await message.complete({"doubled": 2 * message.body["n"]})


mailbox = actor(
    state={},
    queues={"jobs": queue(), "held": queue()},
    run=_answer_jobs,
    actions={"size": lambda c: c.queue.size()},
)


async def _finish(ctx: WorkflowContext) -> dict[str, bool]:
    await ctx.step("only", lambda step: None)
    return {"done": True}


flow = workflow_actor(state={}, run=_finish, actions={"ping": lambda c: "pong"})


async def _wait_forever(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait", names="never")


waiter = workflow_actor(
    state={},
    queues={"never": queue()},
    run=_wait_forever,
    actions={"nap": lambda c: c.sleep()},
)

# Scenarios of the suite, by name, that ``host.run`` can run with ``c.client()``: set by
# the test module (the test process is the runtime's process).
SCENARIOS: dict[str, Callable[[Any, str], Awaitable[None]]] = {}


async def _run_scenario(c: ActionContext, name: str, key: str) -> str:
    try:
        await SCENARIOS[name](c.client(), key)
    except BaseException:  # an assertion too: the test reports it with its traceback
        return traceback.format_exc()
    return "ok"


host = actor(state={}, actions={"run": _run_scenario})

registry = setup(
    use={"counter": counter, "mailbox": mailbox, "flow": flow, "waiter": waiter, "host": host}
)

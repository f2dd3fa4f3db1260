"""Actors for the cluster tests: the seed's progress actor (from ``tests.support.apps.crash``), an
actor whose one-shot schedule records each fire in the file named by
``PERDURE_SIDE_EFFECTS`` (``"fire <actor id> <pid>"``), and a watcher that connects to a
progress actor through ``c.client()`` and keeps the events it receives; a mailbox, a
workflow that takes every message of ``jobs`` and records, in one step each, its body,
when it took it (epoch ms) and the pid of the node that did; and a tagged counter for
the history checker (:mod:`tests.support.history`): each increment appends its token to
the log, and every answer names the pid of the node that gave it."""

from __future__ import annotations

import os
import time
from typing import Any

from perdure import StepContext, WorkflowContext, actor, queue, setup, workflow
from tests.support.apps.crash import progress_actor, record_side_effect_line
from tests.support.history import GENESIS, chain


def _fired(c: Any, fire: Any) -> None:
    c.state["fires"] += 1
    record_side_effect_line(f"fire {c.actor_id}")


async def _arm(c: Any, delay: float) -> None:
    await c.schedule.after(delay, "fired")


alarm_actor = actor(
    state={"fires": 0},
    actions={"arm": _arm, "fired": _fired, "fires": lambda c: c.state["fires"]},
)


async def _follow(c: Any, key: str) -> str:
    """Connect to progress actor ``key`` (wherever it lives) and keep its events."""
    connection = await c.client().progressActor.get_or_create([key]).connect()
    connection.on("progressUpdated", lambda p: c.state["seen"].append(p["completed"]))
    c.vars["connection"] = connection  # kept open while this actor is awake
    return str(connection.conn.actor_id)


watcher_actor = actor(
    state={"seen": []},
    create_vars=lambda c: {},
    actions={
        "follow": _follow,
        "seen": lambda c: c.state["seen"],
        "ask": lambda c, key: c.client().progressActor.get_or_create([key]).getState(),
    },
)


async def _take_mail(ctx: WorkflowContext) -> None:
    async def take(loop: WorkflowContext) -> None:
        message = await loop.queue.next("mail", names="jobs")

        def record(step: StepContext) -> None:
            taken = {"body": message.body, "at": int(time.time() * 1000), "pid": os.getpid()}
            step.state["got"] = [*step.state["got"], taken]

        await loop.step("record", record)

    await ctx.loop("mail", take)


mailbox = workflow(
    state={"got": []},
    queues={"jobs": queue()},
    run=_take_mail,
    actions={"got": lambda c: c.state["got"]},
)


def _append(c: Any, token: int) -> dict[str, Any]:
    c.state["log"].append(token)
    c.state["digest"] = chain(c.state["digest"], token)
    return {"count": len(c.state["log"]), "pid": os.getpid()}


def _read(c: Any) -> dict[str, Any]:
    return {"count": len(c.state["log"]), "digest": c.state["digest"], "pid": os.getpid()}


tagged_counter = actor(
    state={"log": [], "digest": GENESIS},
    actions={"append": _append, "read": _read, "log": lambda c: c.state["log"]},
)

registry = setup(
    use={
        "progressActor": progress_actor,
        "alarmActor": alarm_actor,
        "watcher": watcher_actor,
        "mailbox": mailbox,
        "taggedCounter": tagged_counter,
    }
)

"""The actors of the schedule tests."""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import ActionContext, Registry, ScheduledFireInfo, UserError, actor, setup

# Gates that hold the `slow` action of the actor with that key until a test opens them.
GATES: dict[str, asyncio.Event] = {}


def record(c: ActionContext, *args: Any) -> None:
    """Remember the configured args and the fire info (as its wire mapping)."""
    *configured, fire = args
    assert isinstance(fire, ScheduledFireInfo)
    c.state["calls"].append({"args": configured, "fire": dict(fire)})


async def slow(c: ActionContext, fire: ScheduledFireInfo) -> None:
    c.state["calls"].append({"args": [], "fire": dict(fire)})
    await GATES.setdefault(c.key[0], asyncio.Event()).wait()


def fail(c: ActionContext, fire: ScheduledFireInfo) -> None:
    c.state["failures"] += 1
    raise UserError("boom", code="boom")


def crash(c: ActionContext, fire: ScheduledFireInfo) -> None:
    raise RuntimeError("a bug")


def two_args(c: ActionContext, a: Any, b: Any, fire: ScheduledFireInfo) -> None:
    c.state["calls"].append({"args": [a, b], "fire": dict(fire)})


async def schedule_in_action(c: ActionContext, seconds: float) -> str:
    """Changes state and schedules in one action: both commit together."""
    c.state["touched"] = True
    return await c.schedule.after(seconds, "record", "from-action")


def calls(c: ActionContext) -> list[Any]:
    return list(c.state["calls"])


def ticker(*, without: tuple[str, ...] = (), **options: Any) -> Any:
    actions = {
        "record": record,
        "slow": slow,
        "fail": fail,
        "crash": crash,
        "twoArgs": two_args,
        "scheduleInAction": schedule_in_action,
        "calls": calls,
    }
    for name in without:
        del actions[name]
    return actor(
        state={"calls": [], "failures": 0, "touched": False},
        actions=actions,
        options={"sleep_grace_period": 0.2, "min_cron_interval": 1.0, **options},
    )


def make_registry(*, without: tuple[str, ...] = (), **options: Any) -> Registry:
    """A fresh registry (definitions are validated, hence bound, per registry)."""
    return setup(use={"ticker": ticker(without=without, **options)})

"""Actors for the cluster failover tests: the seed's progress actor (from
``tests.crash_app``) and an actor whose one-shot schedule records each fire in the file
named by ``PERDURE_SIDE_EFFECTS`` (``"fire <actor id> <pid>"``)."""

from __future__ import annotations

from typing import Any

from perdure import actor, setup
from tests.crash_app import progress_actor, record_side_effect_line


def _fired(c: Any, fire: Any) -> None:
    c.state["fires"] += 1
    record_side_effect_line(f"fire {c.actor_id}")


async def _arm(c: Any, delay: float) -> None:
    await c.schedule.after(delay, "fired")


alarm_actor = actor(
    state={"fires": 0},
    actions={"arm": _arm, "fired": _fired, "fires": lambda c: c.state["fires"]},
)

registry = setup(use={"progressActor": progress_actor, "alarmActor": alarm_actor})

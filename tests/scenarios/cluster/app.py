"""Actors for the cluster tests: the seed's progress actor (from ``tests.support.apps.crash``), an
actor whose one-shot schedule records each fire in the file named by
``PERDURE_SIDE_EFFECTS`` (``"fire <actor id> <pid>"``), and a watcher that connects to a
progress actor through ``c.client()`` and keeps the events it receives."""

from __future__ import annotations

from typing import Any

from perdure import actor, setup
from tests.support.apps.crash import progress_actor, record_side_effect_line


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

registry = setup(
    use={"progressActor": progress_actor, "alarmActor": alarm_actor, "watcher": watcher_actor}
)

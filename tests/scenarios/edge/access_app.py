"""The registry of the access tests: ``perdure serve tests.scenarios.edge.access_app:registry``.

``guarded`` shows what ``c.request`` holds in each place it is set, and refuses what its
``can_subscribe``/``can_publish`` hooks refuse: events and queues whose name starts with
``secret``, unless the connection's params say ``{"role": "admin"}``. ``board`` counts
posts and broadcasts each, to every follower.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import actor, event, queue, setup


def _seen(request: Any) -> dict[str, Any] | None:
    if request is None:
        return None
    return {
        "origin": request.origin,
        "client_host": request.client_host,
        "transport": request.transport,
        "marker": request.headers.get("x-test-marker"),
        "user_agent": request.headers.get("user-agent"),
    }


def _before_connect(c: Any, params: Any) -> None:
    c.vars["connect"] = _seen(c.request)


def _is_admin(c: Any) -> bool:
    return isinstance(c.conn.params, dict) and c.conn.params.get("role") == "admin"


def _can_subscribe(c: Any, name: str) -> bool:
    return not name.startswith("secret") or _is_admin(c)


async def _can_publish(c: Any, name: str) -> bool:
    return not name.startswith("secret") or _is_admin(c)


def _whoami(c: Any) -> dict[str, Any]:
    return {"action": _seen(c.request), "connect": c.vars.get("connect")}


async def _schedule_probe(c: Any) -> None:
    await c.schedule.after(0.05, "record_probe")


def _record_probe(c: Any, fire: Any) -> None:
    c.state["probe"] = {"request": _seen(c.request), "done": True}


def _probe(c: Any) -> Any:
    return c.state.get("probe")


async def _slow(c: Any, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def _ping(c: Any) -> str:
    c.broadcast("news", "hello")
    return "pong"


guarded = actor(
    state={},
    vars={},
    events={"news": event(), "alerts": event(), "updates": event(), "secret_news": event()},
    queues={"jobs": queue(), "secret_jobs": queue()},
    on_before_connect=_before_connect,
    can_subscribe=_can_subscribe,
    can_publish=_can_publish,
    actions={
        "whoami": _whoami,
        "schedule_probe": _schedule_probe,
        "record_probe": _record_probe,
        "probe": _probe,
        "slow": _slow,
        "ping": _ping,
    },
)


def _post(c: Any) -> int:
    c.state["posts"] += 1
    c.broadcast("news", c.state["posts"])
    return int(c.state["posts"])


# No can_subscribe hook: a follower (an SSE stream) gets every event (docs/events.md).
board = actor(
    state={"posts": 0},
    events={"news": event()},
    actions={"post": _post, "posts": lambda c: c.state["posts"]},
)

registry = setup(
    use={"guarded": guarded, "board": board},
    max_actions_in_flight_per_connection=2,
    max_subscriptions_per_connection=2,
)

"""The registry the server tests serve:
``python -m perdure serve tests.support.apps.server:registry``.

Limits are small so the oversize cases are cheap to provoke.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import UserError, actor, event, queue, setup


def _increment(c: Any, amount: int = 1) -> int:
    c.state["count"] += amount
    c.broadcast("newCount", c.state["count"])
    return int(c.state["count"])


def _get_state(c: Any) -> Any:
    return c.state


def _fail(c: Any) -> None:
    raise UserError("Not allowed today.", code="not_today", metadata={"why": "test"})


def _crash(c: Any) -> None:
    raise RuntimeError("secret internal detail")


async def _slow(c: Any, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def _whoami(c: Any) -> Any:
    if c.conn is None:
        return None
    return {"params": c.conn.params, "state": c.conn.state}


def _echo(c: Any, value: Any) -> Any:
    return value


def _big(c: Any, size: int) -> str:
    return "x" * size


def _ping_me(c: Any, name: str) -> None:
    c.conn.send(name, "only you")


def _before_connect(c: Any, params: Any) -> None:
    if isinstance(params, dict) and params.get("token") == "bad":
        raise UserError("Bad token.", code="forbidden")


def _conn_state(c: Any, params: Any) -> Any:
    user = params.get("user", "anon") if isinstance(params, dict) else "anon"
    return {"user": user}


def _on_sleep(c: Any) -> None:
    c.state["slept"] += 1


counter = actor(
    state={"count": 0, "slept": 0},
    events={"newCount": event(), "direct": event()},
    actions={
        "increment": _increment,
        "getState": _get_state,
        "fail": _fail,
        "crash": _crash,
        "slow": _slow,
        "whoami": _whoami,
        "echo": _echo,
        "big": _big,
        "pingMe": _ping_me,
    },
    on_before_connect=_before_connect,
    create_conn_state=_conn_state,
    on_sleep=_on_sleep,
)

greeter = actor(
    create_state=lambda c, input: {"greeting": (input or {}).get("greeting", "hello")},
    actions={"greet": lambda c, who: f"{c.state['greeting']}, {who}"},
)


async def _work(c: Any) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["done"] += message.body
        await message.complete(message.body * 2)


worker = actor(
    state={"done": 0},
    queues={"jobs": queue(), "typed": queue(int)},
    actions={"getState": _get_state},
    run=_work,
)

# Small limits and no consumer, for the error-parity tests
# (tests/scenarios/server/test_error_parity.py).
limits = actor(
    state={},
    queues={"jobs": queue()},
    actions={"slow": _slow},
    options={"action_timeout": 0.2, "max_queue_size": 1, "max_queue_message_size": 64},
)

registry = setup(
    use={"counter": counter, "greeter": greeter, "worker": worker, "limits": limits},
    max_incoming_message_size=4096,
    max_outgoing_message_size=8192,
    max_http_body_size=16384,
    max_conn_params_size=512,
    max_input_size=1024,
)

"""The registry the client tests serve: ``perdure serve tests.scenarios.client.app:registry``.

- ``counter``: state ``{"count": n}``; ``increment(by=1)`` broadcasts ``newCount``;
  ``shout(event, *args)`` broadcasts anything; ``fail(code)`` raises ``UserError``;
  ``echo(*args)``; ``params()`` returns the caller's connection params; ``slow(seconds)``.
- ``guarded``: refuses connections whose params lack ``{"token": "secret"}``.
- ``inputs``: keeps its creation input in state (``getInput()``).
- ``mailbox``: a queue ``jobs``; ``drain()`` takes every waiting body, ``completeNext(r)``
  completes the next message with response ``r``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import UserError, actor, event, queue, setup
from perdure.runtime.actor.contexts import ActionContext, ActorContext


def _increment(c: ActionContext, by: int = 1) -> int:
    c.state["count"] += by
    c.broadcast("newCount", c.state["count"])
    return int(c.state["count"])


def _get_count(c: ActionContext) -> int:
    return int(c.state["count"])


def _shout(c: ActionContext, name: str, *args: Any) -> None:
    c.broadcast(name, *args)


def _fail(c: ActionContext, code: str) -> None:
    raise UserError("It failed on purpose.", code=code, metadata={"code": code, "n": 1})


def _echo(c: ActionContext, *args: Any) -> list[Any]:
    return list(args)


def _params(c: ActionContext) -> Any:
    return None if c.conn is None else c.conn.params


async def _slow(c: ActionContext, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


counter = actor(
    state={"count": 0},
    events={"newCount": event(), "ping": event(), "other": event()},
    actions={
        "increment": _increment,
        "getCount": _get_count,
        "shout": _shout,
        "fail": _fail,
        "echo": _echo,
        "params": _params,
        "slow": _slow,
    },
)


def _check_token(c: ActorContext, params: Any) -> None:
    if not isinstance(params, dict) or params.get("token") != "secret":
        raise UserError("A valid token is required.", code="forbidden")


guarded = actor(
    state={},
    on_before_connect=_check_token,
    actions={"hello": lambda c: "hello"},
)


def _create_inputs_state(c: ActorContext, input: Any) -> dict[str, Any]:
    return {"input": input}


inputs = actor(
    create_state=_create_inputs_state,
    actions={"getInput": lambda c: c.state["input"]},
)


def _drain(c: ActionContext) -> list[Any]:
    return [message.body for message in c.queue.try_next_batch(names="jobs", count=100)]


async def _complete_next(c: ActionContext, response: Any) -> Any:
    message = c.queue.try_next(names="jobs", completable=True)
    if message is None:
        return None
    await message.complete(response)
    return message.body


mailbox = actor(
    state={},
    queues={"jobs": queue()},
    actions={"drain": _drain, "completeNext": _complete_next},
)

registry = setup(use={"counter": counter, "guarded": guarded, "inputs": inputs, "mailbox": mailbox})

"""Actors whose lifecycle rivetkit's own driver tests look at (issue 34), in perdure's
API: ``perdure serve tests.support.apps.lifecycle:registry``; the compat suite serves some.

- ``ticker``: ``run`` marks itself started and ticks every 50 ms until aborted.
- ``sleeper``: counts its wakes and sleeps; ``trigger_sleep`` sends ``sleeping`` to the
  calling connection from a ``wait_until`` task started just before ``c.sleep()``;
  ``alarm_in(ms)`` schedules a no-op; ``prevent(flag)`` is ``c.set_prevent_sleep``; its
  ``on_websocket`` greets and keeps the socket in ``c.vars``, to which ``on_sleep`` says
  ``sleeping`` after 100 ms (it returns at once without sockets). ``sleep_timeout``: 1 s.
- ``slowStart``: ``on_wake`` takes 300 ms; ``ping`` answers ``pong``; ``destroy`` and
  ``sleep`` are ``c.destroy()`` and ``c.sleep()`` (rivetkit's fixture has a ``destroy``
  action); ``on_destroy`` leaves a file in the ``PARITY_DIR`` environment variable's.
- ``stubborn``: ``run`` ignores the abort signal; ``run_stop_timeout`` is 0.3 s;
  ``sleep_now`` is ``c.sleep()``.
- ``stateless``: no state; ``read_state`` reads ``c.state``.
- ``guarded``: event ``secret`` refuses every subscriber, queue ``closed`` every
  sender (their own ``can_subscribe``/``can_publish``); ``open`` and ``inbox`` allow.
- ``changes``: ``increment_multiple(n)`` changes the state ``n`` times in one action;
  ``on_state_change`` counts its calls in ``c.vars``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from perdure import ActionContext, ActorContext, ActorDefinition, actor, event, queue, setup

SLEEP_TIMEOUT = 1.0


async def _tick(c: ActorContext) -> None:
    c.state["run_started"] = True
    while not c.aborted:
        c.state["ticks"] += 1
        await asyncio.sleep(0.05)


def _wake(c: ActorContext) -> None:
    c.state["starts"] += 1


async def _sleep(c: ActorContext) -> None:
    c.state["sleeps"] += 1
    if c.vars["sockets"]:  # say goodbye late (and take a while) with the sockets open
        await asyncio.sleep(0.1)
        for socket in c.vars["sockets"]:
            await socket.send_text(f"sleeping {c.state['sleeps']}")
        await asyncio.sleep(0.1)


async def _socket(c: ActorContext, websocket: Any) -> None:
    c.vars["sockets"].append(websocket)
    await websocket.send_text("connected")
    try:
        async for _ in websocket.iter_text():
            pass
    finally:
        c.vars["sockets"].remove(websocket)


def _trigger_sleep(c: ActionContext) -> None:
    conn = c.conn

    async def say_goodbye() -> None:
        await asyncio.sleep(0.01)
        if conn is not None:
            conn.send("sleeping", c.state["starts"])

    c.wait_until(say_goodbye())
    c.sleep()


async def _alarm_in(c: ActionContext, ms: int) -> None:
    await c.schedule.after(ms / 1000, "noop")


async def _slow_wake(c: ActorContext) -> None:
    await asyncio.sleep(0.3)


def _record_destroy(c: ActorContext) -> None:
    folder = os.environ.get("PARITY_DIR")
    if folder:
        (Path(folder) / f"destroyed-{c.actor_id}").write_text("yes")


async def _stubborn_run(c: ActorContext) -> None:
    while True:  # ignores c.aborted on purpose
        await asyncio.sleep(0.05)


def _read_state(c: ActionContext) -> Any:
    return c.state


def _state_changed(c: ActorContext, state: Any) -> None:
    c.vars["calls"] += 1


def _increment_multiple(c: ActionContext, n: int) -> int:
    for _ in range(n):
        c.state["count"] += 1
    return int(c.state["count"])


def actors() -> dict[str, ActorDefinition]:
    """The actors by name, made afresh (the compat suite serves them under its names)."""
    return {
        "ticker": actor(
            state={"run_started": False, "ticks": 0},
            run=_tick,
            actions={"get_state": lambda c: dict(c.state)},
        ),
        "sleeper": actor(
            state={"starts": 0, "sleeps": 0},
            vars={"sockets": []},
            events={"sleeping": event()},
            on_wake=_wake,
            on_sleep=_sleep,
            on_websocket=_socket,
            actions={
                "counts": lambda c: dict(c.state),
                "trigger_sleep": _trigger_sleep,
                "alarm_in": _alarm_in,
                "noop": lambda c, fire=None: None,
                "prevent": lambda c, flag: c.set_prevent_sleep(flag) or c.prevent_sleep,
            },
            options={"sleep_timeout": SLEEP_TIMEOUT},
        ),
        "slowStart": actor(
            state={},
            on_wake=_slow_wake,
            on_destroy=_record_destroy,
            actions={
                "ping": lambda c: "pong",
                "destroy": lambda c: c.destroy(),
                "sleep": lambda c: c.sleep(),
            },
        ),
        "stubborn": actor(
            state={"starts": 0},
            on_wake=_wake,
            run=_stubborn_run,
            actions={"starts": lambda c: c.state["starts"], "sleep_now": lambda c: c.sleep()},
            options={"run_stop_timeout": 0.3},
        ),
        "stateless": actor(actions={"read_state": _read_state, "ping": lambda c: "pong"}),
        "guarded": actor(
            state={},
            events={"secret": event(can_subscribe=lambda c: False), "open": event()},
            queues={"closed": queue(can_publish=lambda c: False), "inbox": queue()},
            actions={"ping": lambda c: "pong"},
        ),
        "changes": actor(
            state={"count": 0},
            vars={"calls": 0},
            on_state_change=_state_changed,
            actions={"increment_multiple": _increment_multiple, "calls": lambda c: c.vars["calls"]},
        ),
    }


registry = setup(use=actors())

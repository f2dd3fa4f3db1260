"""The registry the official-client compatibility suite serves (``tests/scenarios/compat/``).

``perdure serve tests.support.apps.compat:registry``: every actor of the seed examples
(``examples.app``) under its own name, plus a few actors the examples do not have:

- ``compatCounter``: ``increment(by=1)`` broadcasts ``newCount``; ``getState``;
  ``fail()`` raises a :class:`~perdure.UserError` with a code and metadata; ``crash()``
  raises an unexpected exception (the client must see only a generic message);
  ``whoami()`` returns the caller's connection params and conn state; ``echo(value)``;
  ``sample()`` returns values built in Python (big ints, bytes, a set, ``$`` arrays);
  ``getInput()`` returns the creation input; ``identity()`` returns ``{actorId, key}``
  (to tell which actor a key reached); ``sleepNow()`` puts the actor to sleep, which
  closes its connections (the client reconnects and re-subscribes); ``odd name/ü%`` and
  ``math.add(a, b)`` test action names.
- ``compatWorker``: a completable queue ``jobs`` (each message is completed with
  ``body * 2``, so ``send(..., {wait: true})`` answers ``completed``) and a queue
  ``parked`` that nothing reads (so a waiting send times out).
- ``compatModels``: pydantic models end to end (docs/models.md): ``add(item)`` takes an
  ``Item`` model, keeps a ``Tally`` model state, broadcasts and returns the ``Tally``;
  ``apply()`` reads ``Job`` bodies of the queue ``jobs``. The client sees plain objects.
- ``compatRaw``: raw handlers (docs/edge.md): ``on_request`` answers ``POST /add`` (a
  JSON ``{by}``) with the new count and anything else with what it received;
  ``on_websocket`` greets with its path, then answers ``add`` with the new count and
  echoes other text. ``getCount`` reads the count the raw routes changed.
- ``dbActorRaw``: the fixture actor of rivetkit's actor-db and actor-db-raw driver
  tests, with ``c.db`` (tests/support/apps/db_raw.py)
- ``kvActor``: the fixture actor of rivetkit's actor-kv driver test, with ``c.kv``
  (``tests/support/apps/kv.py``).
- ``queueActor``, ``workflowErrorHookActor``, ``workflowTryActor``, ``largePayloadActor``:
  fixture actors of rivetkit's driver tests (``tests/support/apps/parity.py``).
- ``life*``: the actors of ``tests/support/apps/lifecycle.py`` (``lifeTicker``,
  ``lifeSleeper`` …): rivetkit's lifecycle as its driver tests see it.
"""

from __future__ import annotations

from typing import Any

from examples.app import registry as examples_registry
from pydantic import BaseModel

from perdure import ActionContext, ActorContext, UserError, actor, event, queue, setup
from tests.support.apps.db_raw import db_actor_raw
from tests.support.apps.kv import kv_actor
from tests.support.apps.lifecycle import actors as lifecycle_actors
from tests.support.apps.parity import PARITY_ACTORS


def _increment(c: ActionContext, by: int = 1) -> int:
    c.state["count"] += by
    c.broadcast("newCount", c.state["count"])
    return int(c.state["count"])


def _fail(c: ActionContext) -> None:
    raise UserError("Not allowed today.", code="not_today", metadata={"why": "test", "n": 1})


def _crash(c: ActionContext) -> None:
    raise RuntimeError("secret internal detail")


def _sample(c: ActionContext) -> dict[str, Any]:
    """Values built in Python that each encoding must bring to JavaScript intact."""
    return {
        "text": "héllo ☃ 𝄞",
        "large": 2**40,
        "negativeLarge": -(2**40),
        "maxSafe": 2**53 - 1,
        "float": 1.5,
        "integralFloat": 3.0,
        "big": 2**70,
        "bytes": bytes([0, 1, 254, 255]),
        "set": {1, 2},
        "dollarPair": ["$Set", 1],
        "dollarText": ["$x", "y"],
        "nothing": None,
    }


def _whoami(c: ActionContext) -> Any:
    if c.conn is None:
        return None
    return {"params": c.conn.params, "state": c.conn.state}


def _conn_state(c: ActorContext, params: Any) -> Any:
    return {"user": params.get("user", "anon") if isinstance(params, dict) else "anon"}


def _create_state(c: ActorContext, input: Any) -> dict[str, Any]:
    return {"count": 0, "input": input}


compat_counter = actor(
    create_state=_create_state,
    events={"newCount": event()},
    create_conn_state=_conn_state,
    actions={
        "increment": _increment,
        "getState": lambda c: c.state,
        "fail": _fail,
        "crash": _crash,
        "whoami": _whoami,
        "echo": lambda c, value: value,
        "sample": _sample,
        "getInput": lambda c: c.state["input"],
        "identity": lambda c: {"actorId": c.actor_id, "key": c.key},
        "sleepNow": lambda c: c.sleep(),
        # Names the client must percent-encode in the path, and a nested action ("math.add").
        "odd name/ü%": lambda c: "odd",
        "math": {"add": lambda c, a, b: a + b},
    },
)


async def _work(c: ActorContext) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["done"] += message.body
        await message.complete(message.body * 2)


compat_worker = actor(
    state={"done": 0},
    queues={"jobs": queue(int), "parked": queue()},
    actions={"getState": lambda c: c.state},
    run=_work,
    # Small, so that the suite's queue.message_too_large check is cheap.
    options={"max_queue_message_size": 1024},
)


class Item(BaseModel):
    name: str
    qty: int


class Tally(BaseModel):
    count: int = 0
    last: Item | None = None


class Job(BaseModel):
    value: int


def _add(c: ActionContext, item: Item) -> Tally:
    c.state.count += item.qty
    c.state.last = item
    c.broadcast("tally", c.state)
    return c.state


async def _apply(c: ActionContext) -> int:
    for message in await c.queue.next_batch(count=10, timeout=0.5):
        c.state.count += message.body.value
    return c.state.count


compat_models = actor(
    state=Tally(),
    events={"tally": event(Tally)},
    queues={"jobs": queue(Job)},
    actions={"add": _add, "apply": _apply, "getState": lambda c: c.state},
)


async def _raw_request(c: Any, request: Any) -> Any:
    if request.method == "POST" and request.url.path == "/add":
        c.state["count"] += (await request.json())["by"]
        return {"count": c.state["count"]}
    return {
        "method": request.method,
        "path": request.url.path,
        "query": request.url.query,
        "conn": c.conn.params if c.conn is not None else None,
    }


async def _raw_websocket(c: Any, websocket: Any) -> None:
    await websocket.send_text(f"hello {websocket.url.path}")
    async for text in websocket.iter_text():
        if text == "add":
            c.state["count"] += 1
            await websocket.send_text(f"count {c.state['count']}")
        else:
            await websocket.send_text(f"echo {text}")


compat_raw = actor(
    state={"count": 0},
    on_request=_raw_request,
    on_websocket=_raw_websocket,
    actions={"getCount": lambda c: c.state["count"]},
)

registry = setup(
    use={
        **examples_registry.actors,
        "compatCounter": compat_counter,
        "compatWorker": compat_worker,
        "compatModels": compat_models,
        "compatRaw": compat_raw,
        "kvActor": kv_actor,
        "dbActorRaw": db_actor_raw,
        **PARITY_ACTORS,
        # rivetkit's lifecycle, as its driver tests see it (issue 34): lifeTicker,
        # lifeSleeper, lifeSlowStart, lifeStateless, lifeGuarded ...
        **{f"life{name[0].upper()}{name[1:]}": a for name, a in lifecycle_actors().items()},
    }
)

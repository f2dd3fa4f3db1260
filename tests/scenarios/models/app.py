"""The registry the typed-model tests serve: models as queue bodies, events, action
arguments and results, connection params, create input and state (docs/models.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from perdure import actor, event, queue, setup
from perdure.runtime.actor.contexts import ActionContext, ActorContext


class Progress(BaseModel):
    completed: int = 0
    total: int = 0


class TrackerState(BaseModel):
    progress: Progress = Progress()
    owner: str = ""


class Job(BaseModel):
    value: int


class Item(BaseModel):
    name: str
    qty: int


class Params(BaseModel):
    user: str


class Setup(BaseModel):
    owner: str
    total: int


def create_state(c: ActorContext, input: Setup) -> TrackerState:
    assert isinstance(input, Setup)  # the input= schema hands the model over
    return TrackerState(progress=Progress(total=input.total), owner=input.owner)


def add(c: ActionContext, item: Item) -> Progress:
    assert isinstance(item, Item)
    c.state.progress.completed += item.qty
    c.broadcast("progress", c.state.progress)
    return c.state.progress


def progress(c: ActionContext) -> Progress:
    return c.state.progress


def state(c: ActionContext) -> TrackerState:
    return c.state


def corrupt(c: ActionContext) -> None:
    c.state.progress.completed = "not a number"  # models do not check assignments


async def drain(c: ActionContext) -> list[int]:
    messages = await c.queue.next_batch(count=10, timeout=0.5)
    assert all(isinstance(m.body, Job) for m in messages)
    return [m.body.value for m in messages]


def whoami(c: ActionContext) -> str:
    assert c.conn is not None
    params: Params = c.conn.params
    return params.user


def pair(c: ActionContext, a: Item, b: Item | None = None) -> list[Item]:
    return [a] if b is None else [a, b]


tracker = actor(
    input=Setup,
    create_state=create_state,
    conn_params=Params,
    events={"progress": event(Progress)},
    queues={"jobs": queue(Job)},
    actions={
        "add": add,
        "progress": progress,
        "state": state,
        "corrupt": corrupt,
        "drain": drain,
        "whoami": whoami,
        "pair": pair,
    },
)


@dataclasses.dataclass
class Counts:
    hits: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


class Note(TypedDict):
    text: str
    stars: int


def hit(c: ActionContext, note: Note) -> Counts:
    c.state.hits += note["stars"]
    c.state.tags.append(note["text"])
    return c.state


def snapshot(c: ActionContext) -> Any:
    return c.state


# A dataclass state (its type is the schema) with TypedDict arguments.
notes = actor(state=Counts(), actions={"hit": hit, "snapshot": snapshot})

registry = setup(use={"tracker": tracker, "notes": notes})

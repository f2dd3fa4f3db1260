"""A registry of the corners of ``perdure types``: what cannot be typed, names that cannot
be attributes or that collide, nested groups, schemas that can and cannot be written."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal, NewType

from pydantic import BaseModel
from typing_extensions import TypedDict

from perdure import ActionContext, actor, event, queue, setup, workflow

if TYPE_CHECKING:  # not there at run time: the result's type is still found
    from perdure import ActorContext
Cents = NewType("Cents", int)


class Item(BaseModel):
    name: str


class Setup(TypedDict):
    owner: str


def echo(c: ActionContext, value: str, times: int = 1, *, loud: bool = False) -> str:
    return value * times


def deep(c: ActionContext) -> int:
    return 3


def hidden(c: ActorContext) -> Item:
    return Item(name="hidden")


def liar(c: ActionContext) -> int:
    return "not a number"  # type: ignore[return-value]  # the typed client refuses it


def _made() -> Any:
    def inner(c: ActionContext, value: int) -> int:
        return value

    return inner


class Methods:
    def bound(self, c: ActionContext) -> str:
        return "bound"


def _partial_target(prefix: str, c: ActionContext, value: str) -> str:
    return prefix + value


corners = actor(
    events={},
    queues={
        "items": queue(list[Item]),
        "maybe": queue(int | None),
        "choice": queue(Literal["a", "b"]),
        "money": queue(Cents),
    },
    actions={
        "echo": echo,
        "liar": liar,
        "hidden": hidden,
        "closure": _made(),
        "bound": Methods().bound,
        "partial": functools.partial(_partial_target, ">"),
        "get-state": lambda c: "state",
        "send": lambda c: "send",
        "on": lambda c: "on",
        "class": lambda c: "class",
        "workflow_result": lambda c: "result",
        "outer": {"inner": {"deep": deep}, "send": echo},
    },
)


async def run(ctx: Any) -> None:
    return None


registry = setup(
    use={
        "corners": corners,
        "my-counter": actor(actions={"echo": echo}, events={"a": event()}),
        "my_counter": actor(actions={"echo": echo}, input=Setup),
        "2fa": actor(actions={}),
        "close": actor(actions={"echo": echo}),
        "flow": workflow(run=run, queues={"jobs": queue(Item), "more": queue(Item)}),
    }
)

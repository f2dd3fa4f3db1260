"""The sample app of the typed clients: typed and untyped actions, a model argument and
result, a nested action, an action named like a handle method, a typed queue, a workflow
with an output, and an actor that calls another through the typed in-process client."""

from __future__ import annotations

from pydantic import BaseModel
from typing_extensions import TypedDict

from perdure import ActionContext, WorkflowContext, actor, event, queue, setup, workflow
from tests.typing_sample.app_types import AppClient


class Item(BaseModel):
    name: str
    qty: int


class Job(TypedDict):
    value: int


class Owner(BaseModel):
    name: str


def increment(c: ActionContext, by: int = 1) -> int:
    count: int = c.state["count"] + by
    c.state["count"] = count
    c.broadcast("changed", count)
    return count


async def add(c: ActionContext, item: Item) -> list[Item]:
    c.state["items"].append(item.model_dump())
    # Stored, and sent, in their plain form: the typed client makes Items of them again.
    return [Item.model_validate(plain) for plain in c.state["items"]]


def rename(c: ActionContext, name: str, loud: bool = False) -> str:
    c.state["name"] = name.upper() if loud else name
    return str(c.state["name"])


def owner(c: ActionContext) -> Owner | None:
    return Owner(name=c.state["name"]) if c.state["name"] else None


counter = actor(
    state={"count": 0, "items": [], "name": ""},
    events={"changed": event()},
    actions={
        "increment": increment,
        "add": add,
        "owner": owner,
        "count": lambda c: c.state["count"],  # a lambda: untyped, works as ever
        "profile": {"rename": rename},  # nested: handle.profile.rename(...)
        "send": lambda c, text: f"sent {text}",  # named like a handle method
    },
)


async def relay(c: ActionContext, key: str, by: int) -> int:
    # Actor to actor, typed: the in-process client wrapped like any other.
    client = AppClient(c.client())
    return await client.counter.get_or_create(key).increment(by)


relayer = actor(actions={"relay": relay})


async def run_jobs(ctx: WorkflowContext) -> int:
    total = 0
    for index in range(2):
        message = await ctx.queue.next(f"job-{index}")
        job: Job = message.body
        total += job["value"]
    return total


jobs = workflow(
    input=Owner,
    queues={"jobs": queue(Job)},
    run=run_jobs,
    actions={"state": lambda c: c.state},
    state={"owner": None},
    on_create=lambda c, input: c.state.update(owner=input.name),
)


registry = setup(use={"counter": counter, "relayer": relayer, "jobs": jobs})

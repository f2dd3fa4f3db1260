"""The workflows of the ``perdure check`` tests: the code that ran, and the code to deploy.

``old`` is what ``perdure serve`` ran to fill the store. Every other registry here is a
version of the code "about to be deployed" that ``perdure check`` judges:

- ``same``: unchanged;
- ``renamed``: step ``b`` is now ``b2``;
- ``removed``: the loop body no longer has step ``note``;
- ``reordered``: step ``c`` now comes before the sleep ``nap``;
- ``mid_removed``: step ``mid`` (between the loop and the sleep) removed;
- ``after_frontier``: changed only past every stored workflow's frontier (``c`` renamed,
  a step ``d`` added);
- ``broken``: raises outside any step after ``b`` (a failure of another kind);
- ``finished_changed``: only ``quick`` changed (its workflows have all finished);
- ``hangs``: awaits something other than a ctx primitive after ``b`` (never ends);
- ``gone``: the actor type ``legacy`` is no longer in the registry;
- ``rejects_otherwise``: ``order`` (whose stored run failed by raising, after its
  compensation) now raises another error.

Every step body appends ``<version> <location>`` to ``runs-<key>`` in the directory named
by ``PERDURE_CHECK_DIR``: a test reads there which bodies ran, and the check must add
nothing.

Child workflows have registries of their own (``family_old`` ran; ``family_same`` is
unchanged, ``family_renamed`` starts its first child at another location): a ``family``
parent starts a ``kid`` that completes (or, with ``hold``, waits for a ``go`` message)
and one that fails, waits for both (catching the failure, unless its input says not to)
and ends with a step.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from perdure import Loop, StepContext, WorkflowContext, actor, setup, workflow
from perdure import queue as queue_definition
from perdure.errors import ChildWorkflowFailed
from perdure.registry import Registry
from perdure.workflows import CriticalError

DIRECTORY_VARIABLE = "PERDURE_CHECK_DIR"
Body = Callable[[WorkflowContext], Awaitable[Any]]


def _marker(version: str) -> Callable[[StepContext], str]:
    def mark(step: StepContext) -> str:
        path = Path(os.environ[DIRECTORY_VARIABLE]) / f"runs-{step.key[0]}"
        with path.open("a") as runs:
            runs.write(f"{version} {step.location}\n")
        return step.location

    return mark


def _job(
    version: str,
    *,
    first: str = "b",
    note: bool = True,
    c_first: bool = False,
    c_name: str = "c",
    extra: bool = False,
    broken: bool = False,
    mid: bool = True,
    hangs: bool = False,
) -> Body:
    mark = _marker(version)

    async def iteration(ctx: WorkflowContext) -> Any:
        await ctx.step("work", mark)
        if note:
            await ctx.step("note", mark)
        message = await ctx.queue.next("msg", names="go")
        return Loop.break_(None) if message.body == "stop" else None

    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("a", mark)
        await ctx.step(first, mark)
        if broken:
            raise RuntimeError("the new code has a bug")
        if hangs:
            await asyncio.sleep(3600)
        await ctx.loop("loop", iteration)
        if mid:
            await ctx.step("mid", mark)
        if c_first:
            await ctx.step(c_name, mark)
        await ctx.sleep("nap", 3600)
        if not c_first:
            await ctx.step(c_name, mark)
        if extra:
            await ctx.step("d", mark)
        return "done"

    return run


def _quick(version: str, second: str = "b") -> Body:
    mark = _marker(version)

    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("a", mark)
        await ctx.step(second, mark)
        return "done"

    return run


def _legacy(version: str) -> Body:
    mark = _marker(version)

    async def run(ctx: WorkflowContext) -> Any:
        await ctx.step("start", mark)
        return (await ctx.queue.next("wait", names="go")).body

    return run


def _order(version: str, reason: str = "order rejected") -> Body:
    """Compensate, then fail: a step with a rollback, then a raise outside any step."""
    mark = _marker(version)

    def undo(step: StepContext, _output: Any) -> None:
        mark(step)  # marks ``<version> reserve`` a second time

    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", mark, rollback=undo)
        raise ValueError(reason)

    return run


def _registry(job: Body, quick: Body, legacy: Body | None, order: Body | None = None) -> Registry:
    use = {
        "job": workflow(
            state={}, queues={"go": queue_definition()}, run=job, actions={"ping": lambda c: "pong"}
        ),
        "quick": workflow(state={}, run=quick, actions={"ping": lambda c: "pong"}),
        "counter": actor(state={"count": 1}, actions={"ping": lambda c: "pong"}),
        "order": workflow(state={}, run=order or _order("B"), actions={"ping": lambda c: "pong"}),
    }
    if legacy is not None:
        use["legacy"] = workflow(
            state={},
            queues={"go": queue_definition()},
            run=legacy,
            actions={"ping": lambda c: "pong"},
        )
    return setup(use=use)


old = _registry(_job("A"), _quick("A"), _legacy("A"), _order("A"))
same = _registry(_job("B"), _quick("B"), _legacy("B"))
renamed = _registry(_job("B", first="b2"), _quick("B"), _legacy("B"))
removed = _registry(_job("B", note=False), _quick("B"), _legacy("B"))
reordered = _registry(_job("B", c_first=True), _quick("B"), _legacy("B"))
mid_removed = _registry(_job("B", mid=False), _quick("B"), _legacy("B"))
after_frontier = _registry(_job("B", c_name="c2", extra=True), _quick("B"), _legacy("B"))
broken = _registry(_job("B", broken=True), _quick("B"), _legacy("B"))
finished_changed = _registry(_job("B"), _quick("B", second="b2"), _legacy("B"))
hangs = _registry(_job("B", hangs=True), _quick("B"), _legacy("B"))
gone = _registry(_job("B"), _quick("B"), None)
rejects_otherwise = _registry(_job("B"), _quick("B"), _legacy("B"), _order("B", "no seats left"))


def _family(version: str, first: str = "ok") -> Body:
    mark = _marker(version)

    async def run(ctx: WorkflowContext) -> str:
        plan = ctx.input or {}
        ok = await ctx.start_child(first, "kid", input={"hold": bool(plan.get("hold"))})
        bad = await ctx.start_child("bad", "kid", input={"fail": True})
        output = str(await ctx.wait_child(f"{first}-done", ok))
        try:
            await ctx.wait_child("bad-done", bad)
        except ChildWorkflowFailed as failed:
            if not plan.get("catch", True):
                raise
            output = f"{output}, then {failed.error['message']}"
        await ctx.step("after", mark)
        return output

    return run


def _kid(version: str) -> Body:
    mark = _marker(version)

    async def run(ctx: WorkflowContext) -> str:
        plan = ctx.input or {}
        if plan.get("hold"):
            await ctx.queue.next("go", names="go")
        await ctx.step("work", mark)
        if plan.get("fail"):
            await ctx.step("decline", _decline)
        return "kid done"

    return run


def _decline(step: StepContext) -> None:
    raise CriticalError("card declined")


def _family_registry(family: Body, kid: Body) -> Registry:
    return setup(
        use={
            "family": workflow(state={}, run=family, actions={"ping": lambda c: "pong"}),
            "kid": workflow(state={}, queues={"go": queue_definition()}, run=kid),
        }
    )


family_old = _family_registry(_family("A"), _kid("A"))
family_same = _family_registry(_family("B"), _kid("B"))
family_renamed = _family_registry(_family("B", first="ok2"), _kid("B"))

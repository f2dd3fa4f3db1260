"""Three versions of one workflow app, for the version-aware placement tests (issue 33).

``job`` runs ``prepare``, ``charge``, waits for a ``go`` message, then ``finish``. Each
step appends ``{step, code, pid}`` to the state's trail: which code ran it, in which
process.

- ``registry_v1``: the first version.
- ``registry_v2``: the same steps with their internals rewritten (another computation,
  another helper, the same names): its history replays, so a v1 run may continue on it.
- ``registry_v3``: a step ``audit`` inserted between ``prepare`` and ``charge``: a v1
  run past ``charge`` diverges on it (``perdure check`` says so), so it must wait for
  a v1 node.

Each registry's default code version (a digest of its definitions) differs from the
others', so the nodes need no ``--code-version``. The actor sleeps 0.3 s after it goes
idle, so that each request wakes it again and placement decides anew.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from perdure import StepContext, WorkflowContext, queue, setup, workflow

Run = Callable[[WorkflowContext], Awaitable[None]]


def _mark(step: StepContext, name: str, code: str) -> None:
    step.state["trail"] = [*step.state["trail"], {"step": name, "code": code, "pid": os.getpid()}]


async def _run_v1(ctx: WorkflowContext) -> None:
    await ctx.step("prepare", lambda s: _mark(s, "prepare", "v1"))
    await ctx.step("charge", lambda s: _mark(s, "charge", "v1"))
    await ctx.queue.next("go", names="go")
    await ctx.step("finish", lambda s: _mark(s, "finish", "v1"))


def _note(step: StepContext, label: str) -> None:
    """v2's steps: another helper, another way to build the same record."""
    entry = dict(step=label, code="v2", pid=os.getpid())
    step.state["trail"] = step.state["trail"] + [entry]


async def _run_v2(ctx: WorkflowContext) -> None:
    await ctx.step("prepare", lambda s: _note(s, "prepare"))
    await ctx.step("charge", lambda s: _note(s, "charge"))
    await ctx.queue.next("go", names="go")
    await ctx.step("finish", lambda s: _note(s, "finish"))


async def _run_v3(ctx: WorkflowContext) -> None:
    await ctx.step("prepare", lambda s: _mark(s, "prepare", "v3"))
    await ctx.step("audit", lambda s: _mark(s, "audit", "v3"))
    await ctx.step("charge", lambda s: _mark(s, "charge", "v3"))
    await ctx.queue.next("go", names="go")
    await ctx.step("finish", lambda s: _mark(s, "finish", "v3"))


def _job(run: Run) -> Any:
    return workflow(
        state={"trail": []},
        queues={"go": queue()},
        run=run,
        actions={"trail": lambda c: c.state["trail"]},
        options={"sleep_timeout": 0.3},
    )


registry_v1 = setup(use={"job": _job(_run_v1)})
registry_v2 = setup(use={"job": _job(_run_v2)})
registry_v3 = setup(use={"job": _job(_run_v3)})

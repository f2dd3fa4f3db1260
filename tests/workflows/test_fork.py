"""Forking a workflow run from a step (docs/inspector.md, "Fork"): a new run replays the
history before the step and runs from it, with a new input (``ctx.input``) or, from a
receive, a new message; the old run is archived under ``~run/<n>/`` for the record. On a
real SQLite file and on PostgreSQL, across restarts; the plan alone too."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, setup, workflow
from perdure.definition import queue
from perdure.errors import RepairRefused, UnknownLocation
from perdure.runtime import Administer
from perdure.store.encoding import decode_value
from perdure.workflows.history import Entry
from perdure.workflows.repair import plan_fork

from .rig import Rig, eventually


async def _fork(rig: Rig, location: str, **given: Any) -> dict[str, Any]:
    assert rig.runtime is not None
    actor_id = await rig.handle("wf").resolve()
    status: dict[str, Any] = await rig.runtime.dispatch.ref(actor_id).administer(
        Administer("fork", location, given)
    )
    return status


def _stored(rig: Rig) -> dict[str, Any]:
    rows = rig.rows("SELECT location, entry FROM workflow_history")
    return {location: decode_value(bytes(entry)) for location, entry in rows}


def _greeter(log: list[str]) -> Any:
    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("fetch", lambda s: log.append("fetch") or "data")
        who = ctx.input["who"]  # outside a step: the run's input

        def greet(step: StepContext) -> str:
            log.append(f"greet {who}")
            return f"hello {who}"

        return str(await ctx.step("greet", greet))

    return run


async def test_a_fork_with_a_new_input_runs_from_the_step_and_archives_the_old_run(
    rig: Rig,
) -> None:
    log: list[str] = []
    registry = setup(use={"wf": workflow(run=_greeter(log))})
    await rig.start(registry)
    handle = await rig.runtime.client().wf.create("k", input={"who": "ann"})  # type: ignore[union-attr]
    assert await handle.workflow_result(timeout=5) == "hello ann"
    status = await _fork(rig, "greet", input={"who": "bob"})
    assert status["run"] == 2
    assert await handle.workflow_result(timeout=5) == "hello bob"
    assert log == ["fetch", "greet ann", "greet bob"]  # `fetch` was kept, not run again
    stored = _stored(rig)
    assert stored["~run/1/~meta"]["status"] == "completed"
    assert stored["~run/1/~meta"]["output"] == "hello ann"
    assert stored["~run/1/greet"]["d"]["o"] == "hello ann"
    assert stored["~meta"]["run"] == 2
    assert stored["~meta"]["input"] == {"who": "bob"}
    assert stored["~meta"]["forkedFrom"] == {"run": 1, "from": "greet"}
    # A restart replays the new run with the same input; a second fork archives run 2.
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.2)
    assert log == ["fetch", "greet ann", "greet bob"]
    assert (await rig.handle("wf").workflow_status())["output"] == "hello bob"
    await _fork(rig, "fetch")  # no input given: the run keeps bob
    assert await rig.handle("wf").workflow_result(timeout=5) == "hello bob"
    stored = _stored(rig)
    assert stored["~run/2/~meta"]["output"] == "hello bob"
    assert stored["~meta"]["run"] == 3
    assert log[-2:] == ["fetch", "greet bob"]


async def test_a_fork_from_a_receive_gives_it_the_new_message(rig: Rig) -> None:
    async def run(ctx: WorkflowContext) -> int:
        message = await ctx.queue.next("take", names="jobs")
        return int(await ctx.step("double", lambda s: message.body["n"] * 2))

    await rig.start(setup(use={"wf": workflow(run=run, queues={"jobs": queue()})}))
    handle = rig.handle("wf")
    await handle.send("jobs", {"n": 1})
    assert await handle.workflow_result(timeout=5) == 2
    status = await _fork(rig, "take", message={"n": 21})
    assert status["run"] == 2
    assert await rig.handle("wf").workflow_result(timeout=5) == 42
    assert rig.rows("SELECT id FROM queue_messages") == []  # the old message was not put back
    assert _stored(rig)["~run/1/take"]["d"]["m"][0]["body"] == {"n": 1}
    with pytest.raises(RepairRefused) as refused:
        await _fork(rig, "double", message={"n": 3})
    assert refused.value.code == "fork_unsupported"


async def test_a_fork_of_a_cancelled_run_is_a_new_run(rig: Rig) -> None:
    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.sleep("nap", float(ctx.input["nap"]))
        return "woke"

    await rig.start(setup(use={"wf": workflow(run=run)}))
    handle = await rig.runtime.client().wf.create("k", input={"nap": 3600})  # type: ignore[union-attr]
    await eventually(lambda: _has_entry(rig, "nap"))
    await handle.cancel_workflow("changed my mind")
    await eventually(lambda: _status_is(rig, "cancelled"))
    await _fork(rig, "nap", input={"nap": 0})
    assert await handle.workflow_result(timeout=5) == "woke"
    assert _stored(rig)["~run/1/~meta"]["status"] == "cancelled"


async def _has_entry(rig: Rig, location: str) -> bool:
    return location in _stored(rig)


async def _status_is(rig: Rig, status: str) -> bool:
    return _stored(rig).get("~meta", {}).get("status") == status


# ------------------------------------------------------------------- the plan


def test_the_plan_archives_every_entry_and_starts_the_next_run() -> None:
    meta = {"status": "failed", "error": {"m": 1}, "cancel": {"reason": "x"}, "paused": True}
    entries = {
        "a": Entry("step", "completed", 1, {"o": 1}),
        "b": Entry("step", "exhausted", 2, {"e": {"message": "no"}}),
    }
    plan = plan_fork(meta, entries, "b", {"input": 5})
    assert plan.deletes == ["b"]
    assert set(plan.archive) == {"~run/1/a", "~run/1/b", "~run/1/~meta"}
    assert plan.archive["~run/1/~meta"] == meta
    assert plan.meta == {
        "status": "running",
        "error": None,
        "output": None,
        "run": 2,
        "forkedFrom": {"run": 1, "from": "b"},
        "input": 5,
    }
    with pytest.raises(UnknownLocation):
        plan_fork(meta, entries, "nowhere", {})

"""Cancel, pause and the pushed result of a workflow run (perdure.workflows.control),
on a real SQLite file and on PostgreSQL, across restarts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, setup, workflow
from perdure.definition import queue
from perdure.errors import WorkflowCancelled, WorkflowFailed, WorkflowNotRunning
from perdure.workflows import CriticalError

from .rig import Rig, eventually


async def _status(rig: Rig) -> str:
    return str((await rig.handle("wf").workflow_status())["status"])


def _saga(log: list[str]) -> Any:
    """Reserve and charge (each with a compensation), then a day's sleep, then ship."""

    async def run(ctx: WorkflowContext) -> str:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: log.append(f"undo {out}"))
        await ctx.step("charge", lambda s: "c1", rollback=lambda s, out: log.append(f"undo {out}"))
        try:
            await ctx.sleep("cool-off", 86400)
            await ctx.step("ship", lambda s: log.append("shipped"))
        finally:
            log.append("finally")
        return "done"

    return run


async def test_a_cancel_lands_in_a_sleep_compensates_once_and_ends_cancelled(rig: Rig) -> None:
    log: list[str] = []
    await rig.start(setup(use={"wf": workflow(run=_saga(log))}))
    handle = rig.handle("wf")
    await rig.wake("wf")
    await eventually(lambda: _sleeping(rig))
    status = await handle.cancel_workflow("customer asked")
    assert status["status"] in ("running", "cancelled")
    await eventually(lambda: _is(rig, "cancelled"))
    assert log == ["finally", "undo c1", "undo r1"]
    with pytest.raises(WorkflowCancelled) as raised:
        await handle.workflow_result(timeout=5)
    assert raised.value.reason == "customer asked"
    assert raised.value.identifier == "workflow.cancelled"
    # Ended for good: a restart neither replays it nor compensates again.
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.2)
    assert log == ["finally", "undo c1", "undo r1"]
    assert await _status(rig) == "cancelled"
    with pytest.raises(WorkflowNotRunning) as refused:
        await rig.handle("wf").cancel_workflow()
    assert refused.value.status == 409


async def test_a_cancel_waits_for_the_step_in_progress_and_lands_at_the_next(rig: Rig) -> None:
    log: list[str] = []
    started = asyncio.Event()

    async def slow(step: StepContext) -> str:
        started.set()
        await asyncio.sleep(0.3)
        log.append("slow done")
        return "ok"

    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("slow", slow)
        try:
            await ctx.step("next", lambda s: log.append("next ran"))
        except WorkflowCancelled:
            # Cleanup after the cancel landed: primitives work again, and are recorded.
            await ctx.step("cleanup", lambda s: log.append("cleaned up"))
            raise

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    await asyncio.wait_for(started.wait(), 5)
    await rig.handle("wf").cancel_workflow()
    await eventually(lambda: _is(rig, "cancelled"))
    assert log == ["slow done", "cleaned up"]
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.2)
    assert log == ["slow done", "cleaned up"]  # nothing ran twice


async def test_a_cancel_recorded_before_a_crash_lands_after_it(rig: Rig) -> None:
    """The request is durable: a run that had not reached a live point when the
    process stopped gets the cancel on its next wake."""
    log: list[str] = []
    await rig.start(setup(use={"wf": workflow(run=_saga(log))}))
    await rig.wake("wf")
    await eventually(lambda: _sleeping(rig))
    # Record the cancel without letting the live run see it, as if the process died
    # between the commit and the signal.
    runtime = rig.runtime
    assert runtime is not None
    instance = await runtime.instance(await rig.handle("wf").resolve())
    runner = instance.workflow
    assert runner is not None
    runner.set_meta(cancel={"reason": "late", "requestedAt": 0})
    await runner.commit()
    await rig.restart()  # the stop evicts the sleeping run: its `finally` runs then too
    await rig.wake("wf")
    await eventually(lambda: _is(rig, "cancelled"))
    assert log == ["finally", "finally", "undo c1", "undo r1"]


async def test_pause_holds_before_the_next_step_across_a_restart(rig: Rig) -> None:
    log: list[str] = []
    gate = asyncio.Event()

    async def first(step: StepContext) -> None:
        log.append("first")
        await gate.wait()

    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("first", first)
        await ctx.step("second", lambda s: log.append("second"))
        return "finished"

    await rig.start(setup(use={"wf": workflow(run=run)}))
    handle = rig.handle("wf")
    await rig.wake("wf")
    await eventually(lambda: _has(log, ["first"]))
    assert (await handle.pause_workflow())["status"] == "paused"
    gate.set()
    await asyncio.sleep(0.3)
    assert log == ["first"]  # held before "second"
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.3)
    assert log == ["first"]
    assert await _status(rig) == "paused"
    assert (await rig.handle("wf").resume_workflow())["status"] == "running"
    assert await rig.handle("wf").workflow_result(timeout=5) == "finished"
    assert log == ["first", "second"]
    with pytest.raises(WorkflowNotRunning):
        await rig.handle("wf").resume_workflow()


async def test_many_waiters_get_the_result_when_the_run_ends(rig: Rig) -> None:
    release = asyncio.Event()

    async def wait_for_release(step: StepContext) -> int:
        await release.wait()
        return 42

    async def run(ctx: WorkflowContext) -> int:
        return int(await ctx.step("work", wait_for_release, timeout=30))

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    handle = rig.handle("wf")
    waiters = [asyncio.ensure_future(handle.workflow_result(timeout=10)) for _ in range(50)]
    await asyncio.sleep(0.2)
    assert not any(waiter.done() for waiter in waiters)
    release.set()
    assert await asyncio.gather(*waiters) == [42] * 50
    assert rig.runtime is not None
    assert len(rig.runtime.outcomes) == 0  # every waiter was answered and forgotten


async def test_the_result_of_a_failed_run_raises_its_error_and_a_timeout_is_timeout(
    rig: Rig,
) -> None:
    def fail(step: StepContext) -> None:
        raise CriticalError("out of stock")

    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("fail", fail)

    never = asyncio.Event()

    async def stuck(ctx: WorkflowContext) -> None:
        await ctx.step("stuck", lambda s: never.wait(), timeout=60)

    await rig.start(setup(use={"wf": workflow(run=run), "stuck": workflow(run=stuck)}))
    with pytest.raises(WorkflowFailed) as failed:
        await rig.handle("wf").workflow_result(timeout=5)
    assert "out of stock" in failed.value.message
    try:
        with pytest.raises(TimeoutError):
            await rig.handle("stuck").workflow_result(timeout=0.3)
    finally:
        never.set()  # let the step finish: the runtime's stop waits for it


async def test_a_sender_waiting_on_a_taken_message_gets_the_cancel(rig: Rig) -> None:
    async def run(ctx: WorkflowContext) -> None:
        message = await ctx.queue.next("take", completable=True)
        await ctx.sleep("then", 3600)
        await message.complete("never")

    await rig.start(setup(use={"wf": workflow(run=run, queues={"jobs": queue()})}))
    handle = rig.handle("wf")
    sending = asyncio.ensure_future(handle.send("jobs", {"n": 1}, wait=True, timeout=10))
    await eventually(lambda: _sleeping(rig))
    await handle.cancel_workflow("stop")
    with pytest.raises(WorkflowCancelled):
        await asyncio.wait_for(sending, 5)
    await eventually(lambda: _is(rig, "cancelled"))


async def _is(rig: Rig, status: str) -> bool:
    return await _status(rig) == status


async def _has(log: list[str], expected: list[str]) -> bool:
    return log == expected


async def _sleeping(rig: Rig) -> bool:
    """The run waits (in a sleep or a receive) and its history says so."""
    rows = rig.rows("SELECT location FROM workflow_history")
    return any(location in ("cool-off", "then") for (location,) in rows)


async def test_a_cancel_in_one_branch_of_a_join_stops_the_others(rig: Rig) -> None:
    log: list[str] = []
    started = asyncio.Event()

    async def long_step(step: StepContext) -> None:
        started.set()
        await asyncio.sleep(30)
        log.append("long step finished")

    async def run(ctx: WorkflowContext) -> None:
        await ctx.join(
            "both",
            {
                "waiting": lambda branch: branch.sleep("nap", 3600),
                "working": lambda branch: branch.step("long", long_step, timeout=60),
            },
        )

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    await asyncio.wait_for(started.wait(), 5)
    await rig.handle("wf").cancel_workflow()
    with pytest.raises(WorkflowCancelled):
        await rig.handle("wf").workflow_result(timeout=5)  # not the long step's 30 s
    assert log == []


def test_a_held_run_shows_waiting_for_version_until_it_ends() -> None:
    """Issue 33: a run held for its code version shows so, a pause shows first, and an
    ended run shows its end whatever its record still says."""
    from perdure.workflows.control import shown_status

    held = {"status": "running", "waitingForVersion": "v1"}
    assert shown_status(held) == "waiting_for_version"
    assert shown_status({**held, "paused": True}) == "paused"
    assert shown_status({**held, "status": "completed"}) == "completed"
    assert shown_status({"status": "running"}) == "running"

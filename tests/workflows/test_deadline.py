"""A workflow run's deadline (``workflow(timeout=...)``, docs/workflow-control.md):
counted from the run's start (kept in the status record, so restarts do not reset it),
durable (the alarm wakes a sleeping actor for it), landing like a cancel and ending the
run ``failed`` with ``workflow.timed_out``. On a real SQLite file and on PostgreSQL,
across restarts, and on the test kit's manual clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

from perdure import ActorOptions, StepContext, WorkflowContext, setup, workflow
from perdure.errors import DefinitionError, WorkflowFailed, WorkflowTimedOut
from perdure.runtime import SystemClock
from perdure.store.encoding import decode_value
from perdure.testing import ActorTestEnv
from perdure.workflows.history import Entry
from perdure.workflows.repair import plan_replay

from .rig import Rig, eventually

DAY = 86400


async def _noop(ctx: WorkflowContext) -> None:
    return None


def _saga(log: list[str], seen: list[BaseException]) -> Any:
    """Reserve (with a compensation), then a day's sleep, then ship."""

    async def run(ctx: WorkflowContext) -> str:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: log.append(f"undo {out}"))
        try:
            await ctx.sleep("cool-off", DAY)
            await ctx.step("ship", lambda s: log.append("shipped"))
        except BaseException as exc:
            seen.append(exc)
            raise
        finally:
            log.append("finally")
        return "done"

    return run


def _meta(rig: Rig) -> dict[str, Any]:
    """The status record as stored (read without waking the actor)."""
    rows = rig.rows("SELECT entry FROM workflow_history WHERE location = ?", "~meta")
    if not rows:
        return {}
    value: dict[str, Any] = decode_value(bytes(rows[0][0]))
    return value


async def _ended_failed(rig: Rig) -> bool:
    return _meta(rig).get("status") == "failed"


async def test_the_deadline_lands_in_a_sleep_compensates_and_ends_failed_timed_out(
    rig: Rig,
) -> None:
    log: list[str] = []
    seen: list[BaseException] = []
    await rig.start(setup(use={"wf": workflow(run=_saga(log, seen), timeout=0.5)}))
    await rig.wake("wf")
    await eventually(lambda: _ended_failed(rig), timeout=10)
    assert log == ["finally", "undo r1"]
    assert [type(exc) for exc in seen] == [WorkflowTimedOut]
    meta = _meta(rig)
    assert meta["error"]["code"] == "timed_out"
    assert meta["error"]["group"] == "workflow"
    assert meta["error"]["metadata"]["timeout"] == 0.5
    assert meta["deadlineAt"] == meta["startedAt"] + 500
    with pytest.raises(WorkflowFailed) as failed:
        await rig.handle("wf").workflow_result(timeout=5)
    assert failed.value.error["code"] == "timed_out"
    # Ended for good: a restart neither replays it nor compensates again.
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.3)
    assert log == ["finally", "undo r1"]
    assert (await rig.handle("wf").workflow_status())["status"] == "failed"


async def test_a_restart_keeps_the_start_and_the_alarm_wakes_the_sleeping_actor(
    rig: Rig,
) -> None:
    log: list[str] = []
    seen: list[BaseException] = []
    registry = setup(use={"wf": workflow(run=_saga(log, seen), timeout=dt.timedelta(seconds=2))})
    await rig.start(registry)
    await rig.wake("wf")
    await eventually(lambda: _sleeping_in(rig, "cool-off"))
    started = _meta(rig)["startedAt"]
    await rig.restart()  # the run is evicted; the wake replays it
    await rig.wake("wf")
    await asyncio.sleep(0.2)
    assert _meta(rig)["startedAt"] == started  # not reset by the restart
    await rig.stop()  # asleep, with its deadline as its alarm
    assert _wake_at(rig) == started + 2000
    log.clear()
    await asyncio.sleep(max(0.0, (started + 2100) / 1000 - _now()))
    await rig.start()  # nobody calls it: the alarm scheduler wakes it for the deadline
    await eventually(lambda: _ended_failed(rig), timeout=10)
    assert _meta(rig)["error"]["code"] == "timed_out"
    assert log == ["finally", "undo r1"]


class _SlowWallClock(SystemClock):
    """A wall clock that runs 10 % slower than the event loop's timer: every timer of the
    loop ends before this clock has moved as far (uvloop's timers end up to a millisecond
    or more early in the same way, now and then)."""

    def __init__(self) -> None:
        self._start = time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        elapsed = time.time_ns() // 1_000_000 - self._start
        return self._start + elapsed * 9 // 10


async def test_a_timer_that_ends_before_the_wall_clock_does_not_lose_the_deadline(
    rig: Rig,
) -> None:
    """The run sleeps a day; its deadline's timer ends early by the wall clock: the run
    looks again for what is left, and is not left sleeping past its deadline."""
    log: list[str] = []
    seen: list[BaseException] = []
    rig.clock = _SlowWallClock()
    await rig.start(setup(use={"wf": workflow(run=_saga(log, seen), timeout=0.5)}))
    await rig.wake("wf")
    await eventually(lambda: _ended_failed(rig), timeout=10)
    assert _meta(rig)["error"]["code"] == "timed_out"
    assert log == ["finally", "undo r1"]


async def test_a_step_in_progress_finishes_and_the_deadline_lands_before_the_next(
    rig: Rig,
) -> None:
    log: list[str] = []

    async def slow(step: StepContext) -> str:
        await asyncio.sleep(0.8)
        log.append("slow done")
        return "ok"

    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("slow", slow)
        await ctx.step("next", lambda s: log.append("next ran"))

    await rig.start(setup(use={"wf": workflow(run=run, options={"workflow_timeout": 0.3})}))
    await rig.wake("wf")
    with pytest.raises(WorkflowFailed) as failed:
        await rig.handle("wf").workflow_result(timeout=10)
    assert failed.value.error["code"] == "timed_out"
    assert log == ["slow done"]  # the step in progress finished; the next never ran


async def test_a_run_that_ends_in_time_is_not_touched(rig: Rig) -> None:
    async def run(ctx: WorkflowContext) -> int:
        return int(await ctx.step("quick", lambda s: 7))

    await rig.start(setup(use={"wf": workflow(run=run, timeout=5)}))
    assert await rig.handle("wf").workflow_result(timeout=5) == 7
    meta = _meta(rig)
    assert meta["status"] == "completed"
    assert "cancel" not in meta
    assert _wake_at(rig) is None


async def _sleeping_in(rig: Rig, location: str) -> bool:
    rows = rig.rows("SELECT location FROM workflow_history")
    return any(found == location for (found,) in rows)


def _wake_at(rig: Rig) -> int | None:
    rows = rig.rows("SELECT wake_at FROM actors")
    return None if not rows or rows[0][0] is None else int(rows[0][0])


def _now() -> float:
    return dt.datetime.now(dt.UTC).timestamp()


# ---------------------------------------------------------------- manual clock

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


async def _waits_a_day(ctx: WorkflowContext) -> None:
    await ctx.step("first", lambda s: None)
    await ctx.sleep("nap", DAY)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_hibernated_run_is_woken_at_its_deadline(store: str) -> None:
    registry = setup(use={"wf": workflow(run=_waits_a_day, timeout=dt.timedelta(hours=1))})
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.wf.get_or_create("k")
        actor_id = await handle.resolve()
        await env.advance(60)
        assert not env.runtime.is_live(actor_id)  # asleep in its day's nap
        stored = await env.store.get_actor(actor_id)
        assert stored is not None
        assert stored.wake_at == int(START.timestamp() * 1000) + 3600 * 1000
        await env.advance(3600 - 60 - 1)
        assert (await env.store.get_actor(actor_id)) is not None
        await env.advance(2)
        status = await handle.workflow_status()
        assert status["status"] == "failed"
        assert status["error"]["code"] == "timed_out"


# ---------------------------------------------------------------- definition


def test_timeout_is_the_workflow_timeout_option() -> None:
    registry = setup(
        use={
            "a": workflow(run=_noop, timeout=dt.timedelta(minutes=2)),
            "b": workflow(run=_noop, options={"workflow_timeout": 30}),
            "c": workflow(run=_noop, options=ActorOptions(sleep_timeout=5), timeout=9),
            "d": workflow(run=_noop),
        }
    )
    timeouts = {name: _definition(registry, name).options.workflow_timeout for name in "abcd"}
    assert timeouts == {"a": 120.0, "b": 30.0, "c": 9.0, "d": 0.0}


def test_timeout_given_twice_or_negative_is_refused() -> None:
    with pytest.raises(DefinitionError, match="not both"):
        workflow(run=_noop, timeout=5, options={"workflow_timeout": 5})
    with pytest.raises(DefinitionError, match="negative"):
        setup(use={"wf": workflow(run=_noop, timeout=-1)})


def test_a_repair_counts_the_deadline_afresh() -> None:
    meta = {
        "status": "failed",
        "startedAt": 1,
        "deadlineAt": 2,
        "cancel": {"reason": "deadline", "requestedAt": 2, "deadline": {"timeout": 0.001, "at": 2}},
    }
    entries = {"a": Entry("step", "completed", 1, {"o": 1})}
    plan = plan_replay(meta, entries, "a")
    assert plan.meta["status"] == "running"
    assert not {"startedAt", "deadlineAt", "cancel"} & set(plan.meta)
    # An operator's cancel stays (it is not the deadline's).
    kept = plan_replay({**meta, "cancel": {"reason": "stop"}}, entries, "a")
    assert kept.meta["cancel"] == {"reason": "stop"}


def _definition(registry: Any, name: str) -> Any:
    definition = registry.get(name)
    assert definition is not None
    return definition

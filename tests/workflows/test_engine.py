"""The workflow engine against a real SQLite file: replay, retries, control flow."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from perdure import Loop, StepContext, WorkflowContext, setup, workflow
from perdure.definition import queue
from perdure.errors import UserError
from perdure.workflows import CriticalError

from .rig import Rig, eventually


def status_of(rig: Rig, name: str = "wf") -> Any:
    return rig.handle(name).action("$workflow")


def counting_step(log: list[str], label: str, result: Any = None) -> Any:
    def run(step: StepContext) -> Any:
        log.append(label)
        return result

    return run


async def test_completed_steps_replay_without_running(rig: Rig) -> None:
    ran: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        first = await ctx.step("first", counting_step(ran, "first", 41))
        await ctx.step("second", lambda step: step.state.update(total=first + 1))
        await ctx.queue.next("wait-forever")

    defn = workflow(
        state={"total": 0}, queues={"q": queue()}, run=run, actions={"get": lambda c: c.state}
    )
    await rig.start(setup(use={"wf": defn}))
    await eventually(lambda: _total_is(rig, 42))
    await rig.restart()
    assert await rig.handle("wf").get() == {"total": 42}
    await asyncio.sleep(0.1)
    assert ran == ["first"]  # the second run replayed "first" from history
    assert (await status_of(rig))["status"] == "running"


async def _total_is(rig: Rig, value: int) -> bool:
    return (await rig.handle("wf").get())["total"] == value


def progress_registry(log: list[tuple[str, int]]) -> Any:
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop_ctx: WorkflowContext) -> None:
            message = await loop_ctx.queue.next("wait-job")
            value = message.body["value"]

            def apply(step: StepContext) -> None:
                log.append(("apply", value))
                step.state["sum"] += value
                step.state["count"] += 1
                step.broadcast("applied", value)

            await loop_ctx.step("apply", apply)

        await ctx.loop("jobs-loop", body)

    defn = workflow(
        state={"sum": 0, "count": 0},
        queues={"jobs": queue()},
        run=run,
        actions={"get": lambda c: c.state},
    )
    return setup(use={"wf": defn})


async def test_queue_jobs_are_applied_exactly_once_across_restarts(rig: Rig) -> None:
    log: list[tuple[str, int]] = []
    runtime = await rig.start(progress_registry(log))
    handle = rig.handle("wf")
    actor_id = await handle.resolve()
    for value in range(1, 31):
        await runtime.dispatch.ref(actor_id).send("jobs", {"value": value})
        if value % 10 == 0:
            runtime = await rig.restart()
    await eventually(lambda: _count_is(rig, 30))
    state = await rig.handle("wf").get()
    assert state == {"sum": sum(range(1, 31)), "count": 30}
    assert sorted(v for _, v in log) == list(range(1, 31))  # no step ran twice
    assert rig.rows("SELECT count(*) FROM queue_messages") == [(0,)]


def _stored_sum(rig: Rig) -> int:
    from perdure.store.encoding import decode_value

    state = rig.rows("SELECT state FROM actors")[0][0]
    return int(decode_value(bytes(state))["sum"])


async def _count_is(rig: Rig, value: int) -> bool:
    return (await rig.handle("wf").get())["count"] == value


async def test_events_leave_after_commit_and_are_not_replayed(rig: Rig) -> None:
    log: list[tuple[str, int]] = []
    runtime = await rig.start(progress_registry(log))
    handle = rig.handle("wf")
    conn = await handle.connect()
    seen: list[int] = []
    stored_when_seen: list[int] = []

    def on_applied(value: int) -> None:
        # Read the database as another process would, the moment the event arrives.
        seen.append(value)
        stored_when_seen.append(_stored_sum(rig))

    conn.on("applied", on_applied)
    actor_id = await handle.resolve()
    for value in (1, 2, 3):
        await runtime.dispatch.ref(actor_id).send("jobs", {"value": value})
    await eventually(lambda: _len_is(seen, 3))
    assert seen == [1, 2, 3]
    # Each event left only once its step was on disk: the stored sum already had it.
    assert [stored >= sum(seen[: i + 1]) for i, stored in enumerate(stored_when_seen)] == [True] * 3
    await conn.dispose()
    await rig.restart()
    conn = await rig.handle("wf").connect()
    again: list[int] = []
    conn.on("applied", again.append)
    await asyncio.sleep(0.2)
    assert again == []  # replay did not re-broadcast
    await conn.dispose()


async def test_divergence_is_reported_before_the_new_step_runs(rig: Rig) -> None:
    ran: list[str] = []

    def registry(second: str) -> Any:
        async def run(ctx: WorkflowContext) -> None:
            await ctx.step("a", counting_step(ran, "a"))
            await ctx.step(second, counting_step(ran, second))
            await ctx.queue.next("hold")

        return setup(use={"wf": workflow(queues={"q": queue()}, run=run)})

    await rig.start(registry("b"))
    await rig.wake("wf")
    await eventually(lambda: _ran(ran, ["a", "b"]))
    await rig.restart(registry("renamed"))
    await eventually(lambda: _status_is(rig, "failed"))
    status = await status_of(rig)
    assert status["error"]["code"] == "history_diverged"
    assert "`b`" in status["error"]["message"]
    assert "removed" in status["error"]["message"]
    assert ran == ["a", "b"]  # "renamed" never ran


async def _ran(log: list[str], expected: list[str]) -> bool:
    return log == expected


async def _status_is(rig: Rig, expected: str, name: str = "wf") -> bool:
    return (await status_of(rig, name))["status"] == expected


async def test_removed_keeps_an_old_history_valid(rig: Rig) -> None:
    ran: list[str] = []

    async def v1(ctx: WorkflowContext) -> None:
        await ctx.step("old", counting_step(ran, "old"))
        await ctx.step("kept", counting_step(ran, "kept"))
        await ctx.queue.next("hold")

    async def v2(ctx: WorkflowContext) -> None:
        await ctx.removed("old", "step")
        await ctx.step("kept", counting_step(ran, "kept"))
        await ctx.step("new", counting_step(ran, "new"))
        await ctx.queue.next("hold")

    await rig.start(setup(use={"wf": workflow(queues={"q": queue()}, run=v1)}))
    await rig.wake("wf")
    await eventually(lambda: _ran(ran, ["old", "kept"]))
    await rig.restart(setup(use={"wf": workflow(queues={"q": queue()}, run=v2)}))
    await rig.wake("wf")
    await eventually(lambda: _ran(ran, ["old", "kept", "new"]))
    assert (await status_of(rig))["status"] == "running"


async def test_get_version_branches_old_and_new_runs(rig: Rig) -> None:
    versions: dict[str, int] = {}

    async def v1(ctx: WorkflowContext) -> None:
        await ctx.step("a", lambda step: None)
        await ctx.queue.next("hold")

    async def v2(ctx: WorkflowContext) -> None:
        version = await ctx.get_version("a-change", 2)
        versions[ctx.key[0]] = version
        if version >= 2:
            await ctx.step("a2", lambda step: None)
        else:
            await ctx.step("a", lambda step: None)
        await ctx.queue.next("hold")

    await rig.start(setup(use={"wf": workflow(queues={"q": queue()}, run=v1)}))
    await rig.wake("wf", "old")
    await asyncio.sleep(0.2)
    await rig.restart(setup(use={"wf": workflow(queues={"q": queue()}, run=v2)}))
    await rig.wake("wf", "old")
    await rig.wake("wf", "new")
    await eventually(lambda: _has_keys(versions, {"old", "new"}))
    assert versions == {"old": 1, "new": 2}
    # Replays return the recorded version.
    versions.clear()
    await rig.restart()
    await rig.wake("wf", "old")
    await eventually(lambda: _has_keys(versions, {"old"}))
    assert versions["old"] == 1


async def _has_keys(mapping: dict[str, int], keys: set[str]) -> bool:
    return set(mapping) >= keys


async def test_failed_step_retries_with_backoff_and_reports(rig: Rig) -> None:
    attempts: list[float] = []
    events: list[dict[str, Any]] = []

    def flaky(step: StepContext) -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RuntimeError(f"boom {len(attempts)}")
        return "ok"

    async def run(ctx: WorkflowContext) -> str:
        return str(await ctx.step("flaky", flaky, retry_backoff_base=0.05))

    defn = workflow(run=run, on_error=lambda c, event: events.append(event))
    await rig.start(setup(use={"wf": defn}))
    await rig.wake("wf")
    await eventually(lambda: _status_is(rig, "completed"))
    assert len(attempts) == 3
    assert attempts[1] - attempts[0] >= 0.09  # 0.05 * 2^1
    assert attempts[2] - attempts[1] >= 0.19  # 0.05 * 2^2
    assert [e["step"]["willRetry"] for e in events] == [True, True]
    # rivetkit's retryDelay (ms) beside retryAt (issue 34, 7).
    assert [e["step"]["retryDelay"] for e in events] == [100, 200]
    assert (await status_of(rig))["output"] == "ok"


async def test_backoff_survives_a_restart(rig: Rig) -> None:
    attempts: list[int] = []

    def flaky(step: StepContext) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 2:
            raise RuntimeError("first attempt fails")
        return "done"

    async def run(ctx: WorkflowContext) -> Any:
        return await ctx.step("flaky", flaky, retry_backoff_base=0.4)

    defn = workflow(run=run)
    await rig.start(setup(use={"wf": defn}))
    await rig.wake("wf")
    first_attempt_ms = int(time.time() * 1000)
    await eventually(lambda: _len_is(attempts, 1))

    async def retry_time_is_the_alarm() -> bool:
        # 0.4 s * 2**1 after the failed attempt: the retry time is the actor's alarm.
        stored = rig.rows("SELECT wake_at FROM actors")[0][0]
        return stored is not None and stored >= first_attempt_ms + 700

    await eventually(retry_time_is_the_alarm)
    await rig.restart()
    await rig.wake("wf")
    await eventually(lambda: _status_is(rig, "completed"))
    assert attempts == [1, 2]


async def _len_is(items: list[Any], size: int) -> bool:
    return len(items) == size


async def test_exhausted_step_fails_the_workflow_visibly(rig: Rig) -> None:
    events: list[dict[str, Any]] = []

    def always(step: StepContext) -> None:
        raise CriticalError("card declined")

    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("charge", always)

    await rig.start(setup(use={"wf": workflow(run=run, on_error=lambda c, e: events.append(e))}))
    await rig.wake("wf")
    await eventually(lambda: _status_is(rig, "failed"))
    status = await status_of(rig)
    assert status["error"]["code"] == "step_failed"
    assert "card declined" in status["error"]["message"]
    assert events[0]["step"]["willRetry"] is False
    assert events[0]["step"]["retryDelay"] is None
    # The failed status is visible as soon as it is set; on_error hears of it right after.
    await eventually(lambda: "workflow" in events[-1])


async def test_try_step_returns_the_failure_and_replays_it(rig: Rig) -> None:
    calls: list[str] = []
    results: list[Any] = []

    def broken(step: StepContext) -> None:
        calls.append("broken")
        raise CriticalError("nope")

    async def run(ctx: WorkflowContext) -> None:
        result = await ctx.try_step("risky", broken)
        results.append((result.ok, result.failure and result.failure["kind"]))
        await ctx.queue.next("hold")

    await rig.start(setup(use={"wf": workflow(queues={"q": queue()}, run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _len_is(results, 1))
    await rig.restart()
    await rig.wake("wf")
    await eventually(lambda: _len_is(results, 2))
    assert results == [(False, "critical"), (False, "critical")]
    assert calls == ["broken"]


async def test_try_names_the_primitive_that_failed(rig: Rig) -> None:
    # rivetkit's workflowTryActor: a try around a join names the join (issue 34, 7).
    failures: list[Any] = []

    def declined(step: StepContext) -> None:
        raise CriticalError("card declined")

    async def bad(ctx: WorkflowContext) -> None:
        raise RuntimeError("join failed")

    async def run(ctx: WorkflowContext) -> None:
        async def flow(block: WorkflowContext) -> Any:
            return await block.join("parallel", {"ok": lambda c: _ok(), "bad": bad})

        joined = await ctx.try_("parallel-flow", flow)
        charged = await ctx.try_("charge-flow", lambda block: block.step("charge", declined))
        failures.extend([joined.failure, charged.failure])

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _len_is(failures, 2))
    joined, charged = failures
    assert f"{joined['source']}:{joined['name']}" == "join:parallel"
    assert (charged["source"], charged["name"]) == ("step", "charge")
    assert charged["error"]["message"] == "card declined"
    assert charged["step"] == {
        "kind": "critical",
        "stepName": "charge-flow/charge",
        "attempts": 1,
        "error": charged["error"],
    }


async def _ok() -> str:
    return "ok"


async def test_join_runs_branches_and_replays(rig: Rig) -> None:
    ran: list[str] = []
    outputs: list[dict[str, Any]] = []

    async def branch(name: str, ctx: WorkflowContext) -> str:
        await ctx.step("work", counting_step(ran, name))
        return name.upper()

    async def run(ctx: WorkflowContext) -> None:
        result = await ctx.join(
            "both",
            {
                "left": lambda c: branch("left", c),
                "right": lambda c: branch("right", c),
            },
        )
        outputs.append(result)
        await ctx.queue.next("hold")

    await rig.start(setup(use={"wf": workflow(queues={"q": queue()}, run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _len_is(outputs, 1))
    await rig.restart()
    await rig.wake("wf")
    await eventually(lambda: _len_is(outputs, 2))
    assert outputs == [{"left": "LEFT", "right": "RIGHT"}] * 2
    assert sorted(ran) == ["left", "right"]


async def test_race_first_success_wins_and_loser_history_is_dropped(rig: Rig) -> None:
    winners: list[tuple[str, Any]] = []

    async def fast(ctx: WorkflowContext) -> str:
        await ctx.step("s", lambda step: None)
        return "fast!"

    async def slow(ctx: WorkflowContext) -> str:
        await ctx.sleep("wait", 5)
        return "slow"

    async def run(ctx: WorkflowContext) -> None:
        winners.append(await ctx.race("r", {"slow": slow, "fast": fast}))
        await ctx.queue.next("hold")

    await rig.start(setup(use={"wf": workflow(queues={"q": queue()}, run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _len_is(winners, 1))
    locations = {row[0] for row in rig.rows("SELECT location FROM workflow_history")}
    assert not any(loc.startswith("r/slow") for loc in locations)
    await rig.restart()
    await rig.wake("wf")
    await eventually(lambda: _len_is(winners, 2))
    assert winners == [("fast", "fast!")] * 2


async def test_rollback_runs_compensations_in_reverse(rig: Rig) -> None:
    undone: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: undone.append(out))
        await ctx.step("charge", lambda s: "c1", rollback=lambda s, out: undone.append(out))
        await ctx.step("ship", _critical)

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _status_is(rig, "failed"))
    assert undone == ["c1", "r1"]
    await rig.restart()
    await rig.wake("wf")
    await asyncio.sleep(0.2)
    assert undone == ["c1", "r1"]  # recorded: not undone twice after a restart


def _critical(step: StepContext) -> None:
    raise CriticalError("out of stock")


async def test_step_context_is_unusable_after_the_step(rig: Rig) -> None:
    kept: list[StepContext] = []
    errors: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("keep", kept.append)
        try:
            kept[0].state["x"] = 1
        except Exception as exc:
            errors.append(getattr(exc, "code", ""))

    await rig.start(setup(use={"wf": workflow(state={}, run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _len_is(errors, 1))
    assert errors == ["step_context_expired"]


async def test_long_sleep_lets_the_actor_hibernate_and_wakes_at_the_deadline(rig: Rig) -> None:
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("before", lambda s: s.state.update(phase="sleeping"))
        await ctx.sleep("nap", 1.5)
        await ctx.step("after", lambda s: s.state.update(phase="awake"))

    defn = workflow(
        state={"phase": "new"},
        run=run,
        options={"sleep_timeout": 0.2},
        actions={"get": lambda c: c.state},
    )
    runtime = await rig.start(setup(use={"wf": defn}))
    actor_id = await rig.wake("wf")
    await eventually(lambda: _hibernated(rig, actor_id), timeout=5)
    assert runtime.live_count == 0
    # Nothing calls it: the alarm scheduler wakes it at the deadline.
    await eventually(lambda: _phase_on_disk(rig, "awake"), timeout=10)


async def _hibernated(rig: Rig, actor_id: str) -> bool:
    assert rig.runtime is not None
    return not rig.runtime.is_live(actor_id)


async def _phase_on_disk(rig: Rig, phase: str) -> bool:
    from perdure.store.encoding import decode_value

    rows = rig.rows("SELECT state FROM actors")
    return bool(rows) and rows[0][0] is not None and decode_value(rows[0][0])["phase"] == phase


async def test_endless_loop_keeps_history_bounded(rig: Rig) -> None:
    high_water: list[int] = []

    async def run(ctx: WorkflowContext) -> Any:
        async def body(loop_ctx: WorkflowContext, count: int) -> Any:
            durable = count % 5000 == 0
            await loop_ctx.step("tick", lambda s: None, ephemeral=not durable)
            if durable:
                high_water.append(rig.rows("SELECT count(*) FROM workflow_history")[0][0])
            if count + 1 == 100_000:
                return Loop.break_(count + 1)
            return Loop.continue_(count + 1)

        return await ctx.loop("endless", body, state=0)

    await rig.start(setup(use={"wf": workflow(run=run)}))
    await rig.wake("wf")
    await eventually(lambda: _status_is(rig, "completed"), timeout=60)
    assert (await status_of(rig))["output"] == 100_000
    assert len(high_water) == 20
    assert max(high_water) <= 50  # 20 kept iterations plus bookkeeping, not 100,000
    assert rig.rows("SELECT count(*) FROM workflow_history")[0][0] <= 50


async def test_failing_on_purpose_logs_one_line_and_no_traceback(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A workflow that compensates, then raises a UserError, answers with it: one warning
    line, no traceback. Anything else it raises is a bug and keeps its traceback."""
    undone: list[str] = []

    async def refuse(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: undone.append(out))
        raise UserError("out of stock", code="out_of_stock")

    async def crash(ctx: WorkflowContext) -> None:
        await ctx.step("reserve", lambda s: "r1")
        raise KeyError("a bug")

    await rig.start(setup(use={"refuse": workflow(run=refuse), "crash": workflow(run=crash)}))
    with caplog.at_level(logging.WARNING, logger="perdure"):
        await rig.wake("refuse")
        await eventually(lambda: _status_is(rig, "failed", name="refuse"))
        status = await status_of(rig, "refuse")
        assert (status["error"]["group"], status["error"]["code"]) == ("user", "out_of_stock")
        assert undone == ["r1"]
        refused = [r for r in caplog.records if r.name.startswith("perdure")]
        assert [r.getMessage() for r in refused] == ["workflow failed: out of stock"]
        assert all(r.exc_info is None for r in refused)
        caplog.clear()
        await rig.wake("crash")
        await eventually(lambda: _status_is(rig, "failed", name="crash"))
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert [r.getMessage() for r in tracebacks] == ["the workflow raised outside a step"]

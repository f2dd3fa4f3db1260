"""``ctx.now``, ``ctx.random`` and ``ctx.uuid4``: drawn once, recorded, replayed the same."""

from __future__ import annotations

import datetime as _dt
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, setup, workflow
from perdure.definition import queue
from perdure.errors import ArgumentError
from perdure.registry import Registry
from perdure.testing import ActorTestEnv
from perdure.workflows.judge import Verdict, judge_history
from tests.support.server import REPO_ROOT

from .rig import Rig, eventually

START = _dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=_dt.UTC)


async def _draw(ctx: WorkflowContext) -> list[Any]:
    """The three values, in a plain form a step can store."""
    at = await ctx.now("started")
    dice = await ctx.random("dice")
    order_id = await ctx.uuid4("order-id")
    assert at.tzinfo is not None
    assert 0.0 <= dice < 1.0
    assert isinstance(order_id, uuid.UUID)
    assert order_id.version == 4
    return [at.isoformat(), dice, str(order_id)]


def _noting(values: list[Any]) -> Any:
    def note(step: StepContext) -> None:
        step.state["seen"].append(values)

    return note


def _sleeper(replays: list[int]) -> Registry:
    async def run(ctx: WorkflowContext) -> None:
        replays.append(1)
        values = await _draw(ctx)
        await ctx.step("before", _noting(values))
        await ctx.sleep("nap", _dt.timedelta(days=1))
        await ctx.step("after", _noting(values))

    flow = workflow(state={"seen": []}, run=run, actions={"seen": lambda c: c.state["seen"]})
    return setup(use={"flow": flow})


async def test_values_survive_the_actor_sleeping_and_waking() -> None:
    replays: list[int] = []
    async with ActorTestEnv(_sleeper(replays), store="sqlite", start=START) as env:
        flow = env.client.flow.get_or_create("k")
        await flow.resolve()
        await env.settle()
        (first,) = await flow.seen()
        assert first[0] == START.isoformat()  # the actor's clock: the env's
        await env.advance(_dt.timedelta(days=1))
        seen = await flow.seen()
        assert len(replays) >= 2, "the workflow did not replay after its sleep"
    # The replay a day later saw the values of the first execution, now included.
    assert seen == [first, first], seen


def _holder(runs: list[list[Any]], draw: Any = _draw) -> Registry:
    async def run(ctx: WorkflowContext) -> None:
        runs.append(await draw(ctx))
        message = await ctx.queue.next("wait")
        await ctx.step("use", lambda step: step.state.update(got=message.body))

    flow = workflow(state={}, queues={"go": queue()}, run=run)
    return setup(use={"flow": flow})


async def test_values_survive_a_restart_of_the_runtime(tmp_path: Path) -> None:
    runs: list[list[Any]] = []
    rig = Rig(tmp_path / "d.db", _holder(runs))
    try:
        await _first_run(rig, runs)
        await rig.restart()
        await rig.wake("flow")
        await eventually(lambda: _ran(runs, 2))
    finally:
        await rig.stop()
    assert runs[0] == runs[1], runs
    entries = {row[0] for row in rig.rows("SELECT location FROM workflow_history")}
    assert {"started", "dice", "order-id"} <= entries


async def _first_run(rig: Rig, runs: list[list[Any]]) -> str:
    """Start the runtime and wake the workflow until it drew its values; the actor's id."""
    await rig.start()
    actor_id = await rig.wake("flow")
    await eventually(lambda: _ran(runs, 1))
    return actor_id


async def _ran(runs: list[list[Any]], count: int) -> bool:
    return len(runs) >= count


async def _swapped(ctx: WorkflowContext) -> list[Any]:
    """``random`` where ``now`` was recorded: another kind at the same name."""
    return [await ctx.random("started")]


async def _inserted(ctx: WorkflowContext) -> list[Any]:
    """A new value drawn before the recorded ones: they are no longer reached first."""
    return [str(await ctx.uuid4("trace-id")), *(await _draw(ctx))]


async def _reordered(ctx: WorkflowContext) -> list[Any]:
    """The recorded names in another order: replayed by name, as steps are."""
    order_id = await ctx.uuid4("order-id")
    dice = await ctx.random("dice")
    at = await ctx.now("started")
    return [at.isoformat(), dice, str(order_id)]


@pytest.mark.parametrize(
    ("draw", "location", "history", "code"),
    [
        (_swapped, "started", "completed ctx.now `started`", "ctx.random `started`"),
        (_inserted, "started", "completed ctx.now `started`", "ctx.uuid4 `trace-id`"),
    ],
)
async def test_a_changed_call_is_a_divergence_the_check_reports(
    tmp_path: Path, draw: Any, location: str, history: str, code: str
) -> None:
    """The engine fails the run with ``history_diverged``; ``perdure check``'s judge
    reports the same divergence before the deploy."""
    runs: list[list[Any]] = []
    rig = Rig(tmp_path / "d.db", _holder(runs))
    try:
        actor_id = await _first_run(rig, runs)
        verdict = await _judge(rig, actor_id, _holder([], draw))
        assert verdict.outcome == "diverged", verdict
        assert (verdict.location, verdict.history, verdict.code) == (location, history, code)
        assert 'ctx.removed("started", "now")' in (verdict.fix or "")
        await rig.restart(_holder(runs, draw))
        await rig.wake("flow")
        await eventually(lambda: _failed(rig))
        status = await rig.handle("flow").action("$workflow")
        assert status["error"]["code"] == "history_diverged", status
        assert f"`{location}`" in status["error"]["message"]
    finally:
        await rig.stop()


async def test_recorded_values_replay_consistently_in_the_check(tmp_path: Path) -> None:
    runs: list[list[Any]] = []
    rig = Rig(tmp_path / "d.db", _holder(runs))
    try:
        actor_id = await _first_run(rig, runs)
        judged: list[list[Any]] = []
        verdict = await _judge(rig, actor_id, _holder(judged))
        assert verdict.outcome == "continues", verdict
        assert verdict.location == "wait"
        assert judged == runs  # the judge's replay saw the recorded values
        reordered: list[list[Any]] = []
        verdict = await _judge(rig, actor_id, _holder(reordered, _reordered))
        assert verdict.outcome == "continues", verdict
        assert reordered == runs
    finally:
        await rig.stop()


async def _judge(rig: Rig, actor_id: str, new: Registry) -> Verdict:
    assert rig.runtime is not None
    store = rig.runtime.store
    record = await store.get_actor(actor_id)
    assert record is not None
    definition = new.get("flow")
    assert definition is not None
    raw = await store.load_history(actor_id)
    return await judge_history(definition, (actor_id, record.key), raw, record.state)


async def _failed(rig: Rig) -> bool:
    status = await rig.handle("flow").action("$workflow")
    return bool(status["status"] == "failed")


async def test_names_are_checked_like_every_primitive() -> None:
    failures: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        for call in (lambda: ctx.now("a/b"), lambda: ctx.random(""), lambda: ctx.uuid4("~1")):
            try:
                await call()
            except ValueError as exc:
                failures.append(str(exc))
        try:
            await ctx.now(name="x", tz="UTC")  # type: ignore[call-arg]
        except ArgumentError as exc:
            failures.append(str(exc))

    async with ActorTestEnv(setup(use={"flow": workflow(run=run)})) as env:
        await env.client.flow.get_or_create("k").resolve()
        await env.settle()
    assert len(failures) == 4, failures
    assert all("Invalid workflow entry name" in text for text in failures[:3]), failures
    assert "tz" in failures[3], failures


def test_the_documented_example_runs(tmp_path: Path) -> None:
    """docs/deterministic-values.md's example, saved and run as a reader would."""
    doc = (REPO_ROOT / "docs" / "deterministic-values.md").read_text()
    (block,) = re.findall(r"```python\n(# billing\.py\n.*?)```", doc, flags=re.S)
    (tmp_path / "billing.py").write_text(block)
    out = subprocess.check_output([sys.executable, "billing.py"], cwd=tmp_path, text=True)
    assert out == "due 2024-01-31\n"

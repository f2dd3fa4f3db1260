"""Child workflows (perdure.workflows.children): started once, awaited durably, failures
surfaced in the parent, cancels cascaded; on SQLite and PostgreSQL, across restarts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from perdure import StepContext, WorkflowContext, setup, workflow
from perdure.definition import queue
from perdure.errors import (
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    PerdureError,
    RemoteError,
    WorkflowCancelled,
    WorkflowFailed,
)
from perdure.handles import WORKFLOW_STATUS_ACTION
from perdure.registry import Registry
from perdure.runtime.admin.inspector import ActorInspector
from perdure.store.encoding import decode_value
from perdure.workflows import CriticalError
from perdure.workflows import children as children_module

from .rig import BACKENDS, Rig, eventually, rig_on


@pytest.fixture(params=BACKENDS)
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    async with rig_on(request.param, tmp_path / "wf.db") as rig:
        yield rig


class Payment:
    """A child workflow that charges once it is told to (a queue message), counting its
    creations and its charges."""

    def __init__(self, *, fail: bool = False) -> None:
        self.created: Counter[str] = Counter()
        self.charged: Counter[str] = Counter()
        self.fail = fail

    def definition(self, **options: Any) -> Any:
        async def run(ctx: WorkflowContext) -> Any:
            message = await ctx.queue.next("go")

            def charge(step: StepContext) -> Any:
                self.charged[step.actor_id] += 1
                if self.fail:
                    raise CriticalError("card declined")
                return {"charged": step.state["amount"], "by": message.body}

            return await ctx.step("charge", charge)

        def on_create(c: Any, input: Any) -> None:
            self.created[c.actor_id] += 1
            c.state["amount"] = (input or {}).get("amount", 0)

        return workflow(
            state={"amount": 0},
            queues={"go": queue()},
            run=run,
            on_create=on_create,
            options=options,
        )


def _registry(parent: Any, payment: Payment, **parent_options: Any) -> Registry:
    return setup(
        use={
            "parent": workflow(run=parent, options=parent_options),
            "payment": payment.definition(),
        }
    )


async def _child_id(rig: Rig, key: str = "k") -> str:
    """The id of the parent's first child, once it is recorded in history."""
    found: list[str] = []

    async def recorded() -> bool:
        assert rig.runtime is not None
        parent = await rig.handle("parent", key).resolve()
        for (data,) in rig.rows("SELECT entry FROM workflow_history WHERE actor_id = ?", parent):
            entry = decode_value(data)
            if entry.get("k") == "child" and "id" in entry["d"]:
                found.append(entry["d"]["id"])
                return True
        return False

    await eventually(recorded)
    return found[0]


async def _go(rig: Rig, child_id: str, body: Any = "go") -> None:
    assert rig.runtime is not None
    await rig.runtime.client().actor("payment").get_for_id(child_id).send("go", body)


async def test_a_parent_starts_a_child_and_gets_its_output(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment", input={"amount": 5})
        return await ctx.wait_child("charged", child)

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    child_id = await _child_id(rig)
    await _go(rig, child_id)
    assert await rig.handle("parent").workflow_result(timeout=10) == {"charged": 5, "by": "go"}
    assert payment.created == {child_id: 1}
    assert payment.charged == {child_id: 1}
    # The child keeps its parent in its status record; a restart replays the parent
    # from history: nothing starts again.
    parent_id = await rig.handle("parent").resolve()
    assert rig.runtime is not None
    child = await rig.runtime.instance(child_id)
    assert child.workflow is not None
    assert child.workflow.meta["parent"]["id"] == parent_id
    assert child.workflow.meta["parentTold"] is True
    await rig.restart()
    await rig.wake("parent")
    await asyncio.sleep(0.2)
    assert payment.created == {child_id: 1}
    assert payment.charged == {child_id: 1}


async def test_a_parent_killed_mid_run_starts_each_child_exactly_once(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        first = await ctx.start_child("first", "payment", input={"amount": 1})
        second = await ctx.start_child("second", "payment", input={"amount": 2})
        done = await ctx.wait_child("first-done", first)
        return [done, await ctx.wait_child("second-done", second)]

    await rig.start(_registry(parent, payment))
    parent_id = await rig.wake("parent")
    await eventually(lambda: _has(payment.created, 2))
    # Between start and wait: the runtime goes, as in a crash the parent's history lost
    # its record of the second child (never committed), then comes back.
    await rig.stop()
    rig.execute(
        "DELETE FROM workflow_history WHERE actor_id = ? AND location = ?", parent_id, "second"
    )
    await rig.start()
    await rig.wake("parent")
    await eventually(lambda: _recorded(rig, parent_id, "second"))
    children = sorted(payment.created)
    assert len(children) == 2
    assert all(count == 1 for count in payment.created.values())  # the same two actors
    for child_id in children:
        await _go(rig, child_id)
    output = await rig.handle("parent").workflow_result(timeout=10)
    assert sorted(item["charged"] for item in output) == [1, 2]
    assert payment.charged == dict.fromkeys(children, 1)


async def _has(counter: Counter[str], count: int) -> bool:
    return len(counter) == count


async def _recorded(rig: Rig, actor_id: str, location: str) -> bool:
    for (data,) in rig.rows(
        "SELECT entry FROM workflow_history WHERE actor_id = ? AND location = ?", actor_id, location
    ):
        return "id" in decode_value(data)["d"]
    return False


async def test_the_parent_hibernates_while_the_child_runs_and_its_end_wakes_it(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment", input={"amount": 7})
        return await ctx.wait_child("charged", child)

    await rig.start(_registry(parent, payment, sleep_timeout=0.2))
    parent_id = await rig.wake("parent")
    child_id = await _child_id(rig)
    await eventually(lambda: _asleep(rig, parent_id), timeout=5)
    # A restart while both wait: neither has an alarm; the child's end wakes the parent.
    await rig.restart(_registry(parent, payment, sleep_timeout=0.2))
    await _go(rig, child_id)
    assert rig.runtime is not None
    assert await rig.handle("parent").workflow_result(timeout=10) == {"charged": 7, "by": "go"}
    assert payment.created == {child_id: 1}


async def _asleep(rig: Rig, actor_id: str) -> bool:
    assert rig.runtime is not None
    return not rig.runtime.is_live(actor_id)


async def test_a_child_that_failed_raises_in_the_parent_where_it_waits(rig: Rig) -> None:
    payment = Payment(fail=True)
    caught: list[Any] = []

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment")
        try:
            await ctx.wait_child("charged", child)
        except ChildWorkflowFailed as exc:
            caught.append(exc)
        # Uncaught, the next one fails the parent.
        again = await ctx.start_child("again", "payment", key="second")
        return await ctx.wait_child("again-done", again)

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    first = await _child_id(rig)
    await _go(rig, first)
    await eventually(lambda: _len_is(caught, 1))
    assert caught[0].child_id == first
    assert "card declined" in caught[0].error["message"]
    assert caught[0].identifier == "workflow.child_failed"
    second = await rig.runtime.client().actor("payment").get_or_create("second").resolve()  # type: ignore[union-attr]
    await _go(rig, second)
    with pytest.raises(WorkflowFailed) as failed:
        await rig.handle("parent").workflow_result(timeout=10)
    assert failed.value.error["code"] == "child_failed"
    assert failed.value.error["metadata"]["childId"] == second


async def _len_is(items: list[Any], count: int) -> bool:
    return len(items) == count


async def test_a_cancelled_child_raises_child_workflow_cancelled(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment")
        try:
            return await ctx.wait_child("charged", child)
        except ChildWorkflowCancelled as exc:
            return f"child cancelled: {exc.reason}"

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    child_id = await _child_id(rig)
    assert rig.runtime is not None
    await rig.runtime.client().actor("payment").get_for_id(child_id).cancel_workflow("nope")
    assert await rig.handle("parent").workflow_result(timeout=10) == "child cancelled: nope"


async def test_cancelling_the_parent_cancels_its_children_but_not_detached_ones(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        attached = await ctx.start_child("attached", "payment", key="a")
        await ctx.start_child("detached", "payment", key="d", detached=True)
        return await ctx.wait_child("attached-done", attached)

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    await eventually(lambda: _has(payment.created, 2))
    parent_id = await rig.handle("parent").resolve()
    await eventually(lambda: _recorded(rig, parent_id, "detached"))
    await rig.handle("parent").cancel_workflow("stop")
    with pytest.raises(WorkflowCancelled) as cancelled:
        await rig.handle("parent").workflow_result(timeout=10)
    assert cancelled.value.reason == "stop"
    assert rig.runtime is not None
    client = rig.runtime.client().actor("payment")
    attached = await client.get("a").resolve()
    await eventually(lambda: _status_is(rig, "payment", attached, "cancelled"))
    status = await client.get("a").workflow_status()
    assert "was cancelled: stop" in status["error"]["message"]
    assert (await client.get("d").workflow_status())["status"] == "running"
    await client.get("d").send("go", "later")
    assert (await client.get("d").workflow_result(timeout=10))["by"] == "later"


async def test_a_cancel_recorded_before_a_crash_still_reaches_the_children(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment")
        await ctx.sleep("a-day", 86400)  # not waiting on the child: the sweep reaches it
        return await ctx.wait_child("charged", child)

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    child_id = await _child_id(rig)
    runner = await rig.runner("parent")
    runner.set_meta(cancel={"reason": "late", "requestedAt": 0})
    await runner.commit()  # recorded, never signalled: the process "dies" now
    await rig.restart()
    await rig.wake("parent")
    await eventually(lambda: _status_is(rig, "payment", child_id, "cancelled"))
    assert (await rig.handle("parent").workflow_status())["status"] == "cancelled"


async def _status_is(rig: Rig, name: str, actor_id: str, status: str) -> bool:
    assert rig.runtime is not None
    handle = rig.runtime.client().actor(name).get_for_id(actor_id)
    return (await handle.workflow_status())["status"] == status


async def test_try_catches_a_child_failure_as_child(rig: Rig) -> None:
    payment = Payment(fail=True)

    async def parent(ctx: WorkflowContext) -> Any:
        async def charge(block: WorkflowContext) -> Any:
            return await block.child("charge", "payment")

        result = await ctx.try_("attempt", charge)
        assert result.failure is not None
        return [result.ok, result.failure["source"]]

    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    await _go(rig, await _child_id(rig))
    assert await rig.handle("parent").workflow_result(timeout=10) == [False, "child"]


async def test_the_inspector_shows_parent_and_children_linked(rig: Rig) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment", key="c")
        await ctx.start_child("audit", "payment", key="x", detached=True)
        return await ctx.wait_child("charged", child)

    await rig.start(_registry(parent, payment))
    parent_id = await rig.wake("parent")
    await eventually(lambda: _recorded(rig, parent_id, "audit"))
    assert rig.runtime is not None
    child_id = await rig.runtime.client().actor("payment").get("c").resolve()
    await _go(rig, child_id)
    await rig.handle("parent").workflow_result(timeout=10)
    inspector = ActorInspector(rig.runtime)
    view = (await inspector.details(parent_id))["workflow"]
    assert view["parent"] is None
    children = {child["location"]: child for child in view["children"]}
    assert children["charge"]["actor_id"] == child_id
    assert children["charge"]["status"] == "completed"
    assert children["charge"]["key"] == ["c"]
    assert children["audit"]["detached"] is True
    assert children["audit"]["status"] == "running"
    waited = next(entry for entry in view["history"] if entry["location"] == "charged")
    assert waited["kind"] == "child_result"
    assert waited["child_id"] == child_id
    child_view = (await inspector.details(child_id))["workflow"]
    assert child_view["parent"] == {
        "actor_id": parent_id,
        "name": "parent",
        "key": ["k"],
        "location": "charge",
        "detached": False,
    }


class _OnAnotherNode:
    """A child's handle as a parent sees it in a cluster when the child lives on another
    node: its errors come back as :class:`RemoteError` (the group, code and status the
    node answered), and the first ``refusals`` status reads are answered 503, as while
    its node stops it or cannot reach its store."""

    def __init__(self, inner: Any, refusals: list[str]) -> None:
        self.inner = inner
        self.refusals = refusals

    async def action(self, name: str, *args: Any) -> Any:
        if name == WORKFLOW_STATUS_ACTION and self.refusals:
            code = self.refusals.pop(0)
            raise RemoteError({"group": "actor", "code": code, "message": code, "status": 503})
        return await self._remote(self.inner.action(name, *args))

    async def cancel_workflow(self, reason: str | None = None) -> Any:
        return await self._remote(self.inner.cancel_workflow(reason))

    async def _remote(self, call: Any) -> Any:
        try:
            return await call
        except PerdureError as exc:
            error = {"group": exc.group, "code": exc.code, "message": exc.message}
            raise RemoteError({**error, "metadata": exc.metadata, "status": exc.status}) from None


@pytest.fixture
def remote_children(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every handle the parent uses to reach a child answers as from another node; the
    list holds the codes of the 503s still to answer to status reads."""
    refusals: list[str] = []
    real = children_module._handle

    def handle(runner: Any, actor: str, actor_id: str) -> Any:
        return _OnAnotherNode(real(runner, actor, actor_id), refusals)

    monkeypatch.setattr(children_module, "_handle", handle)
    return refusals


async def test_a_child_node_answering_503_is_asked_again(
    rig: Rig, remote_children: list[str]
) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("charge", "payment", input={"amount": 3})
        return await ctx.wait_child("charged", child)

    remote_children.extend(["stopping", "unavailable"])
    await rig.start(_registry(parent, payment))
    await rig.wake("parent")
    await _go(rig, await _child_id(rig))
    assert await rig.handle("parent").workflow_result(timeout=10) == {"charged": 3, "by": "go"}
    assert remote_children == []  # both were answered, then asked again


async def test_the_cascade_skips_a_child_whose_node_says_it_ended(
    rig: Rig, remote_children: list[str]
) -> None:
    payment = Payment()

    async def parent(ctx: WorkflowContext) -> Any:
        waited = await ctx.start_child("waited", "payment", key="w")
        await ctx.start_child("ended", "payment", key="e")
        return await ctx.wait_child("waited-done", waited)

    await rig.start(_registry(parent, payment))
    parent_id = await rig.wake("parent")
    await eventually(lambda: _recorded(rig, parent_id, "ended"))
    assert rig.runtime is not None
    client = rig.runtime.client().actor("payment")
    await client.get("e").send("go", "early")
    assert (await client.get("e").workflow_result(timeout=10))["by"] == "early"
    # The sweep before the end cancels "ended" too: its node answers not_running.
    await rig.handle("parent").cancel_workflow("stop")
    with pytest.raises(WorkflowCancelled):
        await rig.handle("parent").workflow_result(timeout=10)
    waited = await client.get("w").resolve()
    await eventually(lambda: _status_is(rig, "payment", waited, "cancelled"))
    assert (await client.get("e").workflow_status())["status"] == "completed"

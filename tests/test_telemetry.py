"""The telemetry seam: the engine reports actions, sends, steps, commits, events,
connections and lifecycle to its observers, and a failing observer harms nothing."""

from __future__ import annotations

from typing import Any

import pytest

from perdure import UserError, actor, event, queue, setup, workflow
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from perdure.telemetry import ActorFacts, Observer, Observers, Span
from perdure.workflows import StepContext, WorkflowContext
from tests.support.runtimes import RuntimeFactory
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(30)


class _Recorded:
    def __init__(self, log: list[tuple[Any, ...]], what: tuple[Any, ...]) -> None:
        self.log = log
        self.what = what

    def end(self, error: BaseException | None = None) -> None:
        self.log.append(("end", *self.what, None if error is None else type(error).__name__))


class Recorder(Observer):
    """Writes down every report."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def _timed(self, *what: Any) -> Span:
        self.log.append(("start", *what))
        return _Recorded(self.log, what)

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        return self._timed("action", actor.name, action)

    def queue_send(self, actor: ActorFacts, queue: str) -> Span | None:
        return self._timed("send", actor.name, queue)

    def step(self, actor: ActorFacts, location: str, attempt: int) -> Span | None:
        return self._timed("step", location, attempt)

    def commit(self, batch: int) -> Span | None:
        self.log.append(("commit", batch))
        return None

    def step_failed(self, actor: ActorFacts, location: str, attempt: int, will_retry: bool) -> None:
        self.log.append(("step_failed", location, attempt, will_retry))

    def workflow_status(self, actor: ActorFacts, status: str) -> None:
        self.log.append(("workflow", status))

    def message_consumed(self, actor: ActorFacts, queue: str, count: int) -> None:
        self.log.append(("consumed", queue, count))

    def state_changed(self, actor: ActorFacts) -> None:
        self.log.append(("state", actor.name))

    def history_changed(self, actor: ActorFacts, changed: Any, deleted: Any) -> None:
        self.log.append(("history", tuple(sorted(changed))))

    def event_sent(self, actor: ActorFacts, name: str, args: list[Any], recipients: int) -> None:
        self.log.append(("event", name, tuple(args), recipients))

    def actor_woke(self, actor: ActorFacts) -> None:
        self.log.append(("woke", actor.name, tuple(actor.key)))

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        self.log.append(("slept", actor.name, reason))

    def seen(self, kind: str) -> list[tuple[Any, ...]]:
        return [entry for entry in self.log if entry[0] == kind]


class Broken(Observer):
    """Fails in every hook it overrides."""

    def action(self, actor: ActorFacts, action: str) -> Span | None:
        raise RuntimeError("observer bug")

    def state_changed(self, actor: ActorFacts) -> None:
        raise RuntimeError("observer bug")


def _registry() -> Registry:
    def bump(c: ActionContext, by: int) -> int:
        c.state["n"] += by
        c.broadcast("bumped", c.state["n"])
        return int(c.state["n"])

    def refuse(c: ActionContext) -> None:
        raise UserError("no", code="refused")

    attempts: list[int] = []

    def flaky(step: StepContext) -> int:
        attempts.append(1)
        if len(attempts) < 2:
            raise RuntimeError("first attempt fails")
        return len(attempts)

    async def run(ctx: WorkflowContext) -> int:
        message = await ctx.queue.next("take")
        value = int(await ctx.step("flaky", flaky, retry_backoff_base=0.01))
        return value + int(message.body["v"])

    counter = actor(
        state={"n": 0},
        events={"bumped": event()},
        actions={"bump": bump, "refuse": refuse},
    )
    flow = workflow(queues={"take": queue()}, run=run)
    return setup(use={"counter": counter, "flow": flow})


async def test_actions_events_commits_and_lifecycle_are_reported(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    recorder = Recorder()
    runtime.observers.add(recorder)
    handle = runtime.client().counter.get_or_create("a")
    assert await handle.bump(2) == 2
    with pytest.raises(UserError):
        await handle.refuse()

    assert ("start", "action", "counter", "bump") in recorder.log
    assert ("end", "action", "counter", "bump", None) in recorder.log
    assert ("end", "action", "counter", "refuse", "UserError") in recorder.log
    assert ("event", "bumped", (2,), 0) in recorder.seen("event")  # nobody subscribed
    assert recorder.seen("commit"), "the store reported no commit"
    assert ("state", "counter") in recorder.seen("state")
    assert ("woke", "counter", ("a",)) in recorder.seen("woke")

    await runtime.dispatch.ref(await handle.resolve()).sleep()
    assert ("slept", "counter", "sleep") in recorder.seen("slept")


async def test_workflow_steps_retries_receives_and_status_are_reported(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    recorder = Recorder()
    runtime.observers.add(recorder)
    handle = runtime.client().flow.get_or_create("w")
    ref = runtime.dispatch.ref(await handle.resolve())
    await ref.send("take", {"v": 40})

    async def completed() -> bool:
        return ("workflow", "completed") in recorder.log

    await eventually(completed, timeout=10)
    assert ("start", "send", "flow", "take") in recorder.log
    assert ("end", "send", "flow", "take", None) in recorder.log
    assert ("consumed", "take", 1) in recorder.log
    assert ("end", "step", "flaky", 1, "RuntimeError") in recorder.log
    assert ("step_failed", "flaky", 1, True) in recorder.log
    assert ("end", "step", "flaky", 2, None) in recorder.log
    assert ("workflow", "running") in recorder.log
    assert any("flaky" in entry[1] for entry in recorder.seen("history"))
    assert (await ref.workflow_status())["output"] == 42


async def test_a_failing_observer_neither_fails_the_work_nor_silences_the_others(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    recorder = Recorder()
    runtime.observers.add(Broken())
    runtime.observers.add(recorder)
    handle = runtime.client().counter.get_or_create("b")
    assert await handle.bump(5) == 5
    assert ("end", "action", "counter", "bump", None) in recorder.log
    assert ("state", "counter") in recorder.seen("state")


def test_fan_out_joins_the_spans_of_several_observers() -> None:
    first, second = Recorder(), Recorder()
    observers = Observers([first, Observer(), second])

    class Facts:
        actor_id, name, key = "id", "thing", ("k",)

    span = observers.action(Facts(), "go")
    assert span is not None
    span.end(ValueError("x"))
    for recorder in (first, second):
        assert recorder.log == [
            ("start", "action", "thing", "go"),
            ("end", "action", "thing", "go", "ValueError"),
        ]
    assert Observers([Observer()]).action(Facts(), "go") is None
    observers.remove(first)
    observers.remove(first)  # not an error
    assert observers.observers == [observers.observers[0], second]


def test_only_observers_that_follow_changes_make_commits_report_them() -> None:
    class Counting(Observer):
        def action(self, actor: ActorFacts, action: str) -> Span | None:
            return None

    observers = Observers([Counting()])
    assert not observers.follows_changes
    observers.add(Recorder())
    assert observers.follows_changes
    assert Observers([Observers([Recorder()])]).follows_changes


async def test_a_message_a_step_sends_is_reported_as_a_send(make_runtime: RuntimeFactory) -> None:
    async def enqueue(step: StepContext) -> None:
        await step.queue.send("later", {"n": 1})

    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("enqueue", enqueue)
        return "done"

    registry = setup(use={"sender": workflow(queues={"later": queue()}, run=run)})
    runtime = await make_runtime(registry)
    recorder = Recorder()
    runtime.observers.add(recorder)
    ref = runtime.dispatch.ref(await runtime.client().sender.get_or_create("s").resolve())

    async def done() -> bool:
        return (await ref.workflow_status())["status"] == "completed"

    await eventually(done, timeout=10)
    assert ("start", "send", "sender", "later") in recorder.log
    assert ("end", "send", "sender", "later", None) in recorder.log

"""The workflow engine stands on its port: no runtime import, and it runs on any host."""

from __future__ import annotations

import ast
import asyncio
import logging
import subprocess
import sys
from collections.abc import Awaitable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from perdure.errors import QueueError
from perdure.store.kv import RawKv
from perdure.telemetry import Observer
from perdure.workflows import StepContext, WorkflowContext
from perdure.workflows.engine import META_LOCATION, WorkflowRunner
from perdure.workflows.port import ActorClient, MessageQueue, WorkflowHost

T = TypeVar("T")
WORKFLOWS = Path(__file__).resolve().parents[2] / "src" / "perdure" / "workflows"


def test_importing_the_engine_loads_no_runtime_module() -> None:
    code = (
        "import sys, perdure.workflows, perdure.workflows.engine, perdure.workflows.port\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('perdure.runtime'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


def test_no_workflow_module_imports_the_runtime_even_for_type_checking() -> None:
    offenders = []
    for path in sorted(WORKFLOWS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [
                f"{path.name}:{node.lineno} {name}"
                for name in names
                if name == "perdure.runtime" or name.startswith("perdure.runtime.")
            ]
    assert offenders == []


class _Signal:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


class FakeActor:
    """The data the steps reach."""

    def __init__(self) -> None:
        self.state: Any = {"n": 0}
        self.vars: Any = None


class FakeHost:
    """A host with nothing behind it: history in a dict, time that moves on request."""

    def __init__(self, stored: dict[str, bytes] | None = None) -> None:
        self.actor_id = "wf-1"
        self.name = "wf"
        self.key = ("k",)
        self.label = "wf/wf-1"
        self.ended: list[dict[str, Any]] = []
        self.log = logging.LoggerAdapter(logging.getLogger("test.port"), {})
        self.abort = _Signal()
        self.observer = Observer()
        self.stored: dict[str, bytes] = dict(stored or {})
        self._puts: dict[str, bytes] = {}
        self._deletes: list[str] = []
        self.trace: list[Any] = []
        self.alarms: list[int | None] = []
        self.waiting: list[bool] = []
        self.errors: list[dict[str, Any]] = []
        self.actor = FakeActor()
        self.now = 1_000
        self.run_timeout = 0.0
        self.code_version: str | None = None

    async def load_history(self) -> dict[str, bytes]:
        return dict(self.stored)

    def write_history(self, puts: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        self._puts.update(puts)
        for location in deletes:
            self._puts.pop(location, None)
            self._deletes.append(location)

    def flush(self) -> Awaitable[None]:
        for location in self._deletes:
            self.stored.pop(location, None)
        self.stored.update(self._puts)
        self.trace.append(("flush", sorted(self._puts)))
        self._puts, self._deletes = {}, []
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def queue(self) -> MessageQueue | None:
        return None

    def require_queue(self) -> MessageQueue:
        raise QueueError("no queues", code="not_configured")

    def validate_event(self, name: str, args: list[Any]) -> list[Any]:
        if name != "progress":
            raise ValueError(name)
        return args

    def send_event(self, name: str, args: list[Any]) -> None:
        self.trace.append(("event", name, args))

    def create_input(self) -> Any:
        return None

    def input_value(self, plain: Any) -> Any:
        return plain

    def now_ms(self) -> int:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += round(seconds * 1000)
        await asyncio.sleep(0)

    def set_alarm(self, at: int | None) -> None:
        self.alarms.append(at)

    def set_waiting(self, waiting: bool) -> None:
        self.waiting.append(waiting)

    async def report_error(self, event: dict[str, Any]) -> None:
        self.errors.append(event)

    def workflow_ended(self, status: dict[str, Any]) -> None:
        self.ended.append(status)

    def client(self) -> ActorClient:
        raise NotImplementedError

    def keep_awake(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        return awaitable

    def wait_until(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        return awaitable

    def destroy(self) -> None:
        raise NotImplementedError

    def kv(self) -> RawKv:
        raise NotImplementedError


class Counting:
    """A workflow of two steps around a durable sleep; counts the steps that ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, ctx: WorkflowContext) -> Any:
        first = await ctx.step("first", self._first)
        await ctx.sleep("nap", 2.5)
        return await ctx.step("second", lambda step: self._second(step, first))

    def _first(self, step: StepContext) -> int:
        self.ran.append("first")
        step.state["n"] += 1
        step.broadcast("progress", step.state["n"])
        return 10

    def _second(self, step: StepContext, first: int) -> int:
        self.ran.append("second")
        return first + 1


async def test_a_workflow_runs_on_a_host_with_no_runtime_behind_it() -> None:
    fake = FakeHost()
    host: WorkflowHost = fake
    workflow = Counting()
    runner = WorkflowRunner(host, workflow.run)
    await runner.run()
    assert runner.status() == {"status": "completed", "error": None, "output": 11}
    assert fake.ended == [runner.status()]  # whoever waits for the result is answered
    assert workflow.ran == ["first", "second"]
    assert fake.actor.state == {"n": 1}
    # The step's event is handed to the host just before the flush that makes the step
    # durable: the host logs it in that commit and sends it once durable (docs/events.md).
    first_flush = fake.trace.index(("flush", ["first"]))
    assert fake.trace[first_flush - 1] == ("event", "progress", [1])
    # Before it, the start's own flush: the status record and the busy alarm are
    # submitted as the run starts, so a crash in the first step finds the alarm.
    assert fake.trace.index(("flush", [META_LOCATION])) < first_flush
    # Busy ("now"), the sleep's deadline, busy again, then no alarm once completed.
    assert fake.alarms == [1_000, 3_500, 3_500, None]
    assert fake.waiting == [True, False]
    assert {"first", "nap", "second", META_LOCATION} <= set(fake.stored)


async def test_a_replay_returns_recorded_outputs_without_running_or_broadcasting() -> None:
    first = FakeHost()
    await WorkflowRunner(first, Counting().run).run()
    stored = dict(first.stored)
    del stored[META_LOCATION]  # as if the process died before the completion committed
    again = FakeHost(stored)
    workflow = Counting()
    runner = WorkflowRunner(again, workflow.run)
    await runner.run()
    assert workflow.ran == []
    assert runner.status()["output"] == 11
    assert not [item for item in again.trace if item[0] == "event"]


async def test_a_step_that_uses_a_queue_the_actor_lacks_fails_the_workflow() -> None:
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("send", lambda step: step.queue.send("jobs", 1), max_retries=0)

    fake = FakeHost()
    runner = WorkflowRunner(fake, run)
    await runner.run()
    assert runner.status()["status"] == "failed"
    assert [next(iter(event)) for event in fake.errors] == ["step", "workflow"]


async def test_a_run_records_the_code_version_it_starts_on_only_when_it_has_one() -> None:
    """Issue 33: a cluster node's run records its version (and forgets a version it
    waited for); a single server's host has none and records nothing of it."""
    from perdure.store.encoding import decode_value

    alone = FakeHost()
    await WorkflowRunner(alone, Counting().run).run()
    assert "codeVersion" not in decode_value(alone.stored[META_LOCATION])
    node = FakeHost()
    node.code_version = "v2"
    runner = WorkflowRunner(node, Counting().run)
    runner.meta["waitingForVersion"] = "v1"  # as a held run's record says
    await runner.run()
    meta = decode_value(node.stored[META_LOCATION])
    assert meta["codeVersion"] == "v2"
    assert "waitingForVersion" not in meta

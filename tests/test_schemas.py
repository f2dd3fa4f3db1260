"""Typed models in process: the engine behaviour behind docs/models.md.

Real runtimes on a real SQLite file (restarts open a new store on the same file); the
in-process client gives the same plain values as the network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from perdure import actor, event, queue, setup, workflow
from perdure.errors import DefinitionError, InvalidRequest, PerdureError
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.store import SQLiteStore
from perdure.store.encoding import decode_value
from perdure.workflows import StepContext, WorkflowContext

pytestmark = pytest.mark.timeout(30)

WAIT = 5.0


class Progress(BaseModel):
    completed: int = 0
    total: int = 0


class JobState(BaseModel):
    progress: Progress = Progress()


class Job(BaseModel):
    value: int


class Runtimes:
    """Starts runtimes on one SQLite file; ``restart`` opens a new store on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current: ActorRuntime | None = None

    async def start(self, registry: Registry) -> ActorRuntime:
        if self.current is not None:
            await self.current.stop()
        self.current = ActorRuntime(registry, SQLiteStore(self.path))
        await self.current.start()
        return self.current

    def stored_state(self, name: str) -> Any:
        db = sqlite3.connect(self.path)
        try:
            rows = db.execute("SELECT state FROM actors WHERE name = ?", (name,)).fetchall()
        finally:
            db.close()
        return [None if row[0] is None else decode_value(row[0]) for row in rows]

    def actor_count(self) -> int:
        db = sqlite3.connect(self.path)
        try:
            return int(db.execute("SELECT count(*) FROM actors").fetchone()[0])
        finally:
            db.close()


@pytest.fixture
async def runtimes(tmp_path: Path) -> AsyncIterator[Runtimes]:
    started = Runtimes(tmp_path / "perdure.db")
    try:
        yield started
    finally:
        if started.current is not None:
            async with asyncio.timeout(WAIT):
                await started.current.stop()


async def _eventually(predicate: Callable[[], Any], what: str) -> None:
    try:
        async with asyncio.timeout(WAIT):
            while not await predicate():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


# -- workflows: step.state is the model ------------------------------------------------------


def _job_workflow(ran: list[int]) -> Registry:
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop_ctx: WorkflowContext) -> None:
            message = await loop_ctx.queue.next("wait-job")
            job = message.body
            assert isinstance(job, Job)  # message.body.value works for queue(Job)

            def apply(step: StepContext) -> None:
                ran.append(job.value)
                step.state.progress.completed += job.value
                step.broadcast("progress", step.state.progress)

            await loop_ctx.step("apply", apply)

        await ctx.loop("jobs", body)

    defn = workflow(
        state=JobState(progress=Progress(total=10)),
        queues={"jobs": queue(Job)},
        events={"progress": event(Progress)},
        run=run,
        actions={"get": lambda c: c.state},
    )
    return setup(use={"wf": defn})


async def test_workflow_steps_use_a_model_state_across_a_restart(runtimes: Runtimes) -> None:
    ran: list[int] = []
    runtime = await runtimes.start(_job_workflow(ran))
    handle = runtime.client().wf.get_or_create("a")
    conn = await handle.connect()
    events: asyncio.Queue[Any] = asyncio.Queue()
    conn.on("progress", lambda *args: events.put_nowait(args))
    await handle.send("jobs", {"value": 3})
    assert await asyncio.wait_for(events.get(), WAIT) == ({"completed": 3, "total": 10},)

    async def completed_is(value: int) -> bool:
        state = await runtimes.current.client().wf.get("a").get()  # type: ignore[union-attr]
        return bool(state["progress"]["completed"] == value)

    runtime = await runtimes.start(_job_workflow(ran))
    # Stored in its plain form, loaded back as the model.
    assert runtimes.stored_state("wf") == [{"progress": {"completed": 3, "total": 10}}]
    await runtime.client().wf.get("a").send("jobs", {"value": 4})
    await _eventually(lambda: completed_is(7), "the second job")
    assert ran == [3, 4]


# -- actions in process: plain results, model arguments ---------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Tag(TypedDict):
    label: str


def _shapes() -> Registry:
    def move(c: ActionContext, by: Point, tag: Tag, note: Any = None) -> Point:
        assert isinstance(by, Point)
        c.state.x += by.x
        c.state.y += by.y
        return c.state

    def replace(c: ActionContext, value: Any) -> None:
        c.state = value  # a dict becomes the schema's type

    def kind(c: ActionContext) -> str:
        return type(c.state).__name__

    def reply(c: ActionContext, body: Any) -> None:
        pass

    async def work(c: ActionContext) -> None:
        message = await c.queue.next(completable=True, timeout=WAIT)
        assert message is not None
        await message.complete(Point(1, 2))

    defn = actor(
        state=Point(0, 0),
        queues={"jobs": queue()},
        actions={"move": move, "replace": replace, "kind": kind, "work": work},
    )
    return setup(use={"shape": defn})


async def test_in_process_results_are_plain_and_arguments_are_models(
    runtimes: Runtimes,
) -> None:
    runtime = await runtimes.start(_shapes())
    handle = runtime.client().shape.get_or_create("s")
    moved = await handle.move({"x": 1, "y": "2"}, {"label": "a"})
    assert moved == {"x": 1, "y": 2}
    assert type(moved) is dict  # the same plain form as over the network
    with pytest.raises(InvalidRequest) as bad:
        await handle.move({"x": 1}, {"label": "a"})
    assert bad.value.code == "invalid_args"
    assert bad.value.metadata["parameter"] == "by"
    with pytest.raises(InvalidRequest) as bad_tag:
        await handle.move({"x": 1, "y": 1}, {"name": "a"})
    assert bad_tag.value.metadata["parameter"] == "tag"

    await handle.replace({"x": 5, "y": 5})
    assert await handle.kind() == "Point"
    with pytest.raises(PerdureError) as invalid:
        await handle.replace({"x": "five"})
    assert invalid.value.identifier == "state.invalid"
    assert await handle.move({"x": 1, "y": 1}, {"label": "b"}) == {"x": 6, "y": 6}


async def test_a_completion_response_model_arrives_plain(runtimes: Runtimes) -> None:
    runtime = await runtimes.start(_shapes())
    handle = runtime.client().shape.get_or_create("c")
    worker = asyncio.ensure_future(handle.work())
    result = await handle.send("jobs", {"n": 1}, wait=True, timeout=WAIT)
    await asyncio.wait_for(worker, WAIT)
    assert result.response == {"x": 1, "y": 2}


# -- state validated at commit -----------------------------------------------------------------


def _strict_registry() -> Registry:
    def corrupt(c: ActionContext) -> None:
        c.state.progress.completed = "lots"

    def bump(c: ActionContext) -> int:
        c.state.progress.completed += 1
        return c.state.progress.completed

    defn = actor(
        state=JobState(),
        actions={"corrupt": corrupt, "bump": bump, "get": lambda c: c.state},
    )
    return setup(use={"strict": defn})


async def test_an_invalid_state_fails_the_action_and_nothing_is_stored(
    runtimes: Runtimes,
) -> None:
    runtime = await runtimes.start(_strict_registry())
    handle = runtime.client().strict.get_or_create("s")
    assert await handle.bump() == 1
    with pytest.raises(PerdureError) as bad:
        await handle.corrupt()
    assert bad.value.identifier == "state.invalid"
    assert "progress.completed" in bad.value.message
    assert runtimes.stored_state("strict") == [{"progress": {"completed": 1, "total": 0}}]
    # The next call gets an instance woken from the stored state.
    assert await handle.bump() == 2


# -- state schemas from create_state, state_schema= ---------------------------------------------


async def test_state_schema_from_create_state_annotation_and_explicit(
    runtimes: Runtimes,
) -> None:
    def create(c: Any, input: Any) -> JobState:
        return JobState(progress=Progress(total=input))

    def from_dict(c: Any, input: Any) -> dict[str, Any]:
        return {"progress": {"total": input}}  # state_schema turns it into the model

    def kind(c: ActionContext) -> str:
        return f"{type(c.state).__name__}:{c.state.progress.total}"

    registry = setup(
        use={
            "annotated": actor(create_state=create, actions={"kind": kind}),
            "declared": actor(
                create_state=from_dict, state_schema=JobState, actions={"kind": kind}
            ),
        }
    )
    runtime = await runtimes.start(registry)
    assert await runtime.client().annotated.get_or_create("a", input=3).kind() == "JobState:3"
    assert await runtime.client().declared.get_or_create("d", input=4).kind() == "JobState:4"
    runtime = await runtimes.start(registry)
    assert await runtime.client().annotated.get("a").kind() == "JobState:3"
    assert await runtime.client().declared.get("d").kind() == "JobState:4"


async def test_a_model_state_without_a_schema_is_refused_at_create(runtimes: Runtimes) -> None:
    def create(c: Any, input: Any):  # type: ignore[no-untyped-def]  # no annotation on purpose
        return JobState()

    runtime = await runtimes.start(setup(use={"loose": actor(create_state=create)}))
    with pytest.raises(DefinitionError) as bad:
        await runtime.client().loose.get_or_create("x").resolve()
    assert "state_schema=JobState" in bad.value.message


# -- create input -----------------------------------------------------------------------------


class Setup(BaseModel):
    total: int


async def test_bad_input_is_a_400_and_nothing_is_created(runtimes: Runtimes) -> None:
    def validating(c: Any, input: Any) -> dict[str, Any]:
        return {"total": Setup.model_validate(input).total}  # validated by hand

    def typed(c: Any, input: Setup) -> dict[str, Any]:
        assert isinstance(input, Setup)
        return {"total": input.total}

    registry = setup(
        use={
            "by_hand": actor(create_state=validating, actions={"get": lambda c: c.state}),
            "declared": actor(input=Setup, create_state=typed, actions={"get": lambda c: c.state}),
        }
    )
    runtime = await runtimes.start(registry)
    for name in ("by_hand", "declared"):
        with pytest.raises(InvalidRequest) as bad:
            await runtime.client().actor(name).get_or_create("k", input={"tot": 1}).get()
        assert bad.value.code == "invalid_input"
        assert "total" in bad.value.message
    assert runtimes.actor_count() == 0
    assert await runtime.client().declared.get_or_create("k", input={"total": 2}).get() == {
        "total": 2
    }
    # The stored input is plain; the hook got the model on create (asserted in `typed`).
    runtime = await runtimes.start(registry)
    assert await runtime.client().declared.get("k").get() == {"total": 2}


# -- definitions --------------------------------------------------------------------------------


def test_unusable_annotations_fail_when_the_registry_is_built() -> None:
    class Opaque:
        pass

    def takes_opaque(c: Any, thing: Opaque) -> None:
        pass

    with pytest.raises(DefinitionError) as bad:
        setup(use={"a": actor(actions={"go": takes_opaque})})
    assert "`thing`" in bad.value.message

    def unresolvable(c: Any, thing: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(DefinitionError) as unknown:
        setup(use={"a": actor(actions={"go": unresolvable})})
    assert "`thing`" in unknown.value.message


def test_unannotated_actions_are_called_as_they_are() -> None:
    def plain(c, anything):  # type: ignore[no-untyped-def]
        return anything

    registry = setup(use={"a": actor(actions={"go": plain})})
    assert registry.get("a").actions["go"].fn is plain  # type: ignore[union-attr]


async def test_an_event_schema_validates_broadcasts(runtimes: Runtimes) -> None:
    def shout(c: ActionContext, value: Any) -> None:
        c.broadcast("progress", value)

    defn = actor(state={}, events={"progress": event(Progress)}, actions={"shout": shout})
    runtime = await runtimes.start(setup(use={"e": defn}))
    handle = runtime.client().e.get_or_create("e")
    conn = await handle.connect()
    got: list[Any] = []
    conn.on("progress", lambda *args: got.append(args))
    await handle.shout({"completed": "1"})
    assert got == [({"completed": 1, "total": 0},)]  # validated, then sent plain
    with pytest.raises(InvalidRequest):
        await handle.shout({"completed": "many"})
    with pytest.raises(ValidationError):
        Progress.model_validate({"completed": "many"})  # the same rule pydantic applies


async def test_a_state_assigned_in_a_step_becomes_the_model(runtimes: Runtimes) -> None:
    kinds: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        def reset(step: StepContext) -> None:
            step.state = {"progress": {"completed": 1, "total": 2}}
            kinds.append(type(step.state).__name__)
            step.state.progress.completed += 1

        await ctx.step("reset", reset)

    defn = workflow(state=JobState(), run=run, actions={"get": lambda c: c.state})
    runtime = await runtimes.start(setup(use={"wf": defn}))
    handle = runtime.client().wf.get_or_create("w")

    async def done() -> bool:
        return bool(await handle.get() == {"progress": {"completed": 2, "total": 2}})

    await _eventually(done, "the step")
    assert kinds == ["JobState"]


async def test_a_step_returns_a_model_plain_the_first_time_as_on_replay(
    runtimes: Runtimes,
) -> None:
    seen: list[Any] = []

    async def run(ctx: WorkflowContext) -> Any:
        output = await ctx.step("make", lambda step: Progress(completed=1, total=2))
        seen.append(output)
        await ctx.queue.next("wait", names="go")
        return Progress(completed=2, total=2)

    registry = setup(use={"wf": workflow(queues={"go": queue()}, run=run)})
    runtime = await runtimes.start(registry)
    handle = runtime.client().wf.get_or_create("w")
    await handle.resolve()

    async def made() -> bool:
        return len(seen) == 1

    await _eventually(made, "the first run of the step")
    runtime = await runtimes.start(registry)  # the step is replayed from history
    handle = runtime.client().wf.get("w")
    await handle.action("$workflow")  # wakes the actor: its run replays

    async def replayed() -> bool:
        return len(seen) == 2

    await _eventually(replayed, "the replay")
    assert seen == [{"completed": 1, "total": 2}] * 2
    await handle.send("go", None)

    async def completed() -> bool:
        status = await handle.action("$workflow")
        return bool(status["status"] == "completed")

    await _eventually(completed, "the workflow's end")
    assert (await handle.action("$workflow"))["output"] == {"completed": 2, "total": 2}

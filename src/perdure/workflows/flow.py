"""The primitives that decide a run's path: loops, durable sleeps, join, race and try
blocks (control flow), and what keeps a replay the same while the code evolves and the
world moves on (versions and recorded values).

What keeps a replay the same while code evolves and the world moves on: rollback
checkpoints, ``removed()`` placeholders, ``get_version``, and recorded values.

Recorded values: ``ctx.now``, ``ctx.random`` and ``ctx.uuid4``, recorded once.

Workflow code outside steps runs again at every replay, so a value it reads from the
clock or a random source would change from one replay to the next. These primitives
draw the value at the first execution, record it in history at a named location (an
entry of kind ``now``, ``random`` or ``uuid4`` whose output ``o``, as a step's, holds
the value in plain form, so the inspector shows it) and return the recorded value on
every replay: after a restart, a wake, a move.

Like every primitive they take a name, unique in its scope, and go through the same
divergence checks: a recorded entry of another kind at that name, or a new one while the
scope still holds recorded entries not reached, is a divergence.

The entry commits before the value is returned, so it is durable before the code can
use it for anything (an idempotency key handed to a step, say): a crash after the call
replays the same value.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from perdure.errors import (
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    JoinError,
    PerdureError,
    RaceError,
    StepExhausted,
    WorkflowCancelled,
    WorkflowFailure,
)
from perdure.workflows.context import Block, LoopBreak, LoopContinue, TryResult
from perdure.workflows.core import RunnerCore, maybe_await
from perdure.workflows.history import (
    Divergence,
    Entry,
    child_location,
    iteration_scope,
    validate_name,
)
from perdure.workflows.port import WorkflowHost
from perdure.workflows.runner_support import error_info, step_failure

__all__ = ["FlowPrimitives"]

# Not a branch's failure: these leave a join or a race as they are (a diverged history,
# the run's cancellation; a child's cancel is a failure like a step's).
_PASS_THROUGH = (Divergence, WorkflowCancelled)
# The source ``ctx.try_`` names for each failure of a primitive (``catch``).
_SOURCES: dict[type[BaseException], str] = {
    StepExhausted: "step",
    JoinError: "join",
    RaceError: "race",
    ChildWorkflowFailed: "child",
    ChildWorkflowCancelled: "child",
}


def _try_failure(source: str, exc: Exception, try_name: str) -> dict[str, Any]:
    """What ``ctx.try_`` returns for a failure it caught, as rivetkit's ``TryBlockFailure``:
    ``name`` is the primitive that failed (a join's, a race's or a step's own name: a try
    around a join named ``parallel`` reports ``join:parallel``); a child's failure and the
    block's own exception name the try. A step's failure carries ``try_step``'s details
    under ``step``, and its ``error`` is the step's own error."""
    name = try_name
    if isinstance(exc, (StepExhausted, JoinError, RaceError)):
        name = exc.location.rpartition("/")[2]
    failure: dict[str, Any] = {"source": source, "name": name, "error": error_info(exc)}
    if isinstance(exc, StepExhausted):
        failure["step"] = step_failure(exc)
        failure["error"] = exc.error
    return failure


def _passes(exc: BaseException) -> bool:
    """``exc`` leaves a join or race as it is (not a branch's failure)."""
    if not isinstance(exc, Exception):
        return True
    return isinstance(exc, _PASS_THROUGH) and not isinstance(exc, WorkflowFailure)


class FlowPrimitives(RunnerCore):
    """``ctx.loop``, ``ctx.sleep``, ``ctx.join``, ``ctx.race`` and ``ctx.try_``."""

    async def loop(
        self,
        scope: str,
        name: str,
        fn: Callable[..., Awaitable[Any]],
        state: Any,
        stateful: bool,
        prune_interval: int,
        keep: int,
    ) -> Any:
        """Iterate durably; see ``WorkflowContext.loop``."""
        location, entry = self.expect(scope, name, "loop")
        if entry is None:
            entry = self.history.record(
                location, Entry("loop", "running", data={"i": 0, "st": state})
            )
        elif entry.status == "completed":
            return entry.data.get("o")
        while True:
            iteration = int(entry.data["i"])
            body_scope = iteration_scope(location, iteration)
            context = self.context(body_scope)
            args = (context, entry.data.get("st")) if stateful else (context,)
            result = await maybe_await(fn(*args))
            self.check_complete(body_scope)
            if isinstance(result, LoopBreak):
                entry.status = "completed"
                entry.data = {"i": iteration + 1, "o": result.value}
                self.history.touch(location)
                self.history.prune_iterations(location, iteration + 1)
                self.stage()
                return result.value
            if stateful and not isinstance(result, LoopContinue):
                raise TypeError(
                    f"Loop `{location}` has state: its body must return Loop.continue_(state) "
                    "or Loop.break_(value)."
                )
            next_state = result.state if isinstance(result, LoopContinue) else None
            entry.data = {"i": iteration + 1, "st": next_state if stateful else None}
            self.history.touch(location)
            if (iteration + 1) % prune_interval == 0:
                self.history.prune_iterations(location, iteration + 1 - keep)
            self.stage()

    async def sleep(
        self, scope: str, name: str, deadline: int | None, seconds: float | None
    ) -> None:
        """Sleep until a recorded deadline (computed once, at the first execution)."""
        location, entry = self.expect(scope, name, "sleep")
        if entry is not None and entry.status == "completed":
            return
        if entry is None:
            if deadline is None:
                deadline = self.host.now_ms() + int((seconds or 0) * 1000)
            entry = self.history.record(location, Entry("sleep", "pending", data={"t": deadline}))
        await self.gate()  # a live sleep: a cancel lands here, a pause holds here
        await self.wait_until(int(entry.data["t"]))
        entry.status = "completed"
        self.history.touch(location)
        self.stage()

    async def try_block(
        self, scope: str, name: str, fn: Block, catch: tuple[str, ...]
    ) -> TryResult:
        """Run a block in its own scope, turning selected failures into a result."""
        location, entry = self.expect(scope, name, "try")
        if entry is not None and entry.status == "completed":
            return TryResult(entry.data["ok"], entry.data.get("v"), entry.data.get("f"))
        entry = self.history.record(location, Entry("try", "running"))
        try:
            value = await maybe_await(fn(self.context(location)))
            self.check_complete(location)
            result = TryResult(True, value)
        except WorkflowFailure as exc:
            source = _SOURCES.get(type(exc), "block")
            if source not in catch:
                raise
            result = TryResult(False, failure=_try_failure(source, exc, name))
        except (Divergence, PerdureError):
            raise
        except Exception as exc:
            if "block" not in catch:
                raise
            result = TryResult(False, failure=_try_failure("block", exc, name))
        entry.status = "completed"
        entry.data = {"ok": result.ok, "v": result.value, "f": result.failure}
        self.history.touch(location)
        self.stage()
        return result

    async def join(self, scope: str, name: str, branches: dict[str, Block]) -> dict[str, Any]:
        """Run branches concurrently; every one must succeed."""
        location, entry = self.expect(scope, name, "join")
        if entry is not None and entry.status == "completed":
            return dict(entry.data.get("o", {}))
        for branch in branches:
            validate_name(branch)
        entry = entry or self.history.record(location, Entry("join", "running"))
        results = await self._join_branches(location, branches)
        outputs: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}
        for branch, result in zip(branches, results, strict=True):
            if isinstance(result, BaseException):
                if _passes(result):
                    raise result
                errors[branch] = result
            else:
                outputs[branch] = result
        if errors:
            raise JoinError(location, errors)
        entry.status = "completed"
        entry.data = {"o": outputs}
        self.history.touch(location)
        self.stage()
        return outputs

    async def _join_branches(self, location: str, branches: dict[str, Block]) -> list[Any]:
        """Every branch's result or exception, in order. A cancel landing in one branch
        stops the others at once (a step of theirs in progress included): the run is
        cancelled, and nothing of theirs is to be waited for."""
        self.branching += 1
        tasks = [
            asyncio.ensure_future(self._branch(child_location(location, b), fn))
            for b, fn in branches.items()
        ]
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
                if any(_cancelled_run(task) for task in done):
                    for task in pending:
                        task.cancel()
                    break
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.branching -= 1
        cancelled = next((t.exception() for t in tasks if _cancelled_run(t)), None)
        if cancelled is not None:
            raise cancelled
        return [task.exception() or task.result() for task in tasks]

    async def _branch(self, scope: str, fn: Block) -> Any:
        output = await maybe_await(fn(self.context(scope)))
        self.check_complete(scope)
        return output

    async def race(
        self, scope: str, name: str, branches: list[tuple[str, Block]]
    ) -> tuple[str, Any]:
        """The first branch to succeed wins; the others are cancelled and forgotten."""
        location, entry = self.expect(scope, name, "race")
        if entry is not None and entry.status == "completed":
            return entry.data["w"], entry.data.get("o")
        entry = entry or self.history.record(location, Entry("race", "running"))
        self.branching += 1
        tasks = {
            asyncio.ensure_future(self._branch(child_location(location, b), fn)): b
            for b, fn in branches
        }
        errors: dict[str, BaseException] = {}
        winner: tuple[str, Any] | None = None
        try:
            pending = set(tasks)
            while pending and winner is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    exc = task.exception()
                    if exc is None and winner is None:
                        winner = (tasks[task], task.result())
                    elif exc is not None:
                        if _passes(exc):
                            raise exc
                        errors[tasks[task]] = exc
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.branching -= 1
        if winner is None:
            raise RaceError(location, errors)
        for branch, _ in branches:
            if branch != winner[0]:
                self.history.delete_subtree(child_location(location, branch))
        entry.status = "completed"
        entry.data = {"w": winner[0], "o": winner[1]}
        self.history.touch(location)
        await self.commit()
        return winner


def _cancelled_run(task: asyncio.Future[Any]) -> bool:
    """The branch ended because the run's cancel landed in it."""
    return task.done() and not task.cancelled() and isinstance(task.exception(), WorkflowCancelled)


__all__ = ["DETERMINISTIC_KINDS", "DeterminismPrimitives", "VersionPrimitives"]


class VersionPrimitives(RunnerCore):
    """``ctx.rollback_checkpoint``, ``ctx.removed`` and ``ctx.get_version``."""

    async def rollback_checkpoint(self, scope: str, name: str) -> None:
        """Record a rollback checkpoint (steps after it may have rollback handlers)."""
        location, entry = self.expect(scope, name, "rollback_checkpoint")
        if entry is None:
            self.history.record(location, Entry("rollback_checkpoint", "completed"))
            self.stage()
        self.rollbacks.checkpoint()

    async def removed(self, scope: str, name: str, original_kind: str) -> None:
        """Accept (and skip) an old entry of ``original_kind``, or record a placeholder."""
        self.check_evicted()
        validate_name(name)
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is None:
            self.history.expect(location, "removed")
            self.history.record(location, Entry("removed", "completed", data={"ok": original_kind}))
            self.stage()
            return
        if entry.kind not in (original_kind, "removed"):
            raise Divergence(
                location,
                f"`{location}` is a {entry.kind} in history, not a "
                f"{original_kind}; fix the kind given to removed().",
            )
        self.history.visit_subtree(location)

    async def get_version(self, scope: str, name: str, latest: int) -> int:
        """Resolve a version once per position and record it."""
        self.check_evicted()
        validate_name(name)
        if latest < 1:
            raise ValueError("get_version: latest must be >= 1")
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is not None:
            self.history.expect(location, "version_check")
            return int(entry.data["v"])
        version = 1 if self.history.has_unvisited_below(scope) else latest
        self.history.record(location, Entry("version_check", "completed", data={"v": version}))
        self.stage()
        return version


# How each kind draws its value at the first execution, in the plain form stored.
_DRAWS: dict[str, Callable[[WorkflowHost], Any]] = {
    "now": lambda host: host.now_ms(),  # the actor's clock: a test env's moves with it
    "random": lambda host: random.random(),
    "uuid4": lambda host: str(uuid.uuid4()),
}
DETERMINISTIC_KINDS = frozenset(_DRAWS)


class DeterminismPrimitives(RunnerCore):
    """``ctx.now``, ``ctx.random`` and ``ctx.uuid4``: values drawn once, then replayed."""

    async def deterministic(self, scope: str, name: str, kind: str) -> Any:
        """The value recorded at ``scope/name`` for ``kind`` (drawn and committed the
        first time), in plain form: epoch milliseconds (``now``), a float in [0, 1)
        (``random``) or a UUID's string (``uuid4``)."""
        draw = _DRAWS[kind]
        location, entry = self.expect(scope, name, kind)
        if entry is not None and entry.kind == kind and "o" in entry.data:
            return entry.data["o"]
        # New, or a placeholder of ctx.removed(...) at this name: draw it now.
        value = draw(self.host)
        self.history.record(location, Entry(kind, "completed", data={"o": value}))
        await self.commit()
        return value

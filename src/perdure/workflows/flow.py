"""Control flow: loops, durable sleeps, join, race and try blocks."""

from __future__ import annotations

import asyncio
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
from perdure.workflows.runner_support import error_info

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
            result = TryResult(
                False, failure={"source": source, "name": location, "error": error_info(exc)}
            )
        except (Divergence, PerdureError):
            raise
        except Exception as exc:
            if "block" not in catch:
                raise
            result = TryResult(
                False, failure={"source": "block", "name": location, "error": error_info(exc)}
            )
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

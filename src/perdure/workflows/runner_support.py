"""Helpers of the workflow runner: running a step function, error records, rollbacks."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perdure.errors import PerdureError, StepExhausted, WorkflowError
from perdure.workflows.context import StepContext
from perdure.workflows.history import Entry

if TYPE_CHECKING:
    from perdure.workflows.core import RunnerCore

__all__ = ["RollbackRegistry", "error_info", "run_step_fn", "step_failure"]


async def run_step_fn(
    fn: Callable[[StepContext], Any], context: StepContext, timeout: float
) -> Any:
    """Call a (sync or async) step function; an async one is cancelled after ``timeout``."""
    result = fn(context)
    if not inspect.isawaitable(result):
        return result
    if timeout and timeout > 0:
        async with asyncio.timeout(timeout):
            return await result
    return await result


def error_info(error: BaseException) -> dict[str, Any]:
    """A storable description of an error: ``{name, message, group?, code?, metadata?}``."""
    info: dict[str, Any] = {"name": type(error).__name__, "message": str(error) or repr(error)}
    if isinstance(error, PerdureError):
        info.update(group=error.group, code=error.code)
        if error.metadata is not None:
            info["metadata"] = error.metadata
    return info


@dataclass(slots=True)
class _Compensation:
    seq: int
    location: str
    entry: Entry
    handler: Callable[[StepContext, Any], Any]


class RollbackRegistry:
    """Steps with rollback handlers seen in this execution, undone in reverse order.

    Replay visits every completed step before the failure point, so the handlers of all
    completed steps are known when a terminal failure happens. Each finished compensation
    is recorded (``rb`` on the step's entry) so a restart resumes where it stopped.
    """

    def __init__(self) -> None:
        self._items: dict[str, _Compensation] = {}
        self._has_checkpoint = False

    def checkpoint(self) -> None:
        """A rollback checkpoint was reached."""
        self._has_checkpoint = True

    def require_checkpoint(self, location: str) -> None:
        """Steps with rollback handlers need an earlier ``rollback_checkpoint``."""
        if not self._has_checkpoint:
            raise WorkflowError(
                f"Step `{location}` has a rollback handler but no ctx.rollback_checkpoint(...) "
                "comes before it.",
                code="rollback_checkpoint_missing",
            )

    def note(
        self, entry: Entry, location: str, handler: Callable[[StepContext, Any], Any] | None
    ) -> None:
        """Remember a completed step's handler."""
        if handler is not None:
            self._items[location] = _Compensation(entry.seq, location, entry, handler)

    async def run(self, runner: RunnerCore) -> None:
        """Run pending compensations, newest first, recording each one."""
        for item in sorted(self._items.values(), key=lambda c: c.seq, reverse=True):
            if item.entry.data.get("rb"):
                continue
            context = StepContext(runner.host, item.location)
            try:
                result = item.handler(context, item.entry.data.get("o"))
                if inspect.isawaitable(result):
                    await result
                context.stage_effects()
            except Exception as exc:
                context.close()
                await runner.report_error(
                    {
                        "rollback": {
                            "workflowId": runner.host.actor_id,
                            "stepName": item.location,
                            "error": error_info(exc),
                        }
                    }
                )
                raise
            events = context.close()
            item.entry.data["rb"] = True
            runner.history.touch(item.location)
            runner.publish(events)
            await runner.commit()


def step_failure(exc: StepExhausted) -> dict[str, Any]:
    """A step's terminal failure as ``ctx.try_step`` returns it (rivetkit's
    ``TryStepFailure``), and as ``ctx.try_`` names it under ``step``."""
    return {
        "kind": exc.kind,
        "stepName": exc.location,
        "attempts": exc.attempts,
        "error": exc.error,
    }

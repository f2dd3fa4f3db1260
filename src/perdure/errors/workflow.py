"""Errors of the workflow engine."""

from __future__ import annotations

from typing import Any, ClassVar

from perdure.errors.base import EngineSignal, WorkflowError

__all__ = [
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "CriticalError",
    "Evicted",
    "HistoryDiverged",
    "JoinError",
    "RaceError",
    "StepContextExpired",
    "StepExhausted",
    "WorkflowCancelled",
    "WorkflowFailed",
    "WorkflowFailure",
    "WorkflowNotRunning",
    "WorkflowTimedOut",
]


class CriticalError(Exception):
    """Raise inside a step to fail it at once, without retries."""


class Evicted(EngineSignal):
    """The actor is going to sleep: the workflow stops at this point and replays later."""


class WorkflowFailure(WorkflowError):
    """A terminal failure of a primitive (a step out of retries, a failed join or race)."""


class StepExhausted(WorkflowFailure):
    """A step failed for good: out of retries, timed out, or raised ``CriticalError``."""

    default_code = "step_failed"

    def __init__(self, location: str, error: dict[str, Any], attempts: int, kind: str) -> None:
        super().__init__(
            f"Step `{location}` failed after {attempts} attempt{'s' if attempts != 1 else ''} "
            f"({kind}): {error.get('message', '')}",
            metadata={"step": location, "attempts": attempts, "kind": kind, "error": error},
        )
        self.location = location
        self.error = error
        self.attempts = attempts
        self.kind = kind


class JoinError(WorkflowFailure):
    """One or more branches of a join failed."""

    default_code = "join_failed"

    def __init__(self, location: str, errors: dict[str, BaseException]) -> None:
        names = ", ".join(sorted(errors))
        super().__init__(
            f"Join `{location}` failed in branch(es) {names}.",
            metadata={"join": location, "branches": {k: str(v) for k, v in errors.items()}},
        )
        self.location = location
        self.errors = errors


class RaceError(WorkflowFailure):
    """Every branch of a race failed."""

    default_code = "race_failed"

    def __init__(self, location: str, errors: dict[str, BaseException]) -> None:
        super().__init__(
            f"Every branch of race `{location}` failed.",
            metadata={"race": location, "branches": {k: str(v) for k, v in errors.items()}},
        )
        self.location = location
        self.errors = errors


class HistoryDiverged(WorkflowError):
    """The workflow code no longer matches its recorded history."""

    default_code = "history_diverged"

    def __init__(self, location: str, message: str) -> None:
        super().__init__(message, metadata={"location": location})
        self.location = location


class StepContextExpired(WorkflowError):
    """A step context was used after its step finished."""

    default_code = "step_context_expired"


class RepairRefused(WorkflowError):
    """The workflow cannot be repaired that way now (409)."""

    status: ClassVar[int] = 409


class UnknownLocation(WorkflowError):
    """The history holds no entry at the location asked for (404)."""

    default_code: ClassVar[str] = "unknown_step"
    status: ClassVar[int] = 404

    def __init__(self, location: str) -> None:
        super().__init__(
            f"The workflow's history has no entry at `{location}`.",
            metadata={"location": location},
        )


class WorkflowCancelled(WorkflowError):
    """The workflow run was cancelled (``workflow.cancelled``, 409).

    Raised inside the workflow at the await where it stands when a cancel lands (its
    ``finally`` blocks and ``ctx.rollback`` compensations then run), by
    ``workflow_result()`` for a run that ended cancelled, and to a sender waiting on a
    message the cancelled run had taken. ``metadata``: ``{"reason": ...}``.
    """

    default_code: ClassVar[str] = "cancelled"
    status: ClassVar[int] = 409

    def __init__(self, reason: str | None = None) -> None:
        text = "The workflow was cancelled" + (f": {reason}" if reason else ".")
        super().__init__(text, metadata={"reason": reason})
        self.reason = reason


class WorkflowTimedOut(WorkflowCancelled):
    """The run reached its deadline (``workflow(timeout=...)``; ``workflow.timed_out``).

    Lands like a cancel (the workflow sees it at the await where it stands, its
    ``finally`` blocks and ``ctx.rollback`` compensations run), and the run then ends
    ``failed`` with this error stored: ``workflow_result()`` raises
    :class:`WorkflowFailed` whose ``error["code"]`` is ``"timed_out"``. A subclass of
    :class:`WorkflowCancelled`, so cleanup written for a cancel runs for a deadline too.
    ``metadata``: ``{"reason": "deadline", "timeout": seconds, "deadlineAt": epoch ms}``.
    """

    default_code: ClassVar[str] = "timed_out"

    def __init__(self, timeout: float, deadline_at: int) -> None:
        WorkflowError.__init__(
            self,
            f"The workflow ran past its deadline ({timeout:g} s after it started).",
            metadata={"reason": "deadline", "timeout": timeout, "deadlineAt": deadline_at},
        )
        self.reason = "deadline"
        self.timeout = timeout
        self.deadline_at = deadline_at


class WorkflowFailed(WorkflowError):
    """``workflow_result()`` of a run that ended failed (``workflow.failed``, 409);
    ``error`` (also the metadata) is the failure the run stored."""

    default_code: ClassVar[str] = "failed"
    status: ClassVar[int] = 409

    def __init__(self, error: dict[str, Any] | None) -> None:
        error = error or {}
        super().__init__(
            f"The workflow failed: {error.get('message', 'no error was recorded')}",
            metadata=error,
        )
        self.error = error


class WorkflowNotRunning(WorkflowError):
    """A control that needs a live run (cancel, pause, resume) asked of a run that has
    finished, or a resume of a run that is not paused (``workflow.not_running``, 409)."""

    default_code: ClassVar[str] = "not_running"
    status: ClassVar[int] = 409

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message, metadata={"status": status})


class ChildWorkflowFailed(WorkflowFailed, WorkflowFailure):
    """A child workflow the run waited for ended failed (``workflow.child_failed``):
    raised at ``ctx.wait_child``, catchable like a failed step (``ctx.try_`` catches it
    as ``"child"``). ``error`` is the child's stored failure; ``child_id`` names it."""

    default_code: ClassVar[str] = "child_failed"

    def __init__(self, child_id: str, error: dict[str, Any] | None) -> None:
        self.error = error or {}
        self.child_id = child_id
        text = f"Child workflow {child_id} failed: {self.error.get('message', 'no error')}"
        WorkflowError.__init__(self, text, metadata={**self.error, "childId": child_id})


class ChildWorkflowCancelled(WorkflowCancelled, WorkflowFailure):
    """A child workflow the run waited for ended cancelled (``workflow.child_cancelled``):
    raised at ``ctx.wait_child``. Not the run's own cancel: uncaught, it fails the run
    (unless the run's own cancel has landed, when the run ends cancelled)."""

    default_code: ClassVar[str] = "child_cancelled"

    def __init__(self, child_id: str, reason: str | None) -> None:
        self.reason = reason
        self.child_id = child_id
        text = f"Child workflow {child_id} was cancelled" + (f": {reason}" if reason else ".")
        WorkflowError.__init__(self, text, metadata={"reason": reason, "childId": child_id})

"""Errors of the workflow engine."""

from __future__ import annotations

from typing import Any, ClassVar

from perdure.errors.base import EngineSignal, WorkflowError

__all__ = [
    "CriticalError",
    "Evicted",
    "HistoryDiverged",
    "JoinError",
    "RaceError",
    "StepContextExpired",
    "StepExhausted",
    "WorkflowFailure",
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
        self.errors = errors


class RaceError(WorkflowFailure):
    """Every branch of a race failed."""

    default_code = "race_failed"

    def __init__(self, location: str, errors: dict[str, BaseException]) -> None:
        super().__init__(
            f"Every branch of race `{location}` failed.",
            metadata={"race": location, "branches": {k: str(v) for k, v in errors.items()}},
        )
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

"""Durable workflows: an actor whose ``run`` replays after a crash without repeating steps.

``workflow(...)`` takes everything ``actor(...)`` takes; its ``run(ctx)`` receives a
:class:`WorkflowContext` with ``step``, ``loop``, ``sleep``, ``queue.next`` and friends.
"""

from perdure.definition import workflow
from perdure.errors import (
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    CriticalError,
    HistoryDiverged,
    JoinError,
    RaceError,
    StepContextExpired,
    StepExhausted,
)
from perdure.workflows.context import (
    ChildWorkflow,
    Loop,
    LoopBreak,
    LoopContinue,
    StepContext,
    TryResult,
    WorkflowContext,
)

__all__ = [
    "ChildWorkflow",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "CriticalError",
    "HistoryDiverged",
    "JoinError",
    "Loop",
    "LoopBreak",
    "LoopContinue",
    "RaceError",
    "StepContext",
    "StepContextExpired",
    "StepExhausted",
    "TryResult",
    "WorkflowContext",
    "workflow",
]

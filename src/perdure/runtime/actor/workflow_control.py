"""The built-in actions of a workflow actor: its status and its controls.

``$workflow`` (the status), ``$workflow_cancel`` (``[reason]``), ``$workflow_pause``,
``$workflow_resume`` and ``$workflow_result`` (``[timeout seconds]``), and between a
parent and its children ``$workflow_parent`` (``[parent]``) and
``$workflow_child_ended`` (``[child id]``) (docs/workflow-children.md), are actions of
every workflow actor that does not define an action of that name itself
(:data:`~perdure.definition.WORKFLOW_ACTIONS`). Being actions, they reach the actor by
every way an action does (HTTP, a WebSocket, the in-process client, another node), with
the same access rules (``on_before_connect``). docs/workflow-control.md says what each
guarantees.

``$workflow_result`` waits for the run to end, pushed, not polled: the caller waits on
the runtime's :class:`~perdure.runtime.actor.workflow_outcomes.WorkflowOutcomes`, which
the run answers when its end is durable. The wait holds no connection and does not keep
the actor awake, and one call waits at most :data:`MAX_RESULT_WAIT` seconds; a caller
that gets a status that has not ended asks again.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Protocol

from perdure.errors import InvalidRequest
from perdure.handles import (
    LONGEST_WAIT,
    WORKFLOW_CANCEL_ACTION,
    WORKFLOW_CHILD_ENDED_ACTION,
    WORKFLOW_PARENT_ACTION,
    WORKFLOW_PAUSE_ACTION,
    WORKFLOW_RESULT_ACTION,
    WORKFLOW_RESUME_ACTION,
    WORKFLOW_STATUS_ACTION,
)
from perdure.workflows.control import FINISHED

if TYPE_CHECKING:
    from perdure.runtime.actor.workflow_outcomes import WorkflowOutcomes
    from perdure.workflows.engine import WorkflowRunner


class _OutcomesHost(Protocol):
    @property
    def outcomes(self) -> WorkflowOutcomes: ...


class WorkflowActor(Protocol):
    """What the built-in workflow actions need of the live actor (ActorInstance has it)."""

    @property
    def actor_id(self) -> str: ...

    @property
    def host(self) -> _OutcomesHost: ...

    @property
    def workflow(self) -> WorkflowRunner | None: ...

    def workflow_status(self) -> dict[str, Any]: ...

    async def current_workflow_status(self) -> dict[str, Any]: ...


__all__ = ["MAX_REASON", "MAX_RESULT_WAIT", "WorkflowActor", "workflow_action"]

MAX_RESULT_WAIT = LONGEST_WAIT
"""The longest one ``$workflow_result`` call waits (seconds); clients ask again (the
bound they know as :data:`perdure.handles.LONGEST_WAIT`)."""

MAX_REASON = 1024
"""The longest cancel reason kept (characters)."""


async def workflow_action(instance: WorkflowActor, name: str, args: list[Any]) -> Any:
    """Run the built-in workflow action ``name`` with ``args``; the workflow's status
    (after the control, for a control)."""
    if name == WORKFLOW_STATUS_ACTION:
        return await instance.current_workflow_status()
    if name == WORKFLOW_RESULT_ACTION:
        return await _result(instance, _timeout(args))
    runner = await _runner(instance)
    if name == WORKFLOW_CANCEL_ACTION:
        return await runner.request_cancel(_reason(args))
    if name == WORKFLOW_PARENT_ACTION:
        return await runner.adopt(_parent(args))
    if name == WORKFLOW_CHILD_ENDED_ACTION:
        await runner.child_ended(_child_id(args))
        return None
    _no_arguments(name, args)
    if name == WORKFLOW_PAUSE_ACTION:
        return await runner.request_pause(True)
    if name == WORKFLOW_RESUME_ACTION:
        return await runner.request_pause(False)
    raise AssertionError(f"not a workflow action: {name}")


async def _runner(instance: WorkflowActor) -> WorkflowRunner:
    await instance.current_workflow_status()  # the run has loaded its status record
    runner = instance.workflow
    if runner is None:
        raise AssertionError("a running workflow actor has a runner")
    return runner


async def _result(instance: WorkflowActor, timeout: float) -> dict[str, Any]:
    """The status once the run has ended, or as it stands after ``timeout`` seconds."""
    outcomes = instance.host.outcomes
    ended = outcomes.watch(instance.actor_id)  # before the check: no end slips between
    try:
        status = await instance.current_workflow_status()
        if status["status"] in FINISHED or timeout == 0:
            return status
        try:
            async with asyncio.timeout(timeout):
                return await ended
        except TimeoutError:
            return instance.workflow_status()
    finally:
        outcomes.forget(instance.actor_id, ended)


def _timeout(args: list[Any]) -> float:
    if not args or args[0] is None:
        return MAX_RESULT_WAIT
    if len(args) > 1:
        raise InvalidRequest(f"`{WORKFLOW_RESULT_ACTION}` takes one argument: a timeout.")
    value = args[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(
            f"`{WORKFLOW_RESULT_ACTION}`'s timeout is a number of seconds, got {value!r}."
        )
    if value < 0:
        raise InvalidRequest(f"`{WORKFLOW_RESULT_ACTION}`'s timeout cannot be negative.")
    return min(float(value), MAX_RESULT_WAIT)


def _reason(args: list[Any]) -> str | None:
    if not args or args[0] is None:
        return None
    if len(args) > 1 or not isinstance(args[0], str):
        raise InvalidRequest(f"`{WORKFLOW_CANCEL_ACTION}` takes one argument: a reason (text).")
    return args[0][:MAX_REASON]


def _parent(args: list[Any]) -> dict[str, Any]:
    parent = args[0] if len(args) == 1 else None
    if (
        not isinstance(parent, dict)
        or not all(isinstance(parent.get(field), str) for field in ("id", "name", "at"))
        or not isinstance(parent.get("key"), list)
        or not isinstance(parent.get("detached"), bool)
    ):
        raise InvalidRequest(
            f"`{WORKFLOW_PARENT_ACTION}` takes one argument: "
            "{id, name, key, at, detached} of the parent workflow."
        )
    return {field: parent[field] for field in ("id", "name", "key", "at", "detached")}


def _child_id(args: list[Any]) -> str:
    if len(args) != 1 or not isinstance(args[0], str):
        raise InvalidRequest(f"`{WORKFLOW_CHILD_ENDED_ACTION}` takes one argument: a child's id.")
    return args[0]


def _no_arguments(name: str, args: list[Any]) -> None:
    if args:
        raise InvalidRequest(f"`{name}` takes no arguments.")

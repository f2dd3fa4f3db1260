"""perdure: durable actors and workflows for Python.

Define actors with :func:`actor` (or durable workflows with :func:`workflow`), register
them with :func:`setup`, and host them with :class:`ActorRuntime` (in-process) or
``perdure serve module:registry`` (over HTTP and WebSocket).

The public names are loaded on first use (PEP 562), so that ``import perdure.client``
or ``from perdure import __version__`` does not load the engine (runtime, workflow
engine, stores, sqlite3): a client process needs none of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from perdure._version import __version__ as __version__

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ActionContext": "perdure.runtime",
    "ActionNotFound": "perdure.errors",
    "ActionTimedOut": "perdure.errors",
    "ActorAlreadyExists": "perdure.errors",
    "ActorContext": "perdure.runtime",
    "ActorDefinition": "perdure.definition",
    "ActorNotFound": "perdure.errors",
    "ActorOptions": "perdure.definition",
    "ActorRuntime": "perdure.runtime",
    "CriticalError": "perdure.errors",
    "CronFire": "perdure.runtime",
    "CronJobInfo": "perdure.runtime",
    "InternalError": "perdure.errors",
    "InvalidRequest": "perdure.errors",
    "Loop": "perdure.workflows.context",
    "PerdureError": "perdure.errors",
    "Registry": "perdure.registry",
    "ScheduleError": "perdure.errors",
    "ScheduledEventInfo": "perdure.runtime",
    "ScheduledFireInfo": "perdure.runtime",
    "StateNotSerializable": "perdure.errors",
    "StepContext": "perdure.workflows.context",
    "UserError": "perdure.errors",
    "WorkflowContext": "perdure.workflows.context",
    "actor": "perdure.definition",
    "db": "perdure.definition",
    "event": "perdure.definition",
    "queue": "perdure.definition",
    "setup": "perdure.registry",
    "workflow": "perdure.definition",
}

__all__ = [
    "ActionContext",
    "ActionNotFound",
    "ActionTimedOut",
    "ActorAlreadyExists",
    "ActorContext",
    "ActorDefinition",
    "ActorNotFound",
    "ActorOptions",
    "ActorRuntime",
    "CriticalError",
    "CronFire",
    "CronJobInfo",
    "InternalError",
    "InvalidRequest",
    "Loop",
    "PerdureError",
    "Registry",
    "ScheduleError",
    "ScheduledEventInfo",
    "ScheduledFireInfo",
    "StateNotSerializable",
    "StepContext",
    "UserError",
    "WorkflowContext",
    "actor",
    "db",
    "event",
    "queue",
    "setup",
    "workflow",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perdure' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from perdure.definition import ActorDefinition, ActorOptions, actor, db, event, queue, workflow
    from perdure.errors import (
        ActionNotFound,
        ActionTimedOut,
        ActorAlreadyExists,
        ActorNotFound,
        CriticalError,
        InternalError,
        InvalidRequest,
        PerdureError,
        ScheduleError,
        StateNotSerializable,
        UserError,
    )
    from perdure.registry import Registry, setup
    from perdure.runtime import (
        ActionContext,
        ActorContext,
        ActorRuntime,
        CronFire,
        CronJobInfo,
        ScheduledEventInfo,
        ScheduledFireInfo,
    )
    from perdure.workflows.context import Loop, StepContext, WorkflowContext

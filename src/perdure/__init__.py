"""perdure: durable actors and workflows for Python.

Define actors with :func:`actor` (or durable workflows with ``workflow``), register them
with :func:`setup`, and host them with :class:`ActorRuntime` (in-process) or
``perdure serve module:registry`` (over HTTP and WebSocket).
"""

from perdure.definition import ActorDefinition, ActorOptions, actor, event, queue
from perdure.errors import (
    ActionNotFound,
    ActionTimedOut,
    ActorAlreadyExists,
    ActorNotFound,
    InternalError,
    InvalidRequest,
    PerdureError,
    ScheduleError,
    StateNotSerializable,
    UserError,
)
from perdure.registry import Registry, setup
from perdure.runtime.context import ActionContext, ActorContext
from perdure.runtime.runtime import ActorRuntime
from perdure.runtime.schedule_info import (
    CronFire,
    CronJobInfo,
    ScheduledEventInfo,
    ScheduledFireInfo,
)
from perdure.workflow.context import Loop, StepContext, WorkflowContext
from perdure.workflow.errors import CriticalError

# isort: split
# Importing the ``perdure.workflow`` package above binds ``perdure.workflow`` to the
# package; the public name is the definition function, so bind it last.
from perdure.definition import workflow

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
    "event",
    "queue",
    "setup",
    "workflow",
]
__version__ = "0.1.0"

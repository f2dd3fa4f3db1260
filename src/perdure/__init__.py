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
    StateNotSerializable,
    UserError,
)
from perdure.registry import Registry, setup
from perdure.runtime.runtime import ActorRuntime

__all__ = [
    "ActionNotFound",
    "ActionTimedOut",
    "ActorAlreadyExists",
    "ActorDefinition",
    "ActorNotFound",
    "ActorOptions",
    "ActorRuntime",
    "InternalError",
    "InvalidRequest",
    "PerdureError",
    "Registry",
    "StateNotSerializable",
    "UserError",
    "actor",
    "event",
    "queue",
    "setup",
]
__version__ = "0.1.0"

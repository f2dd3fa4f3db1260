"""The roots of the error tree (:mod:`perdure.errors` draws all of it) and the errors of
actor code and its requests."""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ActionNotFound",
    "ActionTimedOut",
    "ActorAborted",
    "ActorAlreadyExists",
    "ActorNotFound",
    "ActorStopping",
    "ArgumentError",
    "DeadLetterNotFound",
    "DefinitionError",
    "EngineSignal",
    "InternalError",
    "InvalidRequest",
    "MessageError",
    "MessageNotDead",
    "PerdureError",
    "QueueError",
    "ScheduleError",
    "StateNotSerializable",
    "UserError",
    "WorkflowError",
    "status_for",
]


class PerdureError(Exception):
    """Base of every error that has a wire identity (``group.code``)."""

    group: ClassVar[str] = "actor"
    default_code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500
    public: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        metadata: Any = None,
        group: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.metadata = metadata
        if group is not None:
            self.group = group  # type: ignore[misc]

    @property
    def identifier(self) -> str:
        """``"group.code"``, as used in close reasons and the ``x-rivet-error`` header."""
        return f"{self.group}.{self.code}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.identifier}: {self.message!r})"


class UserError(PerdureError):
    """An error raised on purpose by actor code; its message, code and metadata reach the caller.

    ``raise UserError("Insufficient funds", code="insufficient_funds", metadata={"need": 5})``
    """

    group = "user"
    default_code = "user_error"
    status = 500


class ActorNotFound(PerdureError):
    default_code = "not_found"
    status = 404

    def __init__(self, message: str = "The actor does not exist or was destroyed.") -> None:
        super().__init__(message)


class ActorAlreadyExists(PerdureError):
    default_code = "duplicate_key"
    status = 400

    def __init__(self, name: str, key: tuple[str, ...]) -> None:
        super().__init__(
            f"An actor named `{name}` with key {list(key)!r} already exists.",
            metadata={"name": name, "key": list(key)},
        )


class ActionNotFound(PerdureError):
    default_code = "action_not_found"
    status = 404

    def __init__(self, action: str) -> None:
        super().__init__(f"Action `{action}` was not found.")


class ActionTimedOut(PerdureError):
    default_code = "action_timed_out"
    status = 408

    # rivetkit 2.3.19's text, byte for byte; the action and the limit go to the metadata.
    def __init__(self, action: str, timeout: float) -> None:
        super().__init__("Action timed out", metadata={"action": action, "timeout": timeout})


class InvalidRequest(PerdureError):
    default_code = "invalid_request"
    status = 400


class InternalError(PerdureError):
    default_code = "internal_error"
    status = 500

    # rivetkit 2.3.19's text, byte for byte (clients match on it).
    def __init__(self, message: str = "An internal error occurred") -> None:
        super().__init__(message)


class ActorAborted(PerdureError):
    default_code = "aborted"
    status = 500

    # rivetkit 2.3.19's text, byte for byte.
    def __init__(self, message: str = "Actor aborted") -> None:
        super().__init__(message)


class ActorStopping(PerdureError):
    default_code = "stopping"
    status = 503

    # rivetkit 2.3.19's text (rivetkit-core's ActorLifecycle::Stopping), byte for byte.
    def __init__(self, message: str = "Actor is stopping.", *, code: str | None = None) -> None:
        super().__init__(message, code=code)


class StateNotSerializable(PerdureError):
    group = "state"
    default_code = "not_serializable"
    status = 500


class QueueError(PerdureError):
    group = "queue"
    default_code = "invalid"
    status = 400


class DeadLetterNotFound(PerdureError):
    """``actor.dead_letter_not_found``: the actor has no dead letter with this id
    (docs/queues.md). An actor error, not a queue one: the ``queue`` group answers 400
    whatever the code, as the original server does."""

    default_code = "dead_letter_not_found"
    status = 404


class MessageNotDead(PerdureError):
    """``actor.message_not_dead``: a requeue or drop named a message of the live queue."""

    default_code = "message_not_dead"
    status = 409


class MessageError(PerdureError):
    group = "message"
    default_code = "invalid"
    status = 400


class ScheduleError(PerdureError):
    group = "schedule"
    default_code = "invalid"
    status = 400


class WorkflowError(PerdureError):
    group = "workflow"
    default_code = "failed"
    status = 500


class DefinitionError(PerdureError):
    """An actor definition or registry is invalid; raised when the registry is built."""

    group = "config"
    default_code = "invalid"
    status = 500


class ArgumentError(PerdureError, TypeError, ValueError):
    """Actor code called perdure's API with an argument it cannot take.

    Codes: ``unknown_argument`` (a keyword the call does not have, e.g. RivetKit's
    ``maxHistory`` for ``max_history``), ``options_object`` (RivetKit's one options
    object, ``every({name, interval})``, where Python takes keywords),
    ``invalid_duration`` (not seconds or a ``timedelta``), ``invalid_time`` (not an
    aware ``datetime`` or epoch milliseconds), ``names_twice`` (a receive given its
    queues both positionally and as ``names=``).
    Raised where the call is made, so the traceback points at it. It is a ``TypeError``
    (what Python raises for a wrong keyword) and a ``ValueError`` (a naive datetime), so
    code written against either keeps working. Public: a caller sees the message.
    """

    group = "api"
    default_code = "invalid_argument"
    status = 500


class EngineSignal(BaseException):
    """Engine control flow (eviction, suspension). Derives from BaseException on purpose."""


_STATUS_BY_GROUP = {"queue": 400, "message": 400, "schedule": 400}


def status_for(error: PerdureError) -> int:
    """The HTTP status for an error, following the original server's mapping."""
    if error.group in _STATUS_BY_GROUP:
        return _STATUS_BY_GROUP[error.group]
    return error.status

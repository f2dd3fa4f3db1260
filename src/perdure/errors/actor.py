"""Errors of requests to a live actor that are not about its own code: access refused,
no raw handler, no such schedule, an idempotency key refused; and a misuse of the
actor's KV space."""

from __future__ import annotations

from typing import Any, ClassVar

from perdure.errors.base import PerdureError


class AccessForbidden(PerdureError):
    """A request refused by access control: 403 ``auth.forbidden`` (rivetkit's error for
    a refused ``canSubscribe``/``canPublish``, and for a wrong server token)."""

    group = "auth"
    default_code = "forbidden"
    status = 403


class AccessUnauthorized(AccessForbidden):
    """A request without the server's token: 401 ``auth.unauthorized``."""

    default_code = "unauthorized"
    status = 401


class NoRawHandler(PerdureError):
    """The actor has no ``on_request``/``on_websocket`` hook: its raw routes do not exist."""

    default_code = "route_not_found"
    status = 404

    def __init__(self, name: str, hook: str) -> None:
        rivet = "onRequest" if hook == "on_request" else "onWebSocket"
        super().__init__(
            f"Actor `{name}` has no `{hook}` hook (rivetkit's `{rivet}`): it serves no raw route."
        )


class StateNotEnabled(PerdureError):
    """``c.state`` of an actor declared without ``state``/``create_state``:
    ``actor.state_not_enabled`` (500; rivetkit's StateNotEnabled, its text)."""

    default_code = "state_not_enabled"
    status = 500

    def __init__(self) -> None:
        super().__init__(
            "State not enabled. Must implement `create_state` or `state` to use state."
        )


class ScheduleNotFound(PerdureError):
    """``actor.schedule_not_found`` (404)."""

    default_code: ClassVar[str] = "schedule_not_found"
    status: ClassVar[int] = 404


class IdempotencyError(PerdureError):
    """A request's idempotency key refused (docs/idempotency.md): ``key_invalid`` (400:
    empty, longer than 256 characters, or not printable ASCII), ``key_reused`` (409: the key
    was first used for another operation or other arguments), ``answer_not_kept`` (409:
    the first request was applied, but its answer was larger than the actor keeps)."""

    group = "idempotency"
    default_code = "key_invalid"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, metadata: Any = None) -> None:
        super().__init__(message, code=code, metadata=metadata)
        if code in ("key_reused", "answer_not_kept"):
            self.status = 409  # type: ignore[misc]


class KvError(PerdureError):
    """A use of an actor's KV space (``c.kv``, docs/storage.md) refused, 400:
    ``key_too_large``, ``value_too_large``, ``too_many_writes`` (staged in one commit),
    ``too_many_keys`` (in one batch read), ``key_invalid`` (not a str or bytes) and
    ``invalid_range`` (a start and an end of different types)."""

    group = "kv"
    default_code = "key_invalid"
    status = 400


class DbError(PerdureError):
    """A use of an actor's SQL database (``c.db``, docs/storage.md) refused or failed:
    ``full`` (507: past the database's ``max_size``), ``forbidden`` (400: a statement
    that could reach outside the actor, such as ``ATTACH`` or a pragma that changes how
    the database is kept), ``sql`` (400: SQLite refused the statement; ``metadata``
    names SQLite's error), ``closed`` (the actor has stopped), ``transaction`` (a
    transaction used after it ended, or nested) and ``not_configured`` (the actor has
    no ``db=``)."""

    group = "db"
    default_code = "sql"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, metadata: Any = None) -> None:
        super().__init__(message, code=code, metadata=metadata)
        if code == "full":
            self.status = 507  # type: ignore[misc]
        elif code in ("closed", "not_configured"):
            self.status = 500  # type: ignore[misc]

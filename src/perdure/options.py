"""An actor's options (:class:`ActorOptions`, docs/options.md), durations in seconds, and
``db()``, the spec of an actor's SQL database (docs/storage.md).

Kept apart from :mod:`perdure.definition`, which uses them, so that each stays readable.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from perdure._names import keywords_checked
from perdure.errors import DefinitionError

__all__ = ["ActorOptions", "DatabaseSpec", "Duration", "db", "seconds", "suggest", "with_option"]

Duration = float | int | _dt.timedelta


def seconds(value: Duration) -> float:
    """A duration given as seconds or ``timedelta``, as float seconds."""
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DefinitionError(f"A duration must be seconds or a timedelta, not {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class ActorOptions:
    """Per-actor options; defaults follow the original system."""

    sleep_timeout: float = 30.0
    action_timeout: float = 60.0
    sleep_grace_period: float = 15.0
    state_save_interval: float = 1.0
    create_vars_timeout: float = 5.0
    # rivetkit's onMigrateTimeout: db(on_migrate=...) and the on_migrate hook, each.
    on_migrate_timeout: float = 30.0
    create_conn_state_timeout: float = 5.0
    on_before_connect_timeout: float = 5.0
    on_connect_timeout: float = 5.0
    # rivetkit's onSleepTimeout/onDestroyTimeout; the grace period still bounds the stop.
    on_sleep_timeout: float = 5.0
    on_destroy_timeout: float = 5.0
    # rivetkit's runStopTimeout: how long a stop waits for `run` to return after the
    # abort signal before cancelling it (within the grace period).
    run_stop_timeout: float = 15.0
    no_sleep: bool = False
    max_queue_size: int = 1000
    max_queue_message_size: int = 65536
    max_schedules: int = 1000
    # The shortest `c.cron.every` interval (seconds); lower it for tests and demos.
    min_cron_interval: float = 5.0
    # The event log (docs/events.md): how many events, and how old (seconds), a
    # client can still resume from.
    event_log_max_events: int = 1000
    event_log_max_age: float = 86400.0
    idle_ttl: float = 0.0  # destroy after this long idle (docs/options.md); 0: never
    idempotency_retention: float = 86400.0  # seconds a key is kept (docs/idempotency.md)
    # A workflow run's deadline, counted from its start (docs/workflow-control.md,
    # "Deadline"); ``workflow(timeout=...)`` sets it. 0: none.
    workflow_timeout: float = 0.0
    # Bytes of encoded state past which a commit logs one warning per awake actor: every
    # commit encodes the whole state, so large data belongs in c.kv (docs/storage.md).
    state_size_warning: int = 1_048_576

    @classmethod
    def build(cls, actor_name: str, value: ActorOptions | Mapping[str, Any] | None) -> ActorOptions:
        """Validate options given as a mapping (or pass an ``ActorOptions`` through)."""
        if value is None:
            return cls()
        if isinstance(value, ActorOptions):
            return value
        known = {f.name: f for f in fields(cls)}
        converted: dict[str, Any] = {}
        for name, raw in value.items():
            if name not in known:
                raise DefinitionError(
                    f"Actor `{actor_name}`: unknown option `{name}`{suggest(name, known)}."
                )
            default = known[name].default
            if isinstance(default, bool):
                if not isinstance(raw, bool):
                    raise DefinitionError(f"Actor `{actor_name}`: option `{name}` must be a bool.")
                converted[name] = raw
            elif isinstance(default, float):
                converted[name] = seconds(raw)
                if converted[name] < 0:
                    raise DefinitionError(f"Actor `{actor_name}`: option `{name}` is negative.")
            else:
                if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
                    raise DefinitionError(
                        f"Actor `{actor_name}`: option `{name}` must be a positive integer."
                    )
                converted[name] = raw
        return cls(**converted)


def with_option(
    actor_options: ActorOptions | Mapping[str, Any] | None, name: str, value: Any, keyword: str
) -> ActorOptions | Mapping[str, Any]:
    """``actor_options`` with option ``name`` set to ``value``, given as the keyword
    ``keyword`` of the definition (``workflow(timeout=...)``); giving it both ways is a
    ``DefinitionError``. Checked with the other options when the registry is built."""
    if isinstance(actor_options, ActorOptions):
        default = ActorOptions()
        if getattr(actor_options, name) != getattr(default, name):
            raise DefinitionError(f"Give `{keyword}` or the option `{name}`, not both.")
        changes: dict[str, Any] = {name: seconds(value)}
        return dataclasses.replace(actor_options, **changes)
    given = dict(actor_options or {})
    if name in given:
        raise DefinitionError(f"Give `{keyword}` or the option `{name}`, not both.")
    given[name] = value
    return given


def suggest(name: str, candidates: Any) -> str:
    """`` (did you mean `x`?)`` for the closest of ``candidates``, or nothing."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


# An actor's SQL database is at most this large by default (``db(max_size=...)``).
DEFAULT_DB_MAX_SIZE = 1 << 30


@dataclass(frozen=True, slots=True)
class DatabaseSpec:
    """An actor's SQL database (``c.db``, docs/storage.md): ``on_migrate(db)`` runs at
    every wake before any other hook, in one transaction; ``max_size`` bounds it
    (bytes; ``db.full`` past it)."""

    on_migrate: Callable[..., Any] | None = None
    max_size: int = DEFAULT_DB_MAX_SIZE


@keywords_checked("db()")
def db(
    on_migrate: Callable[..., Any] | None = None, *, max_size: int = DEFAULT_DB_MAX_SIZE
) -> DatabaseSpec:
    """Give the actor an SQL database (SQLite's dialect) that lives in the store with
    its state: ``actor(db=db(on_migrate=migrate), ...)``, then ``await c.db.execute(sql,
    *params)``. ``on_migrate`` (sync or async) receives the database."""
    if on_migrate is not None and not callable(on_migrate):
        raise DefinitionError("db(): `on_migrate` must be callable.")
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 65_536:
        raise DefinitionError("db(): `max_size` is a number of bytes, at least 65536.")
    return DatabaseSpec(on_migrate, max_size)

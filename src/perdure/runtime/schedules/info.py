"""What the schedule API hands out: fire info, one-shot events, recurring jobs, fires.

Each type is a frozen dataclass read by attribute in Python (``fire.scheduled_at``) that
is *also* a read-only mapping with the wire's camelCase keys (``fire["scheduledAt"]``).
So an action can pass one on as it is — return it, put it in a queue body or in state —
and it travels as the plain object a TypeScript client expects. Keys whose value is
``None`` are absent from the mapping, as optional fields are on the wire (a one-shot's
fire info has no ``name``).

Instants come two ways: ``*_at`` attributes are epoch milliseconds (``int``), the values
the wire carries and the seed's programs store and compare; each has a ``*_time`` twin,
the same instant as an aware UTC ``datetime`` (``fire.scheduled_time``). A camelCase
attribute (``fire.scheduledAt``) fails with an ``AttributeError`` naming the snake_case one.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from perdure._names import SnakeCaseAttributes
from perdure._time import datetime_from_ms, utc_datetime

__all__ = [
    "CronFire",
    "CronJobInfo",
    "FireResult",
    "ScheduleKind",
    "ScheduledEventInfo",
    "ScheduledFireInfo",
]

ScheduleKind = Literal["at", "cron", "every"]
FireResult = Literal["running", "ok", "error", "skipped"]


class _WireMapping(SnakeCaseAttributes, Mapping[str, Any]):
    """Mapping view of a dataclass: ``_WIRE`` pairs each wire key with its attribute."""

    __slots__ = ()
    _WIRE: ClassVar[tuple[tuple[str, str], ...]] = ()

    def _present(self) -> Iterator[tuple[str, Any]]:
        for key, attribute in self._WIRE:
            value = getattr(self, attribute)
            if value is not None:
                yield key, value

    def __getitem__(self, key: str) -> Any:
        for wire_key, attribute in self._WIRE:
            if wire_key == key:
                value = getattr(self, attribute)
                if value is not None:
                    return value
                break
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._present())

    def __len__(self) -> int:
        return sum(1 for _ in self._present())

    def to_dict(self) -> dict[str, Any]:
        """A plain ``dict`` with the wire keys."""
        return dict(self._present())


class _Fired(_WireMapping):
    """The two instants of a fire: when it was due and when it fired."""

    __slots__ = ()
    scheduled_at: int
    fired_at: int

    @property
    def scheduled_time(self) -> _dt.datetime:
        """``scheduled_at`` as an aware UTC datetime."""
        return utc_datetime(self.scheduled_at)

    @property
    def fired_time(self) -> _dt.datetime:
        """``fired_at`` as an aware UTC datetime."""
        return utc_datetime(self.fired_at)


@dataclass(frozen=True, slots=True, eq=False)
class ScheduledFireInfo(_Fired):
    """Appended as the last argument of every scheduled action call.

    ``kind`` is ``"at"`` for a one-shot (``id`` is its UUID, ``name`` is ``None``) or
    ``"cron"``/``"every"`` for a recurring job (``id`` and ``name`` are the job's name).
    ``scheduled_at`` is the deadline the fire was due at — after downtime, the *first*
    missed deadline — and ``fired_at`` when it actually fired. Mapping keys: ``kind``,
    ``id``, ``name``, ``scheduledAt``, ``firedAt``.
    """

    kind: ScheduleKind
    id: str
    name: str | None
    scheduled_at: int
    fired_at: int

    _WIRE: ClassVar[tuple[tuple[str, str], ...]] = (
        ("kind", "kind"),
        ("id", "id"),
        ("name", "name"),
        ("scheduledAt", "scheduled_at"),
        ("firedAt", "fired_at"),
    )


@dataclass(frozen=True, slots=True, eq=False)
class ScheduledEventInfo(_WireMapping):
    """A pending one-shot: ``c.schedule.get``/``list``. Keys: ``id, action, args, runAt``."""

    id: str
    action: str
    args: list[Any]
    run_at: int

    _WIRE: ClassVar[tuple[tuple[str, str], ...]] = (
        ("id", "id"),
        ("action", "action"),
        ("args", "args"),
        ("runAt", "run_at"),
    )

    @property
    def run_time(self) -> _dt.datetime:
        """``run_at`` as an aware UTC datetime."""
        return utc_datetime(self.run_at)


@dataclass(frozen=True, slots=True, eq=False)
class CronJobInfo(_WireMapping):
    """A recurring job: ``c.cron.get``/``list``.

    ``kind="cron"`` jobs have ``expression`` and ``timezone``; ``kind="every"`` jobs have
    ``interval_ms`` (``interval`` gives it in seconds). Keys: ``name, kind, action, args,
    nextRunAt, lastRunAt, maxHistory, expression, timezone, interval`` (milliseconds, as
    on the wire).
    """

    name: str
    kind: Literal["cron", "every"]
    action: str
    args: list[Any]
    next_run_at: int
    last_run_at: int | None
    max_history: int
    expression: str | None = None
    timezone: str | None = None
    interval_ms: int | None = None

    _WIRE: ClassVar[tuple[tuple[str, str], ...]] = (
        ("name", "name"),
        ("kind", "kind"),
        ("action", "action"),
        ("args", "args"),
        ("nextRunAt", "next_run_at"),
        ("lastRunAt", "last_run_at"),
        ("maxHistory", "max_history"),
        ("expression", "expression"),
        ("timezone", "timezone"),
        ("interval", "interval_ms"),
    )

    @property
    def interval(self) -> float | None:
        """The interval of an ``every`` job in seconds (``None`` for cron jobs)."""
        return None if self.interval_ms is None else self.interval_ms / 1000

    @property
    def next_run_time(self) -> _dt.datetime:
        """``next_run_at`` as an aware UTC datetime."""
        return utc_datetime(self.next_run_at)

    @property
    def last_run_time(self) -> _dt.datetime | None:
        """``last_run_at`` as an aware UTC datetime (``None`` before the first run)."""
        return datetime_from_ms(self.last_run_at)


@dataclass(frozen=True, slots=True, eq=False)
class CronFire(_Fired):
    """One entry of ``c.cron.history``: a fire and how it ended.

    ``result`` is ``"running"``, ``"ok"``, ``"error"`` (with ``error`` =
    ``{group, code, message}``) or ``"skipped"`` (the previous run was still going).
    Keys: ``action, scheduledAt, firedAt, finishedAt, result, error``.
    """

    action: str
    scheduled_at: int
    fired_at: int
    finished_at: int | None
    result: FireResult
    error: dict[str, Any] | None = None

    _WIRE: ClassVar[tuple[tuple[str, str], ...]] = (
        ("action", "action"),
        ("scheduledAt", "scheduled_at"),
        ("firedAt", "fired_at"),
        ("finishedAt", "finished_at"),
        ("result", "result"),
        ("error", "error"),
    )

    @property
    def finished_time(self) -> _dt.datetime | None:
        """``finished_at`` as an aware UTC datetime (``None`` while running)."""
        return datetime_from_ms(self.finished_at)

"""Schedule arithmetic and argument checks: pure functions, no I/O, no asyncio.

Cron expressions are standard five-field ones, evaluated by ``croniter`` on the *local
wall-clock time* of an IANA zone (``zoneinfo``). Each wall-clock match fires at most once:
a time that does not exist locally (the hour skipped when DST starts) is skipped, and a
time that exists twice (the hour repeated when DST ends) fires at its first occurrence.
Interval jobs stay anchored to their first deadline: deadlines are ``anchor + k·interval``.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from perdure.errors import ScheduleError

__all__ = [
    "MAX_HISTORY_LIMIT",
    "MAX_NAME_BYTES",
    "check_history_limit",
    "check_max_history",
    "check_name",
    "cron_zone",
    "delay_ms",
    "epoch_ms",
    "interval_ms",
    "next_cron_after",
    "next_every_after",
]

MAX_NAME_BYTES = 128
MAX_HISTORY_LIMIT = 1000
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)
# Candidates skipped in a row (nonexistent or already-passed wall times) before giving
# up: a DST change skips or repeats at most a few hours, far fewer than this.
_MAX_SKIPS = 10_000


def check_name(name: Any) -> str:
    """A recurring job's name: a string of 1 to 128 UTF-8 bytes."""
    if not isinstance(name, str) or not 1 <= len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        raise ScheduleError(
            f"A schedule name must be a string of 1 to {MAX_NAME_BYTES} UTF-8 bytes, not {name!r}.",
            code="invalid_name",
        )
    return name


def check_max_history(value: Any) -> int:
    """``max_history``: an integer from 0 (keep none) to 1000."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
        raise ScheduleError(
            f"max_history must be an integer from 0 to 1000, not {value!r}.",
            code="invalid_max_history",
        )
    return value


def check_history_limit(value: Any) -> int:
    """The ``limit`` of ``cron.history``: an integer from 1 to 1000."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HISTORY_LIMIT:
        raise ScheduleError(
            f"limit must be an integer from 1 to {MAX_HISTORY_LIMIT}, not {value!r}.",
            code="invalid_limit",
        )
    return value


def _seconds(value: Any, what: str, code: str) -> float:
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScheduleError(
            f"{what} must be a number of seconds or a timedelta, not {value!r}.", code=code
        )
    return float(value)


def delay_ms(value: Any) -> int:
    """The delay of ``schedule.after`` in milliseconds (seconds or timedelta, >= 0)."""
    seconds = _seconds(value, "The delay", "invalid_delay")
    if seconds < 0:
        raise ScheduleError(
            f"The delay must not be negative ({seconds:g} s).", code="invalid_delay"
        )
    return round(seconds * 1000)


def interval_ms(value: Any, minimum_ms: int) -> int:
    """An ``every`` interval in milliseconds; at least ``minimum_ms`` (and 1 ms)."""
    milliseconds = round(_seconds(value, "The interval", "invalid_interval") * 1000)
    if milliseconds < max(minimum_ms, 1):
        # Name the option that sets the floor, so the fix is one search away.
        floor = (
            f"the actor option min_cron_interval ({minimum_ms / 1000:g} s; lower it "
            "in the actor's options to allow shorter intervals)"
            if minimum_ms > 1
            else "1 ms"
        )
        raise ScheduleError(
            f"The interval ({milliseconds / 1000:g} s) is shorter than {floor}.",
            code="invalid_interval",
            metadata={"minimum_ms": max(minimum_ms, 1), "interval_ms": milliseconds},
        )
    return milliseconds


def epoch_ms(when: Any) -> int:
    """``schedule.at``'s instant: a timezone-aware datetime or epoch milliseconds."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ScheduleError(
                "A naive datetime has no timezone; give it one (e.g. tzinfo=datetime.UTC).",
                code="invalid_time",
            )
        return (when - _EPOCH) // _ONE_MS
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        raise ScheduleError(
            f"A time must be an aware datetime or epoch milliseconds, not {when!r}.",
            code="invalid_time",
        )
    return round(when)


def next_every_after(anchor_ms: int, step_ms: int, now_ms: int) -> int:
    """The first ``anchor + k·step`` (k >= 1) strictly after ``now_ms``."""
    k = max(1, (now_ms - anchor_ms) // step_ms + 1)
    return anchor_ms + k * step_ms


def cron_zone(expression: Any, timezone: Any) -> ZoneInfo:
    """Check a five-field cron expression and an IANA zone name; return the zone."""
    fields = expression.split() if isinstance(expression, str) else []
    if len(fields) != 5 or not croniter.is_valid(expression):
        raise ScheduleError(
            f"Invalid cron expression {expression!r}: give exactly five fields "
            "(minute hour day-of-month month day-of-week).",
            code="invalid_cron_expression",
        )
    zone = _zone(timezone)
    next_cron_after(expression, zone, 0)  # one that never matches (Feb 30th) fails now
    return zone


def _zone(timezone: Any) -> ZoneInfo:
    try:
        if not isinstance(timezone, str) or not timezone:
            raise ValueError(timezone)
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"Unknown time zone {timezone!r}: use an IANA name such as 'Europe/Paris'.",
            code="invalid_timezone",
        ) from None


def next_cron_after(expression: str, zone: ZoneInfo, after_ms: int) -> int:
    """The first instant strictly after ``after_ms`` that matches ``expression`` in ``zone``.

    See the module docstring for the DST rules.
    """
    start = (_EPOCH + after_ms * _ONE_MS).astimezone(zone).replace(tzinfo=None)
    try:
        candidates = croniter(expression, start)
        for _ in range(_MAX_SKIPS):
            local: _dt.datetime = candidates.get_next(_dt.datetime)
            at = _instant(local, zone)
            if at is not None and at > after_ms:
                return at
    except CroniterError as exc:
        raise ScheduleError(
            f"Cron expression {expression!r} never matches: {exc}.",
            code="invalid_cron_expression",
        ) from None
    raise ScheduleError(
        f"Cron expression {expression!r} has no usable time in {zone.key}.",
        code="invalid_cron_expression",
    )


def _instant(local: _dt.datetime, zone: ZoneInfo) -> int | None:
    """Epoch ms of a local wall-clock time (its first occurrence); None if it doesn't exist."""
    aware = local.replace(tzinfo=zone, fold=0)
    utc = aware.astimezone(_dt.UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != local:
        return None  # in the gap that DST opens: that wall-clock time never happens
    return (utc - _EPOCH) // _ONE_MS


def same_fields(left: str | None, right: str) -> bool:
    """Whether two cron expressions have the same fields (whitespace aside)."""
    return left is not None and left.split() == right.split()


def plain_args(args: Iterable[Any]) -> list[Any]:
    """The configured arguments as a list (a string is one argument, not characters)."""
    if isinstance(args, (str, bytes)):
        raise ScheduleError("args must be a list or tuple of arguments.", code="invalid_arguments")
    return list(args)

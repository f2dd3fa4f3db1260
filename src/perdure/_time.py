"""Durations and instants at perdure's API: what users pass in, what they get back.

Durations are seconds (``int``/``float``) or a ``timedelta``, everywhere. Instants are a
timezone-aware ``datetime`` or epoch milliseconds (the wire's and the store's form).
Anything else (a string, a naive datetime) raises :class:`~perdure.errors.ArgumentError`
with code ``invalid_duration`` or ``invalid_time`` where the call is made.

RivetKit's durations are milliseconds, so a literal port (``ctx.sleep("tick", 1000)``,
``interval=60000``) waits a thousand times too long. :func:`duration_seconds` does not
guess, since 1000 s can be meant; it logs one warning per call site and value when an
``int`` duration is a whole number of thousands of seconds (>= 1000 s), naming the
``timedelta`` that says what was meant. A ``float`` or a ``timedelta`` never warns. In
the same spirit, an instant given as a number that looks like epoch *seconds*
(``time.time()``) warns: as milliseconds it is a moment of January 1970.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
from typing import Any

from perdure.errors import ArgumentError, QueueError

__all__ = [
    "MAX_SEND_DELAY",
    "datetime_from_ms",
    "duration_seconds",
    "instant_ms",
    "optional_duration",
    "send_delay",
    "send_due_at",
    "utc_datetime",
    "warn_if_epoch_seconds",
    "warn_if_milliseconds",
]

log = logging.getLogger("perdure.porting")

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)
# Warnings already given, by (call, value); bounded so a program that computes many
# such values cannot grow it without end (past the bound it stops warning).
_warned: set[tuple[str, int]] = set()
_MAX_WARNED = 256
# Epoch *seconds* from 2001-09 (1e9) to 5138 are below this; as milliseconds these are
# moments of 1970 that no program schedules on purpose.
_SECONDS_EPOCH_LIMIT = 1e11


def duration_seconds(value: Any, what: str, *, negative_ok: bool = False) -> float:
    """``value`` (seconds or ``timedelta``) as float seconds; ``what`` names it in errors
    (``"ctx.sleep() duration"``). Negative durations fail unless ``negative_ok``."""
    if type(value) is float and 0.0 <= value < math.inf:
        return value  # the common case (every default is one), on every step: keep it short
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ArgumentError(
            f"{what} must be seconds (a number) or a datetime.timedelta, not {value!r}.",
            code="invalid_duration",
        )
    if not math.isfinite(seconds) or (seconds < 0 and not negative_ok):
        raise ArgumentError(
            f"{what} must be a finite, non-negative duration, not {value!r}.",
            code="invalid_duration",
        )
    warn_if_milliseconds(what, value)
    return seconds


def optional_duration(value: Any, what: str) -> float | None:
    """Like :func:`duration_seconds`, with ``None`` (no limit) passed through."""
    return None if value is None else duration_seconds(value, what)


def _first_time(what: str, value: int) -> bool:
    """True the first time a warning about ``value`` at ``what`` is due (then never)."""
    key = (what, value)
    if key in _warned or len(_warned) >= _MAX_WARNED:
        return False
    _warned.add(key)
    return True


def warn_if_milliseconds(what: str, value: Any) -> None:
    """Warn once when an ``int`` duration looks like RivetKit's milliseconds."""
    if type(value) is not int or value < 1000 or value % 1000 or not _first_time(what, value):
        return
    log.warning(
        "%s is %d seconds (%s). perdure's durations are seconds, RivetKit's milliseconds: "
        "if you meant %d ms, pass timedelta(milliseconds=%d) or %g. Pass a timedelta or a "
        "float to say what you mean (and silence this warning).",
        what,
        value,
        _dt.timedelta(seconds=value),
        value,
        value,
        value / 1000,
    )


def warn_if_epoch_seconds(what: str, value: Any) -> None:
    """Warn once when an epoch given as a number looks like seconds (``time.time()``):
    as milliseconds it would be a moment of January 1970, long past."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not 1e9 <= value < _SECONDS_EPOCH_LIMIT or not _first_time(what, round(value)):
        return
    log.warning(
        "%s is %s epoch milliseconds, a moment of January 1970. perdure's instants are "
        "epoch milliseconds or an aware datetime: pass datetime.fromtimestamp(%s, datetime.UTC) "
        "if this is seconds.",
        what,
        value,
        value,
    )


def instant_ms(value: Any, what: str) -> int:
    """An instant (aware ``datetime`` or epoch milliseconds) as epoch milliseconds."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ArgumentError(
                f"{what} is a naive datetime ({value.isoformat()}), which names no instant: "
                "give it a timezone, e.g. datetime.now(datetime.UTC) or .replace(tzinfo=...).",
                code="invalid_time",
            )
        return (value - _EPOCH) // _ONE_MS
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        warn_if_epoch_seconds(what, value)
        return round(value)
    raise ArgumentError(
        f"{what} must be a timezone-aware datetime or epoch milliseconds, not {value!r}.",
        code="invalid_time",
    )


def utc_datetime(value: int) -> _dt.datetime:
    """Epoch milliseconds as an aware UTC ``datetime``."""
    return _EPOCH + value * _ONE_MS


def datetime_from_ms(value: int | None) -> _dt.datetime | None:
    """Epoch milliseconds as an aware UTC ``datetime`` (``None`` stays ``None``)."""
    return None if value is None else utc_datetime(value)


# How far ahead a delayed send may be due (docs/queues.md, "Delayed sends"): a year.
MAX_SEND_DELAY = 365 * 86400.0
_MAX_SEND_DELAY_MS = int(MAX_SEND_DELAY * 1000)


def send_delay(
    delay: object, at: object, *, wait: bool, call: str = "send()"
) -> tuple[float | None, int | None]:
    """A send's ``delay`` (seconds or ``timedelta``) and ``at`` (aware ``datetime`` or
    epoch ms) checked, as ``(seconds, epoch ms)``; at most one is given, and a delayed
    send does not wait. Errors are ``queue.*`` (400 over HTTP): ``delay_and_at``,
    ``delayed_wait``, ``invalid_delay`` (not a duration or an instant, negative, beyond
    :data:`MAX_SEND_DELAY`)."""
    if delay is None and at is None:
        return None, None
    if delay is not None and at is not None:
        raise QueueError(f"{call}: give `delay` or `at`, not both.", code="delay_and_at")
    if wait:
        raise QueueError(
            f"{call}: a delayed send cannot wait for its completion (wait=True); send "
            "without waiting, or wait for the outcome in a workflow.",
            code="delayed_wait",
        )
    try:
        if delay is not None:
            seconds = duration_seconds(delay, f"{call} delay")
            if seconds > MAX_SEND_DELAY:
                raise _too_far(call)
            return seconds, None
        ms = instant_ms(at, f"{call} at")
    except ArgumentError as exc:
        raise QueueError(exc.message, code="invalid_delay") from None
    if ms < 0:
        raise QueueError(
            f"{call} at must be a moment after 1970, not {at!r}.", code="invalid_delay"
        )
    return None, ms


def send_due_at(delay: float | None, at: int | None, now: int, call: str = "send()") -> int | None:
    """When a send checked by :func:`send_delay` becomes visible (epoch ms); ``None``:
    at once (no delay, or a moment already past)."""
    if delay is None and at is None:
        return None
    due = at if at is not None else now + math.ceil((delay or 0.0) * 1000)
    if due - now > _MAX_SEND_DELAY_MS:
        raise _too_far(call)
    return due if due > now else None


def _too_far(call: str) -> QueueError:
    return QueueError(
        f"{call}: a message may be delayed by at most {MAX_SEND_DELAY / 86400:g} days.",
        code="invalid_delay",
        metadata={"max_delay": MAX_SEND_DELAY},
    )

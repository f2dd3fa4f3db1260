"""Time limits on slow clients: a connection cannot be held by sending slowly.

uvicorn bounds only the idle time between requests on a kept-alive connection; a client
that sends a request's headers (or its body) a byte at a time, or opens a connection and
sends nothing, holds a socket, a file descriptor and a protocol object for ever. Three
limits, each a :class:`SlowClientLimits` field (``perdure serve`` flags, docs/edge.md):

- ``header_timeout``: from the connection's opening, or from the first byte after an
  answer on a kept-alive connection, to the end of the request's headers;
- ``body_timeout``: from the end of the headers to the end of the body (a request without
  a body ends with its headers; an upgrade to a WebSocket has none);
- ``keep_alive_timeout``: an idle kept-alive connection is closed (uvicorn's own timer).

:class:`RequestClock` keeps one deadline per connection and one timer for it. Entering a
phase only writes the phase and its deadline; the timer is re-armed when it fires early
(after a later phase moved the deadline) and replaced only when a deadline moves sooner,
so a busy connection creates about one timer per timeout period, not one per request.
:class:`~perdure.server.edge.http_limits.EdgeHttpProtocol` drives the clock and answers a
reached limit (408 ``request.header_timeout`` or ``request.body_timeout``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from perdure.errors import RequestRefused

__all__ = [
    "BODY",
    "BODY_TIMEOUT",
    "HEADERS",
    "HEADER_TIMEOUT",
    "IDLE",
    "KEEP_ALIVE_REASON",
    "KEEP_ALIVE_TIMEOUT",
    "WAITING",
    "RequestClock",
    "SlowClientLimits",
    "timeout_refusal",
]

HEADER_TIMEOUT: Final = 10.0
"""Default seconds from a connection's opening to the end of a request's headers."""

BODY_TIMEOUT: Final = 30.0
"""Default seconds from the end of a request's headers to the end of its body."""

KEEP_ALIVE_TIMEOUT: Final = 5.0
"""Default seconds an idle kept-alive connection stays open (uvicorn's default)."""

KEEP_ALIVE_REASON: Final = "request.keep_alive_timeout"
"""What an idle kept-alive connection's close is counted as (it is not answered)."""

IDLE: Final = 0
"""No limit runs: a request is being answered, or the connection is kept alive idle."""

WAITING: Final = 1
"""The connection is open (or a byte came after an answer), no request has begun."""

HEADERS: Final = 2
"""A request has begun; its headers have not all arrived."""

BODY: Final = 3
"""The headers have arrived; the body has not all arrived."""

_EARLY: Final = 0.01
"""Seconds before its deadline a timer may fire and still count as on time (loops
round their timers to a millisecond)."""


@dataclass(frozen=True, slots=True)
class SlowClientLimits:
    """The time limits on one connection's requests, in seconds (each positive)."""

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive_timeout"):
            seconds = getattr(self, name)
            if not 0 < seconds < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds, not {seconds!r}")


def timeout_refusal(phase: int, limits: SlowClientLimits) -> RequestRefused:
    """The error a reached limit is answered (and counted) with, for ``phase``."""
    if phase == BODY:
        seconds, code, part = limits.body_timeout, "body_timeout", "body"
    else:
        seconds, code, part = limits.header_timeout, "header_timeout", "headers"
    return RequestRefused(
        f"The request {part} did not arrive in time (the limit is {seconds:g} s).",
        code=code,
        status=408,
        metadata={"timeout": seconds},
    )


class RequestClock:
    """One connection's current phase and deadline, with at most one timer pending.

    ``expired(phase)`` is called once when the deadline of ``phase`` passes (the clock is
    then idle); :meth:`stop` makes the pending timer a no-op, :meth:`close` cancels it.
    """

    __slots__ = ("_deadline", "_expired", "_loop", "_timer", "phase")

    def __init__(self, loop: asyncio.AbstractEventLoop, expired: Callable[[int], None]) -> None:
        self._loop = loop
        self._expired = expired
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.phase = IDLE

    def start(self, phase: int, seconds: float) -> None:
        """Enter ``phase`` with a deadline ``seconds`` from now."""
        self.phase = phase
        deadline = self._deadline = self._loop.time() + seconds
        timer = self._timer
        if timer is not None:
            if timer.when() <= deadline:
                return  # it fires first and re-arms for the rest
            timer.cancel()
        self._timer = self._loop.call_at(deadline, self._fire)

    def stop(self) -> None:
        """No limit runs until the next :meth:`start` (the pending timer, if any, stays)."""
        self.phase = IDLE

    def close(self) -> None:
        """Stop for good: the connection is gone."""
        self.phase = IDLE
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        phase = self.phase
        if phase == IDLE:
            return
        if self._loop.time() < self._deadline - _EARLY:
            self._timer = self._loop.call_at(self._deadline, self._fire)
            return
        self.phase = IDLE
        self._expired(phase)

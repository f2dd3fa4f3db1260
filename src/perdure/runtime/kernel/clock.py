"""Time sources. The runtime asks a clock for "now" so tests can control time.

:class:`SystemClock` is the real one. :class:`ManualClock` stands still until a test moves
it with ``advance``/``set``; everything that waits through the clock (schedule timers, the
alarm scheduler, workflow sleeps and retry backoff, queue receive timeouts, the actor's
idle-sleep timer) then wakes as if that much time had passed, without any real waiting.

Code that waits for durable time uses the helpers below rather than ``asyncio.sleep`` or
``loop.call_later``: :func:`call_later` (a timer callback), :func:`wait_first` (wait for
futures with a timeout) and :func:`sleep_until_or_event`. On a :class:`SystemClock` they
are the loop's own timers, so the real clock pays nothing for the indirection.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "Clock",
    "ManualClock",
    "SystemClock",
    "TimerHandle",
    "call_later",
    "sleep_until_or_event",
    "wait_first",
]

_log = logging.getLogger("perdure.clock")


class Clock(Protocol):
    """Wall-clock time in epoch milliseconds, and a way to wait for a moment."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    async def sleep_until(self, deadline_ms: int) -> None:
        """Return once ``now_ms() >= deadline_ms``."""
        ...


class TimerHandle(Protocol):
    """A timer started by :func:`call_later`."""

    def cancel(self) -> Any:
        """Stop the timer (its callback will not run)."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline_ms: int) -> None:
        """Sleep until the wall clock reaches ``deadline_ms``."""
        # The loop's timer runs on the monotonic clock, which may drift from the wall
        # clock a little: sleep again for whatever is left.
        while (delay := (deadline_ms - self.now_ms()) / 1000) > 0:  # noqa: ASYNC110
            await asyncio.sleep(delay)


class _ManualTimer:
    """One waiting timer of a :class:`ManualClock` (a sleeper or a callback)."""

    __slots__ = ("active", "callback", "clock", "deadline", "poll")

    def __init__(
        self, clock: ManualClock, deadline: int, callback: Callable[[], None], poll: bool
    ) -> None:
        self.clock = clock
        self.deadline = deadline
        self.callback = callback
        self.poll = poll
        self.active = True

    def cancel(self) -> None:
        """Drop the timer; its callback will not run."""
        if self.active:
            self.active = False
            self.clock._dropped()


class ManualClock:
    """A clock that moves only when told to, for tests.

    ``sleep_until`` returns (and :func:`call_later` callbacks run) once ``advance``/``set``
    has moved the clock to or past their deadline. Time never goes backwards.

    A timer may be marked as a *poll* (the alarm scheduler's periodic look at the store):
    it fires like any other, but :meth:`next_deadline` leaves it out, so that a test that
    moves time from one event to the next (see :mod:`perdure.testing`) is not stopped by
    every poll on the way.

    ``idle_sleep``: whether actors also go to sleep when idle for their ``sleep_timeout``
    of this clock's time (otherwise that timer stays on real time).
    """

    def __init__(self, start_ms: int = 1_700_000_000_000, *, idle_sleep: bool = False) -> None:
        self._now = start_ms
        # Whether an idle actor's sleep timer counts on this clock too. Off by default: a
        # test that jumps minutes ahead to fire a schedule usually means the actor to
        # stay awake; perdure.testing turns it on, so that idle actors hibernate as they
        # would in production.
        self.idle_sleep = idle_sleep
        self._timers: list[tuple[int, int, _ManualTimer]] = []
        self._order = itertools.count()
        self._active = 0

    def now_ms(self) -> int:
        """The current (manual) time in epoch milliseconds."""
        return self._now

    def set(self, now_ms: int) -> None:
        """Move the clock to ``now_ms`` and fire the timers that are due, earliest first."""
        if now_ms < self._now:
            raise ValueError(f"A ManualClock never goes back ({now_ms} < {self._now}).")
        self._now = now_ms
        while self._timers and self._timers[0][0] <= now_ms:
            _, _, timer = heapq.heappop(self._timers)
            if timer.active:
                timer.active = False
                self._active -= 1
                try:
                    timer.callback()
                except Exception:  # as the loop does: one failing timer stops no other
                    _log.exception("a ManualClock timer callback failed")

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.set(self._now + round(seconds * 1000))

    def call_at(
        self, deadline_ms: int, callback: Callable[[], None], *, poll: bool = False
    ) -> TimerHandle:
        """Run ``callback`` when the clock reaches ``deadline_ms`` (not before ``set``)."""
        if deadline_ms <= self._now:  # due already: soon, as a real timer would be
            return asyncio.get_running_loop().call_soon(callback)
        timer = _ManualTimer(self, deadline_ms, callback, poll)
        heapq.heappush(self._timers, (deadline_ms, next(self._order), timer))
        self._active += 1
        return timer

    async def sleep_until(self, deadline_ms: int, *, poll: bool = False) -> None:
        """Return once the clock has been moved to or past ``deadline_ms``."""
        if deadline_ms <= self._now:
            await asyncio.sleep(0)  # still a yield point, like a real sleep
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_at(deadline_ms, lambda: _resolve(future), poll=poll)
        try:
            await future
        finally:
            timer.cancel()

    def _dropped(self) -> None:
        # A cancelled timer stays in the heap until its deadline: rebuild the heap when
        # they outnumber the live ones, as timers re-armed often would otherwise pile up.
        self._active -= 1
        if len(self._timers) > 64 and len(self._timers) > 2 * self._active:
            self._timers = [entry for entry in self._timers if entry[2].active]
            heapq.heapify(self._timers)

    def next_deadline(self, *, polls: bool = False) -> int | None:
        """The earliest deadline of a waiting timer (polls left out unless ``polls``)."""
        deadlines = (t.deadline for _, _, t in self._timers if t.active and (polls or not t.poll))
        return min(deadlines, default=None)

    @property
    def sleepers(self) -> int:
        """How many timers are waiting (tests use it to sync with timers)."""
        return self._active


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def call_later(clock: Clock, delay: float, callback: Callable[[], None]) -> TimerHandle:
    """Run ``callback`` after ``delay`` seconds of ``clock`` time."""
    if isinstance(clock, SystemClock):  # the loop's own timer: no task, nothing to pay
        return asyncio.get_running_loop().call_later(delay, callback)
    deadline = clock.now_ms() + math.ceil(delay * 1000)
    if isinstance(clock, ManualClock):
        return clock.call_at(deadline, callback)
    return asyncio.ensure_future(_call_when(clock, deadline, callback))


async def _call_when(clock: Clock, deadline_ms: int, callback: Callable[[], None]) -> None:
    await clock.sleep_until(deadline_ms)
    callback()


async def wait_first(
    clock: Clock, waits: set[asyncio.Future[Any]], timeout: float | None
) -> set[asyncio.Future[Any]]:
    """Wait until one of ``waits`` is done or ``timeout`` seconds of ``clock`` time have
    passed; return the done ones (empty on timeout). Like ``asyncio.wait`` with
    ``FIRST_COMPLETED``, the futures are left running."""
    if timeout is None or isinstance(clock, SystemClock):
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return done
    deadline = clock.now_ms() + math.ceil(timeout * 1000)
    sleeper = asyncio.ensure_future(clock.sleep_until(deadline))
    try:
        done, _ = await asyncio.wait({*waits, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
    done.discard(sleeper)
    return done


async def sleep_until_or_event(
    clock: Clock, deadline_ms: int | None, event: asyncio.Event, *, poll: bool = False
) -> None:
    """Return when ``clock`` reaches ``deadline_ms`` (never, if ``None``) or ``event`` is set.

    ``poll``: the wait is a periodic look, not an event of its own (see
    :class:`ManualClock`).
    """
    if event.is_set():
        return
    if deadline_ms is None:
        await event.wait()
        return
    if poll and isinstance(clock, ManualClock):
        sleeper = asyncio.ensure_future(clock.sleep_until(deadline_ms, poll=True))
    else:
        sleeper = asyncio.ensure_future(clock.sleep_until(deadline_ms))
    poked = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        poked.cancel()

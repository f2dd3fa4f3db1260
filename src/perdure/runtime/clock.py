"""Time sources. The runtime asks a clock for "now" so tests can control time.

:class:`SystemClock` is the real one. :class:`ManualClock` stands still until a test moves
it with ``advance``/``set``; everything that waits through ``clock.sleep_until`` (schedule
timers, the alarm scheduler) then wakes as if that much time had passed, without any real
waiting.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "sleep_until_or_event"]


class Clock(Protocol):
    """Wall-clock time in epoch milliseconds, and a way to wait for a moment."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    async def sleep_until(self, deadline_ms: int) -> None:
        """Return once ``now_ms() >= deadline_ms``."""
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


class ManualClock:
    """A clock that moves only when told to, for tests.

    ``sleep_until`` returns once ``advance``/``set`` has moved the clock to or past the
    deadline. Time never goes backwards.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        """The current (manual) time in epoch milliseconds."""
        return self._now

    def set(self, now_ms: int) -> None:
        """Move the clock to ``now_ms`` and wake the sleepers that are due."""
        if now_ms < self._now:
            raise ValueError(f"A ManualClock never goes back ({now_ms} < {self._now}).")
        self._now = now_ms
        while self._sleepers and self._sleepers[0][0] <= now_ms:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.set(self._now + round(seconds * 1000))

    async def sleep_until(self, deadline_ms: int) -> None:
        """Return once the clock has been moved to or past ``deadline_ms``."""
        if deadline_ms <= self._now:
            await asyncio.sleep(0)  # still a yield point, like a real sleep
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline_ms, next(self._order), future))
        try:
            await future
        finally:
            # Drop a cancelled sleeper now rather than at its deadline: timers that are
            # re-armed often would otherwise pile up in the heap.
            if future.cancelled():
                self._sleepers = [s for s in self._sleepers if s[2] is not future]
                heapq.heapify(self._sleepers)

    @property
    def sleepers(self) -> int:
        """How many ``sleep_until`` calls are waiting (tests use it to sync with timers)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())


async def sleep_until_or_event(clock: Clock, deadline_ms: int | None, event: asyncio.Event) -> None:
    """Return when ``clock`` reaches ``deadline_ms`` (never, if ``None``) or ``event`` is set."""
    if event.is_set():
        return
    if deadline_ms is None:
        await event.wait()
        return
    sleeper = asyncio.ensure_future(clock.sleep_until(deadline_ms))
    poked = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        poked.cancel()

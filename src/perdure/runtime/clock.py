"""Time sources. The runtime asks a clock for "now" so tests can control time."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


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
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline_ms: int) -> None:
        delay = (deadline_ms - self.now_ms()) / 1000
        if delay > 0:
            await asyncio.sleep(delay)

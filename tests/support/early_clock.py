"""A clock that reads early once: a timer run just before its due time (a real event
loop's may, uvloop rounding delays to whole milliseconds from a cached loop time)."""

from __future__ import annotations

from typing import Any


class EarlyOnce:
    """The test's manual clock, except that the first reading after :attr:`early` is
    set is one millisecond short: a timer run in the millisecond before its due time,
    whose next reading falls in the due one (a real clock's loop may do that)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.early = False

    def now_ms(self) -> int:
        now: int = self.inner.now_ms()
        if self.early:
            self.early = False
            return now - 1
        return now

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

"""Bounded waiting for tests: poll a condition until it holds, or fail with a message."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

__all__ = ["eventually"]


async def eventually(
    predicate: Callable[[], Any],
    *,
    timeout: float = 10.0,
    interval: float = 0.005,
    what: str = "condition",
) -> None:
    """Poll ``predicate`` (sync, or returning an awaitable) until it is truthy.

    Fails the test with ``AssertionError`` after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)

"""Helpers of the tests that kill servers under a subscriber: drive increments over HTTP
through outages, and wait until the subscriber has caught up with the counter."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from perdure.client import ActorError, TransportError

__all__ = ["caught_up", "drive"]


async def drive(handle: Any, stop: asyncio.Event) -> None:
    """Increment over HTTP until ``stop`` is set; calls refused while a server is down
    are retried (their outcome may be unknown: the counter says what happened)."""
    while not stop.is_set():
        try:
            await handle.increment(1)
        except (TransportError, ActorError, OSError):
            await asyncio.sleep(0.05)


async def caught_up(handle: Any, seen: list[int], timeout: float = 20.0) -> int:
    """The counter's final value, once ``seen`` holds that many events (or ``timeout``
    seconds have passed: the caller's assertion then says what is missing)."""
    final = int(await handle.get())
    deadline = time.monotonic() + timeout
    while len(seen) < final and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return final

"""Wakes sleeping actors whose alarm (``wake_at``) is due.

Awake actors keep their own timers. The scheduler is for hibernated ones: it asks the
store for the earliest ``wake_at`` (an indexed lookup, whatever the number of actors),
sleeps until then, and wakes every due actor that is not awake. Instances tell it when
they set an alarm earlier than the one it is waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perdure.runtime.runtime import ActorRuntime

__all__ = ["AlarmScheduler"]

_log = logging.getLogger("perdure.alarms")
_IDLE_POLL_SECONDS = 1.0
_BATCH = 500
_MAX_PARALLEL_WAKES = 64


class AlarmScheduler:
    """One per runtime; started by ``ActorRuntime.start``."""

    def __init__(self, runtime: ActorRuntime) -> None:
        self._runtime = runtime
        self._poke = asyncio.Event()
        self._target: int | None = None
        self._waking: set[str] = set()
        self._slots = asyncio.Semaphore(_MAX_PARALLEL_WAKES)

    def note(self, wake_at: int | None) -> None:
        """An actor set an alarm; wake the loop if it is earlier than the current target."""
        if wake_at is not None and (self._target is None or wake_at < self._target):
            self._poke.set()

    async def run(self) -> None:
        """The scheduler loop (runs until cancelled)."""
        clock = self._runtime.clock
        store = self._runtime.store
        while True:
            now = clock.now_ms()
            due = await store.due_actors(now, _BATCH)
            woke = 0
            for actor_id, _ in due:
                if self._runtime.is_live(actor_id) or actor_id in self._waking:
                    continue
                woke += 1
                self._waking.add(actor_id)
                self._runtime.spawn(self._wake(actor_id), name=f"alarm {actor_id}")
            if woke and len(due) == _BATCH:
                await asyncio.sleep(0)
                continue
            upcoming = await store.next_wake_at()
            wait = _IDLE_POLL_SECONDS
            if upcoming is not None and upcoming > now:
                wait = min(wait, (upcoming - now) / 1000)
            self._target = None if upcoming is None or upcoming <= now else upcoming
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), timeout=max(wait, 0.001))

    async def _wake(self, actor_id: str) -> None:
        try:
            async with self._slots:
                await self._runtime.wake_for_alarm(actor_id)
        except Exception:
            _log.exception("waking actor %s for its alarm failed", actor_id)
        finally:
            self._waking.discard(actor_id)

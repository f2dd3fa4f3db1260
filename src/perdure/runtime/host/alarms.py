"""Wakes sleeping actors whose alarm (``wake_at``) is due.

Awake actors keep their own timers. The scheduler is for hibernated ones: it asks the
store for the alarms of the coming second (an indexed range read, whatever the number of
actors), sleeps until the next one, and wakes every due actor that is not awake.
Instances tell it when they set an alarm earlier than the one it is waiting for.

Actors are woken a little early (``PREWAKE_MS``): starting one takes a few
milliseconds, and a thousand alarms in the same second would otherwise queue behind each
other's starts. The woken actor's own timer then fires at the exact time (its schedules
keep it awake until then). An actor that goes back to sleep before its alarm anyway is
not woken early a second time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from perdure.runtime.kernel.clock import sleep_until_or_event
from perdure.runtime.kernel.core import PREWAKE_MS

if TYPE_CHECKING:
    from perdure.runtime.host.actor_runtime import ActorRuntime

__all__ = ["PREWAKE_MS", "AlarmScheduler"]

_log = logging.getLogger("perdure.alarms")
_IDLE_POLL_MS = 1000
# Alarms due within this much of the next one are woken in the same pass.
_MIN_STEP_MS = 20
_BATCH = 500
_RETRY_MS = 1000
_MAX_ROWS = 20_000
_MAX_PARALLEL_WAKES = 64


class AlarmScheduler:
    """One per runtime; started by ``ActorRuntime.start``."""

    def __init__(self, runtime: ActorRuntime) -> None:
        self._runtime = runtime
        self._poke = asyncio.Event()
        self._target: int | None = None
        self._hint: int | None = None
        self._waking: set[str] = set()
        self._woken_early: dict[str, int] = {}  # actor id -> the alarm it was woken for
        # Actors whose alarm is due but that another node holds (a cluster): their owner
        # fires their timers. Actor id -> when that node's lease runs out (epoch ms).
        self._elsewhere: dict[str, int] = {}
        self._slots = asyncio.Semaphore(_MAX_PARALLEL_WAKES)

    def note(self, wake_at: int | None) -> None:
        """An actor set an alarm; wake the loop if it is earlier than the current target.

        A future alarm is also kept as a hint: the loop looks at the store again then,
        even if the read the poke caused ran before the alarm's commit landed, or its actor
        went to sleep after being woken early.
        """
        if wake_at is None:
            return
        now = self._runtime.clock.now_ms()
        if wake_at > now and (self._hint is None or self._hint <= now or wake_at < self._hint):
            self._hint = wake_at
        if self._target is None or wake_at - PREWAKE_MS < self._target:
            self._poke.set()

    async def run(self) -> None:
        """The scheduler loop (runs until cancelled)."""
        # A store shared by several nodes (PostgreSQL) reports the alarms they set; the
        # others have no other writer (instances note their own alarms, see note()).
        unwatch: Callable[[], None] | None = None
        try:
            unwatch = await self._runtime.store.watch_wakeups(self.note)
        except Exception:
            _log.warning("not watching the store's wake-ups; polling only", exc_info=True)
        try:
            await self._poll()
        finally:
            if unwatch is not None:
                unwatch()  # a store outlives its runtime (a MemoryStore is reopened)

    async def _poll(self) -> None:
        clock = self._runtime.clock
        store = self._runtime.store
        limit = _BATCH
        while True:
            now = clock.now_ms()
            try:
                rows = await store.due_actors(
                    now + PREWAKE_MS + _MIN_STEP_MS + _IDLE_POLL_MS, limit
                )
            except Exception:
                # A store that is briefly unreachable (a restarting database) must not end
                # the scheduler for good: log, wait a little, look again.
                _log.warning("reading due alarms failed; retrying", exc_info=True)
                await sleep_until_or_event(clock, now + _RETRY_MS, self._poke, poll=True)
                continue
            woke, passed, deadline = self._wake_due(rows, now, limit)
            # Next time, read past the rows of actors already awake or waking (their
            # alarms stay until they fire), up to a bound.
            grown = min(passed + _BATCH, _MAX_ROWS)
            if deadline is None:  # the whole read is due: more may follow it
                if woke or grown > limit:
                    limit = max(limit, grown)
                    await asyncio.sleep(0)
                    continue
                deadline = now + _IDLE_POLL_MS  # more than _MAX_ROWS actors awake and due
            limit = grown
            deadline = self._hinted(deadline, now)
            self._target = deadline
            self._poke.clear()
            # Through the runtime's clock, so that a test's ManualClock drives this loop. A
            # poll: the alarms it looks for are events of their own (see ManualClock).
            await sleep_until_or_event(clock, deadline, self._poke, poll=True)

    def _hinted(self, deadline: int, now: int) -> int:
        """Look again for the hinted alarm: early (to wake its actor early), then when it
        is due (in case its actor went back to sleep before it)."""
        hint = self._hint
        if hint is None or hint <= now:
            self._hint = None
            return deadline
        return min(deadline, hint - PREWAKE_MS if hint - PREWAKE_MS > now else hint)

    def _wake_due(
        self, rows: list[tuple[str, int]], now: int, limit: int
    ) -> tuple[int, int, int | None]:
        """Wake the sleeping actors of ``rows`` due by ``now + PREWAKE_MS`` (and a step).

        Returns how many it woke, how many due rows it passed over (awake, waking, or
        woken early already), and when to look again: ``None`` when every row was due and
        the read was full, so that more due actors may be waiting behind them.
        """
        # Alarms a few ms apart are handled in one pass: _MIN_STEP_MS more of early.
        horizon = now + PREWAKE_MS + _MIN_STEP_MS
        self._woken_early = {a: t for a, t in self._woken_early.items() if t > now}
        if self._elsewhere:
            self._elsewhere = {a: t for a, t in self._elsewhere.items() if t > now}
        deadline = now + _IDLE_POLL_MS
        woke = passed = 0
        for actor_id, wake_at in rows:
            if wake_at > horizon:
                return woke, passed, min(deadline, wake_at - PREWAKE_MS)
            if self._runtime.is_live(actor_id) or actor_id in self._waking:
                passed += 1
                continue
            held_until = self._elsewhere.get(actor_id)
            if held_until is not None:
                deadline = min(deadline, held_until)  # look again when the lease may lapse
                passed += 1
                continue
            if wake_at > now:
                if self._woken_early.get(actor_id) == wake_at:
                    # Woken early once and asleep again: wait until it is really due.
                    deadline = min(deadline, wake_at)
                    passed += 1
                    continue
                self._woken_early[actor_id] = wake_at
            woke += 1
            self._waking.add(actor_id)
            self._runtime.spawn(self._wake(actor_id), name=f"alarm {actor_id}")
        return woke, passed, None if len(rows) >= limit else deadline

    async def _wake(self, actor_id: str) -> None:
        try:
            async with self._slots:
                held_until = await self._runtime.wake_for_alarm(actor_id)
            if held_until is not None:
                self._elsewhere[actor_id] = held_until
        except Exception:
            _log.exception("waking actor %s for its alarm failed", actor_id)
        finally:
            self._waking.discard(actor_id)

"""Idle expiry: the ``idle_ttl`` option (docs/options.md) of one awake actor.

An actor with ``idle_ttl`` is destroyed (``on_destroy`` runs, its data is deleted) once
it has been idle that long with nothing pending: no connection, no schedule, no queued
message (live, delayed or dead), and no workflow that has not completed (or been
cancelled). Idle means no action, send, connection, schedule fire or ``keep_awake`` work.

The expiry costs no write per action. It is the actor's ``idle`` alarm:

- When the sleep timer puts the actor to sleep (idle for ``sleep_timeout``), an actor
  with nothing pending gets the alarm *idle start + ttl*, written with the sleep's final
  flush, or is destroyed at once if that moment has passed (a ttl below the sleep
  timeout: the actor expires when it would go to sleep). With something pending it gets
  no idle alarm; the next sleep decides again.
- While the actor is awake, the alarm is a ceiling, *now + ttl + period*, written once
  per period (at least a minute, at least the ttl): after a ``kill -9`` or a stop that
  was not the sleep timer's (a shutdown, a move), the actor expires late, never early.
- At a wake, a stored alarm that is due on an actor with nothing pending can only be
  the idle one (no other part sets an alarm on such an actor): at that moment, if
  nothing has entered the actor since the wake and its workflow (if any) has completed,
  the actor is destroyed. Any request in between keeps it.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

from perdure.runtime.kernel.core import PREWAKE_MS

if TYPE_CHECKING:
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.kernel.core import StopReason

__all__ = ["ALARM_SOURCE", "IdleExpiry"]

# The expiry's source among the actor's alarms (see ActorCore.set_alarm).
ALARM_SOURCE = "idle"
# How often an awake actor re-writes its ceiling (seconds), at the least.
_MIN_PERIOD = 60.0
# The workflow states that hold nothing: an actor whose workflow is in another one
# (running, waiting, failed and waiting for an operator, paused) does not expire.
_FINISHED = frozenset(("completed", "cancelled"))
# How long the check at a wake waits for a finished workflow's run to return.
_RUN_SETTLE_S = 1.0


class IdleExpiry:
    """The idle expiry of one awake actor (``instance.expiry``); inert without a ttl."""

    __slots__ = ("_instance", "_period_ms", "_ttl_ms")

    def __init__(self, instance: ActorInstance) -> None:
        self._instance = instance
        ttl = instance.options.idle_ttl
        self._ttl_ms = math.ceil(ttl * 1000) if ttl > 0 else 0
        self._period_ms = math.ceil(max(ttl, _MIN_PERIOD) * 1000)

    def started(self, stored_wake_at: int | None) -> None:
        """The actor has started (``stored_wake_at``: its alarm as it was stored): write
        the ceiling, and check at its time an alarm that can only be the expiry."""
        if not self._ttl_ms:
            return
        instance = self._instance
        due = stored_wake_at
        if due is None or due > instance.core.clock.now_ms() + PREWAKE_MS:
            due = None  # no alarm due now: woken by a request
        elif self._pending(data_only=True):
            due = None  # something is pending: the alarm was another part's
        self._write_ceiling()
        coro = self._watch(due, instance.activity.entered)
        instance.tasks.spawn(coro, name=f"idle expiry {instance.actor_id}")

    def sleep_reason(self) -> StopReason:
        """How the actor stops when its sleep timer runs out: ``destroy`` if it has been
        idle for its ttl with nothing pending, else ``sleep`` (with the idle alarm)."""
        if not self._ttl_ms:
            return "sleep"
        core = self._instance.core
        if self._pending(data_only=False):
            core.set_alarm(ALARM_SOURCE, None)  # the final flush writes it
            return "sleep"
        now = core.clock.now_ms()
        idle_since = now - math.ceil(self._instance.options.sleep_timeout * 1000)
        expires_at = idle_since + self._ttl_ms
        if expires_at <= now:
            self._log_expiry()
            return "destroy"
        core.set_alarm(ALARM_SOURCE, expires_at)
        return "sleep"

    # ---------------------------------------------------------------- internals

    async def _watch(self, due: int | None, entered: int) -> None:
        """Check the expiry at ``due`` (if any), then keep the ceiling up to date."""
        instance = self._instance
        clock = instance.core.clock
        if due is not None:
            await clock.sleep_until(due)
            await self._settle()
            if self._expired(entered):
                self._log_expiry()
                instance.request_stop("destroy")
                return
        while True:
            await clock.sleep_until(clock.now_ms() + self._period_ms)
            self._write_ceiling()

    async def _settle(self) -> None:
        """Let a woken workflow load its history and a finished run return."""
        instance = self._instance
        runner, run = instance.workflow, instance.run_task
        if runner is None or run is None:
            return
        loaded = asyncio.ensure_future(runner.loaded.wait())
        try:
            await asyncio.wait({loaded, run}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loaded.cancel()
        if runner.status()["status"] in _FINISHED and not run.done():
            await asyncio.wait({run}, timeout=_RUN_SETTLE_S)

    def _expired(self, entered: int) -> bool:
        instance = self._instance
        activity = instance.activity
        return (
            instance.status == "running"
            and activity.entered == entered
            and activity.is_idle()
            and not self._pending(data_only=False)
        )

    def _pending(self, *, data_only: bool) -> bool:
        """Something holds the actor: a schedule, a queued message, a connection, or
        (unless ``data_only``, before the workflow has loaded) an unfinished workflow."""
        instance = self._instance
        queue = instance.queue
        if instance.schedules.jobs or instance.conns:
            return True
        if queue is not None and (len(queue) or queue.dead):
            return True
        if data_only or instance.definition.kind != "workflow":
            return False
        runner = instance.workflow
        return runner is None or runner.status()["status"] not in _FINISHED

    def _write_ceiling(self) -> None:
        instance = self._instance
        core = instance.core
        if instance.status not in ("starting", "running"):
            return
        core.set_alarm(ALARM_SOURCE, core.clock.now_ms() + self._ttl_ms + self._period_ms)
        core.request_flush().add_done_callback(_ignore_outcome)

    def _log_expiry(self) -> None:
        ttl = self._ttl_ms / 1000
        self._instance.log.info("idle for its idle_ttl (%gs) with nothing pending: destroying", ttl)


def _ignore_outcome(future: asyncio.Future[None]) -> None:
    """Read a flush's outcome: a failed write drops the instance (it is handled there)."""
    if not future.cancelled():
        future.exception()

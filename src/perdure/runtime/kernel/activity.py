"""What keeps one actor awake, and the sleep timer that runs when nothing does.

An actor is idle when no work is in flight (actions, connects, fires, ``keep_awake``
tasks), it has no connection and no open raw socket, ``c.set_prevent_sleep(True)`` is not
in force, and its run handler is absent or waiting in a way that allows sleep (a queue
wait, a long workflow sleep). Idle for ``sleep_timeout`` seconds,
it is put to sleep (DESIGN §3.5).

The sleep timer is re-armed lazily: work that starts while it is armed only marks it
stale, and when it runs out it looks at when the actor last became idle, sleeps if that
was ``sleep_timeout`` ago, or waits the rest. So a busy actor does not cancel and make
a timer for every action (a cancelled timer also stays in the event loop's heap until
its time comes, one more per awake actor).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sized
from typing import Any, Protocol, TypeVar

from perdure.runtime.kernel.clock import Clock, SystemClock, TimerHandle, call_later

__all__ = ["ActivityTracker", "SleepOwner"]

T = TypeVar("T")


class SleepOwner(Protocol):
    """The actor whose sleep is tracked: only a running one goes to sleep."""

    @property
    def status(self) -> str:
        """``"running"`` while the actor takes work."""
        ...

    def sleep_when_idle(self) -> None:
        """Put the actor to sleep: the sleep timer ran out while it was idle."""


class ActivityTracker:
    """Counts work in flight and arms the sleep timer of one actor.

    ``no_sleep``: the actor never idle-sleeps; ``connections``: its open connections
    (any one keeps it awake); ``clock``: the runtime's clock, which the sleep timer
    counts on (a ``ManualClock(idle_sleep=True)`` puts idle actors to sleep as it moves).
    """

    # One per awake actor: slots instead of a dict (see bench/README.md, memory).
    __slots__ = (
        "_active",
        "_clock",
        "_connections",
        "_idle_event",
        "_idle_since",
        "_no_sleep",
        "_owner",
        "_prevent_cleared",
        "_sleep_timeout",
        "_sleep_timer",
        "_sockets",
        "_stale",
        "_tracked",
        "entered",
        "prevent_sleep",
        "run_active",
        "run_sleep_ok",
    )

    def __init__(
        self,
        owner: SleepOwner,
        *,
        sleep_timeout: float,
        no_sleep: bool,
        connections: Sized,
        clock: Clock | None = None,
    ) -> None:
        self._owner = owner
        self._sleep_timeout = sleep_timeout
        self._no_sleep = no_sleep
        self._connections = connections
        if clock is None or not getattr(clock, "idle_sleep", True):
            clock = SystemClock()  # a ManualClock that leaves idle sleep on real time
        self._clock: Clock = clock
        self._active = 0
        self._sleep_timer: TimerHandle | None = None
        self._idle_since = 0.0  # clock seconds: when the current idle spell began
        self._stale = False  # the actor was busy since the timer was armed
        self._idle_event: asyncio.Event | None = None
        # keep_awake and wait_until work; made at the first (an empty set is 216 bytes, and
        # most awake actors never track any).
        self._tracked: set[asyncio.Future[Any]] | None = None
        self.entered = 0  # work started, counted (the idle expiry: "nothing since")
        # Raw sockets (on_websocket) open: they hold the actor awake like connections,
        # but a stop does not wait for them to end: it closes them (actor/stopping.py).
        self._sockets = 0
        self.prevent_sleep = False  # c.set_prevent_sleep(True)
        self._prevent_cleared: asyncio.Event | None = None  # made by a stop that waits
        self.run_active = False
        self.run_sleep_ok = False

    # ---------------------------------------------------------------- counting

    def enter(self) -> None:
        """Mark the start of work that keeps the actor awake."""
        self._active += 1
        self.entered += 1
        if self._sleep_timer is not None:
            self._stale = True

    def leave(self) -> None:
        """Mark the end of such work; arm the sleep timer if the actor is now idle."""
        self._active -= 1
        if self._active == 0:
            if self._idle_event is not None:
                self._idle_event.set()
            self.maybe_sleep()

    @property
    def working(self) -> bool:
        """True while work is in flight (an action, a connection being admitted...)."""
        return self._active > 0

    def is_idle(self) -> bool:
        """No work in flight, no connection, nothing else holding the actor awake."""
        return (
            self._active == 0
            and not len(self._connections)
            and not self._sockets
            and not self.prevent_sleep
            and (not self.run_active or self.run_sleep_ok)
        )

    def socket_opened(self) -> None:
        """A raw socket opened: it holds the actor awake until it closes."""
        self._sockets += 1
        self.changed()

    def socket_closed(self) -> None:
        """A raw socket closed."""
        self._sockets -= 1
        self.changed()

    def set_prevent_sleep(self, prevent: bool) -> None:
        """``c.set_prevent_sleep``: while True the actor does not idle-sleep, and a stop
        waits (within its grace period) for it to be cleared after ``on_sleep``."""
        self.prevent_sleep = prevent
        if not prevent and self._prevent_cleared is not None:
            self._prevent_cleared.set()
        self.changed()

    def run_started(self) -> None:
        """The run handler started: it holds the actor awake unless it waits."""
        self.run_active = True

    def run_finished(self) -> None:
        """The run handler ended."""
        self.run_active = False
        self.changed()

    def run_waiting(self, sleep_compatible: bool) -> None:
        """Called by the run handler's waits: a queue wait or long sleep lets the actor sleep."""
        self.run_sleep_ok = sleep_compatible
        self.changed()

    # ------------------------------------------------------------- sleep timer

    def maybe_sleep(self) -> None:
        """Start counting an idle spell if the actor is idle and not counting one yet."""
        if self._no_sleep or self._owner.status != "running" or not self.is_idle():
            return
        if self._sleep_timer is None:
            self._idle_since = self._now()
            self._stale = False
            self._sleep_timer = call_later(self._clock, self._sleep_timeout, self._sleep_due)
        elif self._stale:
            # Busy since the timer was armed: the spell starts now, and the timer, due
            # earlier, waits the rest when it runs out.
            self._idle_since = self._now()
            self._stale = False

    def changed(self) -> None:
        """Re-evaluate sleep eligibility after something else changed (e.g. run waits)."""
        if self.is_idle():
            self.maybe_sleep()
        elif self._sleep_timer is not None:
            self._stale = True

    def cancel_sleep(self) -> None:
        """Disarm the sleep timer (the actor is stopping, or busy again)."""
        if self._sleep_timer is not None:
            self._sleep_timer.cancel()
            self._sleep_timer = None
        self._stale = False

    def _sleep_due(self) -> None:
        self._sleep_timer = None
        if self._owner.status != "running" or not self.is_idle():
            return  # busy: becoming idle again starts a new spell (maybe_sleep)
        if self._stale:  # busy and idle again without maybe_sleep: count from now
            self._idle_since = self._now()
            self._stale = False
        remaining = self._idle_since + self._sleep_timeout - self._now()
        if remaining > 0.001:
            self._sleep_timer = call_later(self._clock, remaining, self._sleep_due)
        else:
            self._owner.sleep_when_idle()

    def _now(self) -> float:
        """The sleep timer's clock, in seconds (the loop's own, monotonic, when real)."""
        if isinstance(self._clock, SystemClock):
            return asyncio.get_running_loop().time()
        return self._clock.now_ms() / 1000

    # ----------------------------------------------------------- tracked work

    def keep_awake(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Track ``awaitable``; the actor does not idle-sleep while it runs."""
        future = asyncio.ensure_future(awaitable)
        self.enter()
        self._track().add(future)
        future.add_done_callback(self._keep_awake_done)
        return future

    def _track(self) -> set[asyncio.Future[Any]]:
        if self._tracked is None:
            self._tracked = set()
        return self._tracked

    def _keep_awake_done(self, future: asyncio.Future[Any]) -> None:
        self._track().discard(future)
        self.leave()

    def wait_until(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Track ``awaitable``; shutdown waits for it within the grace period."""
        future = asyncio.ensure_future(awaitable)
        tracked = self._track()
        tracked.add(future)
        future.add_done_callback(tracked.discard)
        return future

    # ------------------------------------------------------------ winding down

    async def wait_idle(self, deadline: float) -> None:
        """Wait (until ``deadline``, loop time) for the work in flight to finish."""
        if self._active > 0:
            self._idle_event = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await self._idle_event.wait()

    async def wait_tracked(self, deadline: float) -> None:
        """Wait (until ``deadline``, loop time) for ``keep_awake``/``wait_until`` work,
        and for ``prevent_sleep`` to be cleared; work started meanwhile is waited for too."""
        loop = asyncio.get_running_loop()
        while loop.time() < deadline:
            pending = [f for f in self._tracked or () if not f.done()]
            if pending:
                await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()))
            elif self.prevent_sleep:
                cleared = self._prevent_cleared = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await cleared.wait()
            else:
                return

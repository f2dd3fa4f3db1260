"""The activity tracker by itself: what keeps an actor awake, and its sleep timer."""

from __future__ import annotations

import asyncio

from perdure.runtime.kernel.activity import ActivityTracker
from perdure.runtime.kernel.clock import ManualClock

TIMEOUT = 0.01


class Owner:
    """The actor's side of the tracker."""

    def __init__(self, *, no_sleep: bool = False) -> None:
        self.status = "running"
        self.no_sleep = no_sleep
        self.conns: dict[str, object] = {}
        self.slept = 0

    def tracker(
        self, timeout: float = TIMEOUT, clock: ManualClock | None = None
    ) -> ActivityTracker:
        return ActivityTracker(
            self,
            sleep_timeout=timeout,
            no_sleep=self.no_sleep,
            connections=self.conns,
            clock=clock,
        )

    def sleep_when_idle(self) -> None:
        self.slept += 1


async def _past_timeout() -> None:
    await asyncio.sleep(TIMEOUT * 5)


async def test_the_timer_runs_once_the_last_work_leaves() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.enter()
    activity.enter()
    activity.leave()
    await _past_timeout()
    assert owner.slept == 0
    activity.leave()
    assert activity.is_idle()
    await _past_timeout()
    assert owner.slept == 1


async def test_work_that_starts_before_the_timeout_cancels_it() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.maybe_sleep()
    activity.enter()
    await _past_timeout()
    assert owner.slept == 0


async def test_a_connection_or_a_running_handler_keeps_the_actor_awake() -> None:
    owner = Owner()
    activity = owner.tracker()
    owner.conns["c"] = object()
    activity.maybe_sleep()
    await _past_timeout()
    assert owner.slept == 0
    del owner.conns["c"]
    activity.run_started()
    activity.maybe_sleep()
    await _past_timeout()
    assert owner.slept == 0
    activity.run_waiting(True)  # a sleep-compatible wait (a queue wait, a long sleep)
    await _past_timeout()
    assert owner.slept == 1
    activity.run_waiting(False)
    assert not activity.is_idle()
    activity.run_finished()
    assert activity.is_idle()


async def test_an_actor_that_may_not_sleep_never_arms_the_timer() -> None:
    for owner, status in ((Owner(no_sleep=True), "running"), (Owner(), "stopping")):
        owner.status = status
        activity = owner.tracker()
        activity.maybe_sleep()
        await _past_timeout()
        assert owner.slept == 0


async def test_an_actor_that_stopped_meanwhile_is_not_put_to_sleep() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.maybe_sleep()
    owner.status = "stopping"
    await _past_timeout()
    assert owner.slept == 0


async def test_a_stop_disarms_the_timer() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.maybe_sleep()
    activity.cancel_sleep()
    await _past_timeout()
    assert owner.slept == 0


async def test_keep_awake_holds_the_actor_and_shutdown_waits_for_tracked_work() -> None:
    owner = Owner()
    activity = owner.tracker()
    gate = asyncio.Event()
    held = activity.keep_awake(gate.wait())
    later = activity.wait_until(asyncio.sleep(TIMEOUT))
    await _past_timeout()
    assert owner.slept == 0
    assert not activity.is_idle()
    gate.set()
    loop = asyncio.get_running_loop()
    await activity.wait_tracked(loop.time() + 1)
    assert held.done()
    assert later.done()
    assert activity.is_idle()


async def test_wait_idle_returns_when_the_work_leaves_or_at_the_deadline() -> None:
    owner = Owner()
    activity = owner.tracker()
    loop = asyncio.get_running_loop()
    activity.enter()
    loop.call_later(TIMEOUT, activity.leave)
    await activity.wait_idle(loop.time() + 1)
    assert activity.is_idle()
    activity.enter()
    started = loop.time()
    await activity.wait_idle(started + TIMEOUT)
    assert not activity.is_idle()
    assert loop.time() - started < 1


async def test_the_idle_spell_counts_from_the_last_work() -> None:
    """Work while the timer is armed only marks it stale: when it runs out it waits
    the rest of the spell that began when the work left, then sleeps."""
    clock = ManualClock(idle_sleep=True)
    owner = Owner()
    activity = owner.tracker(10, clock)
    activity.maybe_sleep()  # idle from t=0: the timer is due at 10
    clock.advance(6)
    activity.enter()
    activity.leave()  # busy at 6: the spell starts again
    clock.advance(6)  # t=12: the first timer ran out 6 s into the spell
    assert owner.slept == 0
    clock.advance(3.9)
    assert owner.slept == 0
    clock.advance(0.1)  # t=16: 10 s since the work left
    assert owner.slept == 1


async def test_busy_when_the_timer_runs_out_then_idle_starts_a_full_spell() -> None:
    clock = ManualClock(idle_sleep=True)
    owner = Owner()
    activity = owner.tracker(10, clock)
    activity.maybe_sleep()
    activity.enter()
    clock.advance(30)  # the timer ran out while busy: it is dropped
    assert owner.slept == 0
    activity.leave()  # idle from t=30
    clock.advance(9.9)
    assert owner.slept == 0
    clock.advance(0.1)
    assert owner.slept == 1


async def test_actions_leave_no_cancelled_timers_behind() -> None:
    """One armed timer per idle actor, however many actions ran: re-arming on every
    action would leave a cancelled timer in the loop's heap for each."""
    owner = Owner()
    activity = owner.tracker(300)
    loop = asyncio.get_running_loop()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    for _ in range(40):
        activity.enter()
        activity.leave()
    assert len(loop._scheduled) - before == 1  # type: ignore[attr-defined]
    activity.cancel_sleep()


async def test_prevent_sleep_holds_the_actor_and_a_stop_waits_until_it_is_cleared() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.set_prevent_sleep(True)
    await _past_timeout()
    assert owner.slept == 0
    loop = asyncio.get_running_loop()
    loop.call_later(TIMEOUT, activity.set_prevent_sleep, False)
    started = loop.time()
    await activity.wait_tracked(started + 1)
    assert not activity.prevent_sleep
    assert TIMEOUT / 2 <= loop.time() - started < 1
    await _past_timeout()
    assert owner.slept == 1
    # Never cleared: the stop waits until its deadline only.
    activity.set_prevent_sleep(True)
    started = loop.time()
    await activity.wait_tracked(started + TIMEOUT)
    assert loop.time() - started < 1


async def test_an_open_raw_socket_holds_the_actor_but_is_not_work_a_stop_waits_for() -> None:
    owner = Owner()
    activity = owner.tracker()
    activity.socket_opened()
    await _past_timeout()
    assert owner.slept == 0
    loop = asyncio.get_running_loop()
    started = loop.time()
    await activity.wait_idle(started + 1)  # returns at once: nothing in flight
    assert loop.time() - started < 0.5
    activity.socket_closed()
    await _past_timeout()
    assert owner.slept == 1

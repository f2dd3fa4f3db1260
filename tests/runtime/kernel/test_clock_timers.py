"""The clock's timer helpers: on a ManualClock they wait for the clock, on the real one
they are the loop's own timers."""

from __future__ import annotations

import asyncio

import pytest

from perdure.runtime.kernel.clock import ManualClock, SystemClock, call_later, wait_first


async def test_call_later_runs_when_the_manual_clock_passes_it_and_not_after_cancel() -> None:
    clock = ManualClock(0)
    ran: list[str] = []
    call_later(clock, 5, lambda: ran.append("five"))
    cancelled = call_later(clock, 3, lambda: ran.append("three"))
    cancelled.cancel()
    assert (clock.sleepers, clock.next_deadline()) == (1, 5_000)
    clock.set(4_999)
    assert ran == []
    clock.set(5_000)
    assert ran == ["five"]
    assert clock.next_deadline() is None


async def test_a_timer_due_already_runs_soon_without_the_clock_moving() -> None:
    clock = ManualClock(0)
    ran = asyncio.Event()
    call_later(clock, 0, ran.set)
    await asyncio.wait_for(ran.wait(), 1)


async def test_wait_first_times_out_on_the_clock_not_on_the_wall() -> None:
    clock = ManualClock(0)
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiter = asyncio.ensure_future(wait_first(clock, {never}, 3600))
    await asyncio.sleep(0.01)
    assert not waiter.done()  # an hour of clock time, however long the wall waits
    clock.advance(3600)
    assert await asyncio.wait_for(waiter, 1) == set()
    assert clock.sleepers == 0

    soon: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiter = asyncio.ensure_future(wait_first(clock, {soon}, 3600))
    await asyncio.sleep(0)
    soon.set_result(None)
    assert await asyncio.wait_for(waiter, 1) == {soon}
    assert clock.sleepers == 0  # the timeout's sleeper is gone with it


async def test_polls_fire_but_are_not_the_next_event() -> None:
    clock = ManualClock(0)
    poll = asyncio.ensure_future(clock.sleep_until(1_000, poll=True))
    event = asyncio.ensure_future(clock.sleep_until(60_000))
    await asyncio.sleep(0)
    assert clock.next_deadline() == 60_000
    assert clock.next_deadline(polls=True) == 1_000
    clock.set(60_000)
    await asyncio.wait_for(asyncio.gather(poll, event), 1)


async def test_many_cancelled_timers_do_not_pile_up() -> None:
    clock = ManualClock(0)
    for _ in range(1_000):
        call_later(clock, 10, lambda: None).cancel()
    assert clock.sleepers == 0
    assert len(clock._timers) <= 130


async def test_on_the_system_clock_they_are_real_timers() -> None:
    clock = SystemClock()
    ran = asyncio.Event()
    handle = call_later(clock, 0.01, ran.set)
    assert isinstance(handle, asyncio.TimerHandle)
    await asyncio.wait_for(ran.wait(), 1)
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    assert await wait_first(clock, {never}, 0.01) == set()


async def test_a_failing_timer_callback_stops_no_other(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("broken timer")

    call_later(clock, 1, broken)
    call_later(clock, 2, lambda: ran.append("after"))
    clock.set(2_000)
    assert ran == ["after"]
    assert "a ManualClock timer callback failed" in caplog.text

"""ManualClock: time moves only when told to, and sleepers wake when it passes them."""

from __future__ import annotations

import asyncio

import pytest

from perdure.runtime.kernel.clock import ManualClock, SystemClock, sleep_until_or_event


async def test_sleepers_wake_in_deadline_order_when_the_clock_passes_them() -> None:
    clock = ManualClock(1_000)
    woke: list[int] = []

    async def sleeper(deadline: int) -> None:
        await clock.sleep_until(deadline)
        woke.append(deadline)

    tasks = [asyncio.ensure_future(sleeper(d)) for d in (3_000, 2_000, 5_000)]
    await asyncio.sleep(0)
    assert clock.sleepers == 3
    clock.advance(1)  # 2_000
    await asyncio.sleep(0)
    assert woke == [2_000]
    clock.set(4_000)
    await asyncio.sleep(0)
    assert woke == [2_000, 3_000]
    assert clock.now_ms() == 4_000
    clock.advance(10)
    await asyncio.wait_for(asyncio.gather(*tasks), 1)
    assert woke == [2_000, 3_000, 5_000]


async def test_a_past_deadline_returns_at_once_and_time_never_goes_back() -> None:
    clock = ManualClock(1_000)
    await asyncio.wait_for(clock.sleep_until(999), 1)
    with pytest.raises(ValueError, match="never goes back"):
        clock.set(500)


async def test_a_cancelled_sleeper_leaves_the_clock() -> None:
    clock = ManualClock(0)
    task = asyncio.ensure_future(clock.sleep_until(10_000))
    await asyncio.sleep(0)
    assert clock.sleepers == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0


async def test_sleep_until_or_event() -> None:
    clock = ManualClock(0)
    event = asyncio.Event()
    waiter = asyncio.ensure_future(sleep_until_or_event(clock, 5_000, event))
    await asyncio.sleep(0)
    event.set()
    await asyncio.wait_for(waiter, 1)
    assert clock.sleepers == 0
    event.clear()
    waiter = asyncio.ensure_future(sleep_until_or_event(clock, 5_000, event))
    await asyncio.sleep(0)
    clock.advance(5)
    await asyncio.wait_for(waiter, 1)
    waiter = asyncio.ensure_future(sleep_until_or_event(clock, None, event))
    await asyncio.sleep(0)
    event.set()
    await asyncio.wait_for(waiter, 1)


async def test_the_system_clock_sleeps_until_a_wall_time() -> None:
    clock = SystemClock()
    start = clock.now_ms()
    await asyncio.wait_for(clock.sleep_until(start + 20), 1)
    assert clock.now_ms() >= start + 20

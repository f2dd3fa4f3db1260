"""The slow-client clock and limits (perdure.server.edge.slow_clients), on a real event loop
with short deadlines; over a real server: tests/scenarios/edge/test_slow_clients.py."""

from __future__ import annotations

import asyncio

import pytest

from perdure.server.edge.http_limits import EdgeHttpProtocol
from perdure.server.edge.refusals import EdgeRefusals
from perdure.server.edge.slow_clients import (
    BODY,
    HEADERS,
    IDLE,
    WAITING,
    RequestClock,
    SlowClientLimits,
    timeout_refusal,
)

pytestmark = pytest.mark.timeout(20)

WAIT = 5.0


class _Expiries:
    def __init__(self) -> None:
        self.phases: list[int] = []
        self.event = asyncio.Event()

    def __call__(self, phase: int) -> None:
        self.phases.append(phase)
        self.event.set()

    async def next(self) -> int:
        async with asyncio.timeout(WAIT):
            await self.event.wait()
        self.event.clear()
        return self.phases[-1]


async def test_a_phase_expires_once_at_its_deadline() -> None:
    loop = asyncio.get_running_loop()
    expiries = _Expiries()
    clock = RequestClock(loop, expiries)
    started = loop.time()
    clock.start(HEADERS, 0.05)
    assert await expiries.next() == HEADERS
    assert loop.time() - started >= 0.04
    assert clock.phase == IDLE
    await asyncio.sleep(0.1)
    assert expiries.phases == [HEADERS]


async def test_a_stopped_clock_does_not_expire() -> None:
    expiries = _Expiries()
    clock = RequestClock(asyncio.get_running_loop(), expiries)
    clock.start(WAITING, 0.03)
    clock.stop()
    await asyncio.sleep(0.1)
    assert expiries.phases == []


async def test_a_later_deadline_reuses_the_pending_timer() -> None:
    loop = asyncio.get_running_loop()
    expiries = _Expiries()
    clock = RequestClock(loop, expiries)
    clock.start(HEADERS, 0.03)
    first = clock._timer
    clock.start(BODY, 0.15)  # later: the pending timer fires early and re-arms
    assert clock._timer is first
    started = loop.time()
    assert await expiries.next() == BODY
    assert loop.time() - started >= 0.1
    assert expiries.phases == [BODY]


async def test_a_sooner_deadline_replaces_the_pending_timer() -> None:
    loop = asyncio.get_running_loop()
    expiries = _Expiries()
    clock = RequestClock(loop, expiries)
    clock.start(BODY, 10.0)
    started = loop.time()
    clock.start(HEADERS, 0.03)
    assert await expiries.next() == HEADERS
    assert loop.time() - started < 5.0


async def test_close_cancels_the_timer() -> None:
    expiries = _Expiries()
    clock = RequestClock(asyncio.get_running_loop(), expiries)
    clock.start(BODY, 0.03)
    clock.close()
    assert clock._timer is None
    await asyncio.sleep(0.1)
    assert expiries.phases == []


def test_the_refusals_name_their_limit() -> None:
    limits = SlowClientLimits(header_timeout=2.5, body_timeout=7)
    for phase, code, seconds in ((HEADERS, "header_timeout", 2.5), (BODY, "body_timeout", 7)):
        error = timeout_refusal(phase, limits)
        assert error.identifier == f"request.{code}"
        assert error.status == 408
        assert error.metadata == {"timeout": seconds}
        assert f"{seconds:g} s" in error.message


@pytest.mark.parametrize("seconds", [0, -1, float("inf"), float("nan")])
def test_limits_must_be_positive_seconds(seconds: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        SlowClientLimits(body_timeout=seconds)


def test_bound_protocols_carry_their_limits_and_counter() -> None:
    limits = SlowClientLimits(header_timeout=1)
    refusals = EdgeRefusals()
    bound = EdgeHttpProtocol.bound(limits, refusals)
    assert issubclass(bound, EdgeHttpProtocol)
    assert (bound.limits, bound.refusals) == (limits, refusals)
    assert EdgeHttpProtocol.limits == SlowClientLimits()  # the class itself is unchanged

"""The test kit's errors: bad times and durations, work that never comes to rest."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from perdure import ActorContext, actor, setup
from perdure.errors import ArgumentError
from perdure.testing import ActorTestEnv, SettleTimeout, TimeTravelError

from .apps import registry

START = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("by", "code"),
    [
        (-1, "invalid_duration"),
        (timedelta(seconds=-1), "invalid_duration"),
        ("1h", "invalid_duration"),
        (float("nan"), "invalid_duration"),
    ],
)
async def test_a_bad_duration_is_refused_and_time_stays(by: Any, code: str) -> None:
    async with ActorTestEnv(registry, start=START) as env:
        with pytest.raises(ArgumentError) as caught:
            await env.advance(by)
        assert caught.value.code == code
        assert env.now == START


async def test_a_naive_or_past_time_is_refused() -> None:
    async with ActorTestEnv(registry, start=START) as env:
        with pytest.raises(ArgumentError, match="naive datetime") as naive:
            await env.advance_to(datetime(2024, 1, 2))
        assert naive.value.code == "invalid_time"
        with pytest.raises(TimeTravelError, match="never goes back") as past:
            await env.advance_to(START - timedelta(seconds=1))
        assert past.value.code == "time_goes_back"
        assert env.now == START


async def test_an_unknown_store_is_refused() -> None:
    with pytest.raises(ArgumentError, match="memory") as caught:
        async with ActorTestEnv(registry, store="postgres"):  # type: ignore[arg-type]
            pass
    assert caught.value.code == "invalid_store"


_spinning: dict[str, bool] = {}


async def _spin(c: ActorContext) -> None:
    async def busy_until_told() -> None:
        while _spinning.get(c.actor_id):
            await asyncio.sleep(0)

    _spinning[c.actor_id] = True
    c.keep_awake(busy_until_told())


busy = setup(use={"spinner": actor(state={}, actions={"spin": _spin})})


async def test_work_that_never_rests_raises_settle_timeout() -> None:
    async with ActorTestEnv(busy, start=START, settle_timeout=0.2) as env:
        spinner = env.client.spinner.get_or_create("s")
        await spinner.spin()
        with pytest.raises(SettleTimeout, match="did not come to rest") as caught:
            await env.advance(1)
        assert caught.value.code == "settle_timeout"
        _spinning[await spinner.resolve()] = False
        await env.advance(1)  # at rest again


async def test_too_many_timers_in_one_advance_is_an_error() -> None:
    async with ActorTestEnv(registry, start=START, max_timers=10, idle_sleep=False) as env:
        await env.client.clock.get_or_create("c").ticks()
        with pytest.raises(SettleTimeout, match="More than 10 timers") as caught:
            await env.advance(timedelta(days=1))
        assert caught.value.code == "too_many_timers"
        assert 0 < await env.client.clock.get("c").ticks() < 24  # stopped on the way

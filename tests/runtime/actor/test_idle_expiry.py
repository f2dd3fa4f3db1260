"""Idle expiry (``idle_ttl``, docs/options.md) on the test kit's manual clock.

An actor idle for its ttl with nothing pending is destroyed (``on_destroy`` runs, its
row is gone), by its alarm while it sleeps, and across a restart; any request in
between starts the count again; a pending schedule, a queued message or a workflow that
has not completed keeps it; an actor without the option never expires.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from perdure.store import SQLiteStore
from perdure.testing import ActorTestEnv
from tests.support.apps.later import DESTROYED, SLEEP_S, TTL_S, registry

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    DESTROYED.clear()
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def _exists(env: ActorTestEnv, actor_id: str) -> bool:
    return await env.store.get_actor(actor_id) is not None


async def test_an_idle_actor_is_destroyed_after_its_ttl(env: ActorTestEnv) -> None:
    temp = env.client.temp.get_or_create("idle")
    assert await temp.touch() == 1
    actor_id = await temp.resolve()
    await env.advance(SLEEP_S + 0.5)
    assert not env.runtime.is_live(actor_id)  # asleep, with its expiry as its alarm
    stored = await env.store.get_actor(actor_id)
    assert stored is not None
    assert stored.wake_at == _ms(START) + int(TTL_S * 1000)
    await env.advance(TTL_S - SLEEP_S - 0.6)
    assert await _exists(env, actor_id)
    assert DESTROYED == []
    await env.advance(0.2)
    assert not await _exists(env, actor_id)
    assert DESTROYED == ["idle"]


async def test_a_request_starts_the_count_again(env: ActorTestEnv) -> None:
    temp = env.client.temp.get_or_create("busy")
    actor_id = await temp.resolve()
    await temp.touch()
    await env.advance(TTL_S - 2)
    assert await temp.touch() == 2  # wakes it: idle from now on
    await env.advance(TTL_S - 0.6)
    assert await _exists(env, actor_id)
    await env.advance(0.8)
    assert not await _exists(env, actor_id)
    assert DESTROYED == ["busy"]


async def test_a_pending_schedule_keeps_it(env: ActorTestEnv) -> None:
    temp = env.client.temp.get_or_create("scheduled")
    actor_id = await temp.resolve()
    await temp.schedule_touch(600)
    await env.advance(300)
    assert await _exists(env, actor_id)
    await env.advance(300.1)  # the schedule fires (activity), then nothing is pending
    assert await env.store.get_actor(actor_id) is not None
    await env.advance(TTL_S + 1)
    assert not await _exists(env, actor_id)
    assert DESTROYED == ["scheduled"]


async def test_a_queued_message_keeps_it(env: ActorTestEnv) -> None:
    temp = env.client.temp.get_or_create("mail")
    actor_id = await temp.resolve()
    await temp.send("jobs", "nobody reads this")
    await env.advance(TTL_S * 10)
    assert await _exists(env, actor_id)
    assert DESTROYED == []


async def test_a_waiting_workflow_keeps_it_until_it_completes(env: ActorTestEnv) -> None:
    flow = env.client.temp_flow.get_or_create("flow")
    actor_id = await flow.resolve()
    await env.advance(TTL_S * 10)
    assert await _exists(env, actor_id)
    await flow.send("go", "now")
    await env.settle()
    assert await flow.done() is True
    await env.advance(TTL_S + 1)
    assert not await _exists(env, actor_id)
    assert DESTROYED == ["flow"]


async def test_without_the_option_an_actor_never_expires(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    actor_id = await worker.resolve()
    await env.advance(timedelta(days=30))
    assert await _exists(env, actor_id)


async def test_the_expiry_survives_a_restart(tmp_path: Path) -> None:
    DESTROYED.clear()
    async with ActorTestEnv(registry, store=SQLiteStore(tmp_path / "db"), start=START) as env:
        temp = env.client.temp.get_or_create("restart")
        actor_id = await temp.resolve()
        await temp.touch()
        await env.advance(SLEEP_S + 0.5)  # asleep, its expiry stored
    later = START + timedelta(seconds=TTL_S / 2)
    async with ActorTestEnv(registry, store=SQLiteStore(tmp_path / "db"), start=later) as env:
        assert await _exists(env, actor_id)
        await env.advance(TTL_S / 2 + 0.2)  # nothing asked for it: its alarm did it
        assert not await _exists(env, actor_id)
    assert DESTROYED == ["restart"]


async def test_an_actor_stopped_awake_expires_late_never_early(tmp_path: Path) -> None:
    """A stop that is not the sleep timer's (a shutdown) leaves the awake ceiling."""
    DESTROYED.clear()
    async with ActorTestEnv(
        registry, store=SQLiteStore(tmp_path / "db"), start=START, idle_sleep=False
    ) as env:
        temp = env.client.temp.get_or_create("shutdown")
        actor_id = await temp.resolve()
        await temp.touch()
    async with ActorTestEnv(registry, store=SQLiteStore(tmp_path / "db"), start=START) as env:
        await env.advance(TTL_S + 1)
        assert await _exists(env, actor_id)  # not before its ceiling
        await env.advance(61)
        assert not await _exists(env, actor_id)
    assert DESTROYED == ["shutdown"]


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)

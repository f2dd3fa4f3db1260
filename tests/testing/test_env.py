"""ActorTestEnv: days of durable time in milliseconds, on a memory store and a SQLite file."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from perdure.store import SQLiteStore
from perdure.testing import ActorTestEnv

from .apps import ATTEMPTS, registry

START = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def test_a_workflow_that_sleeps_three_days_reminds_in_milliseconds(
    env: ActorTestEnv,
) -> None:
    began = time.monotonic()
    onboarding = env.client.onboarding.get_or_create("ada")
    assert await onboarding.sent() == ["welcome"]
    await env.advance(timedelta(days=2))
    assert env.runtime.live_count == 0  # idle, the actor hibernates through its sleep
    await env.advance(timedelta(days=1) - timedelta(milliseconds=1))
    assert env.now == START + timedelta(days=3) - timedelta(milliseconds=1)
    assert await onboarding.sent() == ["welcome"]
    await env.advance(timedelta(milliseconds=1))
    assert await onboarding.sent() == ["welcome", "reminder"]
    assert (await onboarding.action("$workflow"))["status"] == "completed"
    assert time.monotonic() - began < 5


async def test_an_hourly_cron_fires_24_times_in_a_day(env: ActorTestEnv) -> None:
    clock = env.client.clock.get_or_create("c")
    assert await clock.ticks() == 0
    await env.advance(timedelta(days=1))
    assert await clock.ticks() == 24
    assert await clock.next_tick() == env.clock.now_ms() + 3_600_000  # anchored, on time
    await env.advance(timedelta(minutes=59))
    assert await clock.ticks() == 24


async def test_a_step_that_fails_twice_succeeds_after_its_backoffs(env: ActorTestEnv) -> None:
    key = f"r-{id(env)}"
    retrying = env.client.retrying.get_or_create(key)
    await retrying.resolve()
    await env.settle()
    assert ATTEMPTS[key] == 1
    await env.advance(599)  # the first retry waits 600 s
    assert ATTEMPTS[key] == 1
    await env.advance(1)
    assert ATTEMPTS[key] == 2
    await env.advance(1199)  # the second 1200 s
    assert ATTEMPTS[key] == 2
    await env.advance(1)
    assert ATTEMPTS[key] == 3
    status = await retrying.action("$workflow")
    assert (status["status"], status["output"]) == ("completed", "done")


async def test_a_workflow_receive_times_out_when_its_hour_passes(env: ActorTestEnv) -> None:
    asking = env.client.asking.get_or_create("late")
    assert await asking.answer() is None
    await env.advance(timedelta(minutes=59))
    assert await asking.answer() is None
    await env.advance(timedelta(minutes=1))
    assert await asking.answer() == []

    answered = env.client.asking.get_or_create("quick")
    await answered.resolve()
    await env.advance(timedelta(minutes=30))
    await answered.send("answers", 42)
    await env.settle()
    assert await answered.answer() == [42]


async def test_a_required_reply_fails_the_workflow_when_its_two_hours_pass(
    env: ActorTestEnv,
) -> None:
    deadline = env.client.deadline.get_or_create("d")
    await deadline.resolve()
    await env.advance(timedelta(hours=2) - timedelta(milliseconds=1))
    assert (await deadline.action("$workflow"))["status"] == "running"
    await env.advance(timedelta(milliseconds=1))
    status = await deadline.action("$workflow")
    assert status["status"] == "failed"
    assert "timed out" in status["error"]["message"]


async def test_a_run_handler_receive_times_out_on_the_clock(env: ActorTestEnv) -> None:
    listener = env.client.listener.get_or_create("l")
    assert await listener.heard() == []
    await env.advance(599)
    assert await listener.heard() == []
    await env.advance(1)
    assert await listener.heard() == [None]
    await listener.send("inbox", "hello")
    await env.settle()
    assert await listener.heard() == [None, "hello"]
    await env.advance(timedelta(minutes=30))  # three more timeouts
    assert await listener.heard() == [None, "hello", None, None, None]


async def test_a_one_shot_schedule_fires_when_its_time_comes(env: ActorTestEnv) -> None:
    clock = env.client.clock.get_or_create("once")
    await clock.later(90)
    await env.advance(89)
    assert await clock.ticks() == 0
    await env.advance_to(START + timedelta(seconds=90))
    assert await clock.ticks() == 1


async def test_idle_actors_sleep_on_the_clock_unless_told_not_to() -> None:
    async with ActorTestEnv(registry, start=START) as env:
        await env.client.clock.get_or_create("c").ticks()
        await env.advance(29)
        assert env.runtime.live_count == 1
        await env.advance(1)  # sleep_timeout: 30 s idle
        assert env.runtime.live_count == 0
    async with ActorTestEnv(registry, start=START, idle_sleep=False) as env:
        await env.client.clock.get_or_create("c").ticks()
        await env.advance(timedelta(minutes=30))
        assert env.runtime.live_count == 1


async def test_a_store_of_ones_own_is_used_and_closed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "mine.db")
    async with ActorTestEnv(registry, store=store, start=START) as env:
        assert env.store is store
        clock = env.client.clock.get_or_create("own")
        await clock.later(60)
        await env.advance(60)
        assert await clock.ticks() == 1
    with closing(sqlite3.connect(tmp_path / "mine.db")) as db:
        count = db.execute("SELECT count(*) FROM actors").fetchone()
    assert count == (1,)  # written to the file given, and still there


async def test_settle_lets_a_sent_message_be_taken_without_moving_time(
    env: ActorTestEnv,
) -> None:
    asking = env.client.asking.get_or_create("settle")
    await asking.resolve()
    await env.settle()
    await asking.send("answers", "yes")  # returns once the message is durable
    await env.settle()
    assert await asking.answer() == ["yes"]
    assert env.now == START


async def test_the_temporary_sqlite_file_is_removed_afterwards() -> None:
    async with ActorTestEnv(registry, store="sqlite", start=START) as env:
        store = env.store
        assert isinstance(store, SQLiteStore)
        await env.client.clock.get_or_create("c").ticks()
        assert store.path.exists()
    assert not store.path.parent.exists()


async def test_kv_reads_what_an_actor_made_durable(env: ActorTestEnv) -> None:
    shelf = env.client.shelf.get_or_create("s")
    assert await env.kv(shelf) == []
    await shelf.store(3)
    actor_id = await shelf.resolve()
    assert await env.kv(actor_id) == [
        (b"\x00raw", "bytes"),
        ("book:0", {"n": 0}),
        ("book:1", {"n": 1}),
        ("book:2", {"n": 2}),
    ]
    assert await env.kv(shelf, "book:", limit=2) == [("book:0", {"n": 0}), ("book:1", {"n": 1})]
    assert await env.kv(shelf, b"\x00") == [(b"\x00raw", "bytes")]

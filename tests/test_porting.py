"""Ported code that trips a user today fails clearly, where the mistake is, or just works.

A real runtime on a real SQLite file (and a ManualClock where schedules are involved).
What a network client of a real ``perdure serve`` gets is in
tests/scenarios/examples/test_ported_actors.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from perdure import ActorRuntime, PerdureError
from perdure.store import SQLiteStore
from tests.support.apps.porting import make_registry, registry
from tests.support.porting import fresh_porting_warnings  # noqa: F401  (autouse)
from tests.support.schedule_rig import START_MS, Rig, eventually

WAIT = 10.0


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ActorRuntime]:
    async with ActorRuntime(registry, SQLiteStore(tmp_path / "data.db")) as started:
        yield started


async def test_a_camel_case_keyword_fails_at_the_call_in_process(runtime: ActorRuntime) -> None:
    handle = runtime.client().trapCron.get_or_create("k")
    with pytest.raises(PerdureError) as caught:
        await handle.getState()
    assert caught.value.identifier == "api.unknown_argument"
    assert isinstance(caught.value, TypeError)
    assert "did you mean `max_history`?" in caught.value.message


async def test_fire_info_reads_like_the_api(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_registry())
    await rig.start()
    try:
        c = await rig.ctx("fires")
        job = await c.cron.get("tick")
        assert job is not None
        assert job.next_run_time == dt.datetime(2024, 1, 1, 0, 0, 10, tzinfo=dt.UTC)
        assert job.last_run_time is None
        await rig.advance(10)

        async def fired() -> bool:
            return len((await rig.handle("fires").getState())["fires"]) == 1

        await eventually(fired, what="the first fire")
        (fire,) = (await rig.handle("fires").getState())["fires"]
        history = await c.cron.history("tick")
    finally:
        await rig.stop()
    assert fire == {
        "at": START_MS + 10_000,  # the wire's and the seed's form: epoch milliseconds
        "time": "2024-01-01T00:00:10+00:00",
        "hint": "ScheduledFireInfo has no attribute `scheduledAt`; did you mean `scheduled_at`?",
    }
    assert history[0].scheduled_time == dt.datetime(2024, 1, 1, 0, 0, 10, tzinfo=dt.UTC)
    assert history[0]["scheduledAt"] == START_MS + 10_000  # the mapping keeps the int


async def test_vars_may_be_an_object_with_attributes(runtime: ActorRuntime) -> None:
    assert await runtime.client().varsObject.get_or_create("k").resource() == "connected"


async def test_dict_vars_read_as_an_attribute_say_how_to_write_it(runtime: ActorRuntime) -> None:
    handle = runtime.client().varsDict.get_or_create("k")
    message = await handle.attribute()
    assert message.startswith("c.vars is a dict, so `vars.resource` is not an attribute")
    assert 'write `c.vars["resource"]`, or return an object' in message
    assert await handle.key() == "connected"  # the dict itself is untouched


async def test_receive_timeouts_take_timedelta_and_messages_give_datetimes(
    runtime: ActorRuntime,
) -> None:
    handle = runtime.client().queues.get_or_create("k")
    assert await handle.receive() is None  # timed out after 50 ms
    before = dt.datetime.now(dt.UTC)
    await handle.send("jobs", {"value": 5})
    got = await handle.receive()
    assert got["body"] == {"value": 5}
    sent = dt.datetime.fromisoformat(got["time"])
    assert sent == dt.datetime.fromtimestamp(got["at"] / 1000, dt.UTC)
    assert before - dt.timedelta(seconds=1) <= sent <= dt.datetime.now(dt.UTC)


@pytest.mark.parametrize(
    ("action", "identifier", "text"),
    [
        ("stringTimeout", "api.invalid_duration", "c.queue.next_batch() timeout must be seconds"),
        ("camelCase", "api.unknown_argument", "unknown argument `timeoutMs`"),
    ],
)
async def test_bad_receive_arguments_fail_with_a_code(
    runtime: ActorRuntime, action: str, identifier: str, text: str
) -> None:
    with pytest.raises(PerdureError) as caught:
        await runtime.client().queues.get_or_create("k").action(action)
    assert caught.value.identifier == identifier
    assert text in caught.value.message


async def test_workflow_durations_and_instants_take_timedelta_and_datetime(
    runtime: ActorRuntime,
) -> None:
    handle = runtime.client().sleeper.get_or_create("k")
    await handle.send("go", {"now": True})
    status: dict[str, Any] = {}
    async with asyncio.timeout(WAIT):
        while status.get("status") != "completed":
            await asyncio.sleep(0.02)
            status = await handle.action("$workflow")
    assert status["output"] == str(dt.datetime.now(dt.UTC).year)
    assert await handle.getState() == {"done": True}


@pytest.mark.parametrize(
    ("name", "identifier", "text"),
    [
        ("camelCaseStep", "api.unknown_argument", "did you mean `max_retries`?"),
        ("stringSleep", "api.invalid_duration", "ctx.sleep() duration must be seconds"),
        ("naiveSleepUntil", "api.invalid_time", "is a naive datetime"),
    ],
)
async def test_bad_workflow_arguments_fail_the_workflow_naming_the_fix(
    runtime: ActorRuntime, name: str, identifier: str, text: str
) -> None:
    handle = runtime.client().actor(name).get_or_create("k")
    status: dict[str, Any] = {}
    async with asyncio.timeout(WAIT):
        while status.get("status") != "failed":
            await asyncio.sleep(0.02)
            status = await handle.action("$workflow")
    error = status["error"]
    assert f"{error['group']}.{error['code']}" == identifier, error
    assert text in error["message"]

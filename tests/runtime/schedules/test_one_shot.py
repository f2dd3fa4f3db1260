"""One-shot schedules: ``c.schedule.after/at/get/list/cancel``, on a ManualClock."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from perdure import ScheduledEventInfo, ScheduleError, StateNotSerializable
from tests.support.schedule_rig import START_MS, Rig, eventually


async def calls(rig: Rig, key: str = "k") -> list[Any]:
    result: list[Any] = await rig.handle(key=key).calls()
    return result


async def test_after_fires_once_with_args_then_fire_info(rig: Rig) -> None:
    c = await rig.ctx()
    schedule_id = await c.schedule.after(10, "record", 1, "two", {"three": 3})
    assert uuid.UUID(schedule_id).version == 4
    await rig.advance(9.999)
    assert await calls(rig) == []
    await rig.advance(0.001)
    await eventually(lambda: calls(rig), what="the scheduled call")
    due = START_MS + 10_000
    fire = {"kind": "at", "id": schedule_id, "scheduledAt": due, "firedAt": due}
    assert await calls(rig) == [{"args": [1, "two", {"three": 3}], "fire": fire}]
    assert await c.schedule.get(schedule_id) is None
    await rig.advance(3600)
    assert len(await calls(rig)) == 1


async def test_at_accepts_aware_datetimes_and_epoch_ms(rig: Rig) -> None:
    c = await rig.ctx()
    when = dt.datetime.fromtimestamp(START_MS / 1000 + 60, dt.timezone(dt.timedelta(hours=5)))
    by_datetime = await c.schedule.at(when, "record", "dt")
    by_ms = await c.schedule.at(START_MS + 30_000, "record", "ms")
    events = await c.schedule.list()
    assert [(e.id, e.run_at, e.args) for e in events] == [
        (by_ms, START_MS + 30_000, ["ms"]),
        (by_datetime, START_MS + 60_000, ["dt"]),
    ]
    await rig.advance(60)
    await eventually(lambda: _count(rig, 2), what="both calls")
    assert [call["args"] for call in await calls(rig)] == [["ms"], ["dt"]]


async def _count(rig: Rig, expected: int) -> bool:
    return len(await calls(rig)) >= expected


async def test_a_time_in_the_past_fires_at_once(rig: Rig) -> None:
    c = await rig.ctx()
    await c.schedule.at(START_MS - 5_000, "record")
    await eventually(lambda: _count(rig, 1), what="the overdue call")
    fire = (await calls(rig))[0]["fire"]
    assert (fire["scheduledAt"], fire["firedAt"]) == (START_MS - 5_000, START_MS)


async def test_get_list_and_cancel(rig: Rig) -> None:
    c = await rig.ctx()
    late = await c.schedule.after(dt.timedelta(minutes=2), "record", "late")
    soon = await c.schedule.after(60, "record", "soon")
    info = await c.schedule.get(soon)
    assert isinstance(info, ScheduledEventInfo)
    assert (info.id, info.action, info.args, info.run_at) == (
        soon,
        "record",
        ["soon"],
        START_MS + 60_000,
    )
    assert dict(info) == {
        "id": soon,
        "action": "record",
        "args": ["soon"],
        "runAt": START_MS + 60_000,
    }
    assert [e.id for e in await c.schedule.list()] == [soon, late]
    assert await c.schedule.cancel(soon) is True
    assert await c.schedule.cancel(soon) is False
    assert await c.schedule.cancel("no-such-id") is False
    assert await c.schedule.get(soon) is None
    assert await c.schedule.get("no-such-id") is None
    await rig.advance(120)
    await eventually(lambda: _count(rig, 1), what="the remaining call")
    assert [call["args"] for call in await calls(rig)] == [["late"]]
    assert await c.schedule.list() == []


async def test_recurring_jobs_are_not_one_shots(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="job", interval=60, action="record")
    assert await c.schedule.list() == []
    assert await c.schedule.get("cron:job") is None
    assert await c.schedule.cancel("cron:job") is False
    assert await c.cron.get("job") is not None


async def test_a_failing_one_shot_is_claimed_and_not_retried(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.schedule.after(5, "fail")
    actor_id = c.actor_id
    await rig.advance(5)
    await eventually(lambda: rig.stored_state(actor_id)["failures"] == 1, what="the failure")
    assert rig.rows("SELECT COUNT(*) FROM schedules") == [(0,)]
    await rig.advance(3600)
    assert rig.stored_state(actor_id)["failures"] == 1


async def test_the_claim_is_durable_before_the_action_runs(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.schedule.after(5, "slow")
    assert rig.rows("SELECT kind, action FROM schedules") == [("at", "slow")]
    await rig.advance(5)
    await eventually(lambda: len(c.state["calls"]) == 1, what="the slow action to start")
    # The action is still running: its schedule is already gone from the file.
    assert rig.rows("SELECT COUNT(*) FROM schedules") == [(0,)]


async def test_schedule_commits_with_the_state_of_its_action(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    handle = rig.handle()
    schedule_id = await handle.scheduleInAction(30)
    actor_id = await handle.resolve()
    # Both are in the file when the action returns.
    assert rig.stored_state(actor_id)["touched"] is True
    assert rig.rows("SELECT id, run_at FROM schedules") == [(schedule_id, START_MS + 30_000)]
    assert rig.rows("SELECT wake_at FROM actors") == [(START_MS + 30_000,)]


async def test_one_shots_survive_a_restart_and_wake_the_actor(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    schedule_id = await c.schedule.after(60, "record", "persisted")
    actor_id = c.actor_id
    await rig.stop()
    rig.clock.advance(600)  # the server was down when it fell due
    await rig.start()
    # Nobody calls the actor: the alarm scheduler wakes it for its overdue schedule.
    await eventually(lambda: rig.stored_state(actor_id)["calls"], what="the woken fire")
    fire = rig.stored_state(actor_id)["calls"][0]["fire"]
    assert fire["id"] == schedule_id
    assert fire["scheduledAt"] == START_MS + 60_000
    assert fire["firedAt"] == START_MS + 600_000


async def test_a_hibernated_actor_is_woken_by_its_alarm(rig: Rig) -> None:
    c = await rig.ctx()
    await c.schedule.after(60, "record")
    actor_id = c.actor_id
    await rig.rt.sleep_actor(actor_id)
    assert not rig.rt.is_live(actor_id)
    record = await rig.rt.store.get_actor(actor_id)
    assert record is not None
    assert record.wake_at == START_MS + 60_000
    await rig.advance(59)
    assert not rig.rt.is_live(actor_id)
    await rig.advance(1)
    await eventually(lambda: rig.rt.is_live(actor_id), what="the alarm to wake the actor")
    await eventually(lambda: _count(rig, 1), what="the fire")


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda c: c.schedule.after(-1, "record"), "invalid_delay"),
        (lambda c: c.schedule.after(float("nan"), "record"), "invalid_delay"),
        (lambda c: c.schedule.after("10", "record"), "invalid_delay"),
        (lambda c: c.schedule.at(dt.datetime(2030, 1, 1), "record"), "invalid_time"),
        (lambda c: c.schedule.at("tomorrow", "record"), "invalid_time"),
        (lambda c: c.schedule.after(1, "noSuchAction"), "action_not_found"),
        (lambda c: c.schedule.after(1, "twoArgs", 1), "invalid_arguments"),
        (lambda c: c.schedule.after(1, "fail", "extra"), "invalid_arguments"),
    ],
)
async def test_invalid_one_shots_are_refused(rig: Rig, call: Any, code: str) -> None:
    c = await rig.ctx()
    with pytest.raises(ScheduleError) as caught:
        await call(c)
    assert caught.value.identifier == f"schedule.{code}"
    assert caught.value.status == 400
    assert await c.schedule.list() == []


async def test_unstorable_args_are_refused(rig: Rig) -> None:
    c = await rig.ctx()
    with pytest.raises(StateNotSerializable):
        await c.schedule.after(1, "record", object())
    assert await c.schedule.list() == []

"""Recurring jobs: ``c.cron.every/set/get/list/delete/history``, on a ManualClock."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from perdure import CronFire, CronJobInfo, ScheduleError
from tests.support.schedule_rig import START_MS, Rig, eventually


async def calls(rig: Rig) -> list[Any]:
    result: list[Any] = await rig.handle().calls()
    return result


async def has_calls(rig: Rig, count: int) -> bool:
    return len(await calls(rig)) >= count


def ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


async def test_every_fires_on_an_anchored_cadence(rig: Rig) -> None:
    c = await rig.ctx()
    info = await c.cron.every(
        name="tick", interval=dt.timedelta(seconds=10), action="record", args=[7]
    )
    assert isinstance(info, CronJobInfo)
    assert (info.kind, info.interval, info.next_run_at) == ("every", 10.0, START_MS + 10_000)
    for n in (1, 2, 3):
        await rig.advance(10)
        await eventually(lambda n=n: has_calls(rig, n), what=f"fire {n}")
    fires = [call["fire"] for call in await calls(rig)]
    assert fires == [
        {"kind": "every", "id": "tick", "name": "tick", "scheduledAt": t, "firedAt": t}
        for t in (START_MS + 10_000, START_MS + 20_000, START_MS + 30_000)
    ]
    assert [call["args"] for call in await calls(rig)] == [[7], [7], [7]]
    job = await c.cron.get("tick")
    assert job is not None
    assert (job.next_run_at, job.last_run_at) == (START_MS + 40_000, START_MS + 30_000)


async def test_missed_fires_coalesce_and_stay_anchored(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="tick", interval=10, action="record")
    # The clock jumps 35 s: deadlines +10, +20, +30 were missed.
    await rig.advance(35)
    await eventually(lambda: has_calls(rig, 1), what="the coalesced fire")
    await rig.advance(0)
    (call,) = await calls(rig)
    assert call["fire"]["scheduledAt"] == START_MS + 10_000
    assert call["fire"]["firedAt"] == START_MS + 35_000
    job = await c.cron.get("tick")
    assert job is not None
    assert job.next_run_at == START_MS + 40_000  # anchored, not now + 10 s
    await rig.advance(5)
    await eventually(lambda: has_calls(rig, 2), what="the next regular fire")
    assert (await calls(rig))[1]["fire"]["scheduledAt"] == START_MS + 40_000


async def test_missed_fires_coalesce_across_a_restart(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.cron.every(name="tick", interval=10, action="record")
    actor_id = c.actor_id
    await rig.advance(10)
    await eventually(lambda: has_calls(rig, 1), what="the first fire")
    await rig.stop()
    rig.clock.advance(45)  # down at +10 .. +55: deadlines +20, +30, +40, +50 missed
    await rig.start()
    await eventually(lambda: len(rig.stored_state(actor_id)["calls"]) == 2, what="one fire")
    await rig.advance(0)
    fires = [call["fire"] for call in rig.stored_state(actor_id)["calls"]]
    assert len(fires) == 2
    assert (fires[1]["scheduledAt"], fires[1]["firedAt"]) == (START_MS + 20_000, START_MS + 55_000)
    job = await (await rig.ctx()).cron.get("tick")
    assert job is not None
    assert job.next_run_at == START_MS + 60_000
    history = await (await rig.ctx()).cron.history("tick")
    assert [(f.scheduled_at, f.result) for f in history] == [
        (START_MS + 20_000, "ok"),
        (START_MS + 10_000, "ok"),
    ]


async def test_cron_set_fires_on_the_expression_in_its_zone(rig: Rig) -> None:
    c = await rig.ctx()
    paris = ZoneInfo("Europe/Paris")
    info = await c.cron.set(
        name="nine", expression="0 9 * * 1-5", action="record", timezone="Europe/Paris"
    )
    # 2024-01-01 is a Monday; 09:00 in Paris is 08:00 UTC.
    first = ms(dt.datetime(2024, 1, 1, 9, 0, tzinfo=paris))
    assert (info.kind, info.expression, info.timezone, info.interval) == (
        "cron",
        "0 9 * * 1-5",
        "Europe/Paris",
        None,
    )
    assert info.next_run_at == first
    await rig.advance_to(first)
    await eventually(lambda: has_calls(rig, 1), what="the 09:00 fire")
    fire = (await calls(rig))[0]["fire"]
    assert fire == {
        "kind": "cron",
        "id": "nine",
        "name": "nine",
        "scheduledAt": first,
        "firedAt": first,
    }
    job = await c.cron.get("nine")
    assert job is not None
    assert job.next_run_at == ms(dt.datetime(2024, 1, 2, 9, 0, tzinfo=paris))
    # Missed for a week: one fire, then the next occurrence after now.
    await rig.advance_to(ms(dt.datetime(2024, 1, 9, 12, 0, tzinfo=paris)))
    await eventually(lambda: has_calls(rig, 2), what="the coalesced fire")
    await rig.advance(0)
    assert len(await calls(rig)) == 2
    assert (await calls(rig))[1]["fire"]["scheduledAt"] == job.next_run_at
    job = await c.cron.get("nine")
    assert job is not None
    assert job.next_run_at == ms(dt.datetime(2024, 1, 10, 9, 0, tzinfo=paris))


async def test_a_time_that_dst_skips_is_skipped(rig: Rig) -> None:
    new_york = ZoneInfo("America/New_York")
    # 2024-03-10 is spring-forward day: 02:00 EST jumps to 03:00 EDT, 02:30 never exists.
    await rig.advance_to(ms(dt.datetime(2024, 3, 9, 12, 0, tzinfo=new_york)))
    c = await rig.ctx()
    info = await c.cron.set(
        name="nightly", expression="30 2 * * *", action="record", timezone="America/New_York"
    )
    assert info.next_run_at == ms(dt.datetime(2024, 3, 11, 2, 30, tzinfo=new_york))
    await rig.advance_to(ms(dt.datetime(2024, 3, 10, 12, 0, tzinfo=new_york)))
    assert await calls(rig) == []
    await rig.advance_to(info.next_run_at)
    await eventually(lambda: has_calls(rig, 1), what="the fire of the 11th")
    job = await c.cron.get("nightly")
    assert job is not None
    assert job.next_run_at == ms(dt.datetime(2024, 3, 12, 2, 30, tzinfo=new_york))


async def test_a_repeated_wall_time_fires_once(rig: Rig) -> None:
    new_york = ZoneInfo("America/New_York")
    # 2024-11-03: 01:30 happens twice (EDT, then EST); the job fires at the first only.
    await rig.advance_to(ms(dt.datetime(2024, 11, 3, 0, 0, tzinfo=new_york)))
    c = await rig.ctx()
    info = await c.cron.set(
        name="early", expression="30 1 * * *", action="record", timezone="America/New_York"
    )
    assert info.next_run_at == ms(dt.datetime(2024, 11, 3, 1, 30, tzinfo=new_york, fold=0))
    await rig.advance_to(info.next_run_at)
    await eventually(lambda: has_calls(rig, 1), what="the first 01:30")
    job = await c.cron.get("early")
    assert job is not None
    assert job.next_run_at == ms(dt.datetime(2024, 11, 4, 1, 30, tzinfo=new_york))


async def test_upsert_keeps_the_next_run_when_the_cadence_is_unchanged(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="job", interval=60, action="record", max_history=5)
    await rig.advance(30)
    same = await c.cron.every(name="job", interval=60, action="record", args=["new"])
    assert same.next_run_at == START_MS + 60_000
    assert (same.args, same.max_history) == (["new"], 100)
    changed = await c.cron.every(name="job", interval=120, action="record")
    assert changed.next_run_at == START_MS + 30_000 + 120_000
    as_cron = await c.cron.set(name="job", expression="0 * * * *", action="record")
    assert as_cron.next_run_at == START_MS + 3_600_000
    await rig.advance(60)
    again = await c.cron.set(name="job", expression=" 0  * * * * ", action="record")
    assert again.next_run_at == START_MS + 3_600_000
    moved = await c.cron.set(
        name="job", expression="0 * * * *", action="record", timezone="Asia/Kolkata"
    )
    # Kolkata is UTC+05:30: its next full hour (06:00) is 00:30 UTC.
    assert moved.next_run_at == START_MS + 1_800_000
    assert [job.name for job in await c.cron.list()] == ["job"]


async def test_get_list_and_delete(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="b", interval=60, action="record")
    await c.cron.set(name="a", expression="0 * * * *", action="record", args=[1, 2])
    jobs = await c.cron.list()
    assert [job.name for job in jobs] == ["a", "b"]
    assert dict(jobs[0]) == {
        "name": "a",
        "kind": "cron",
        "action": "record",
        "args": [1, 2],
        "nextRunAt": START_MS + 3_600_000,
        "maxHistory": 100,
        "expression": "0 * * * *",
        "timezone": "UTC",
    }
    assert dict(jobs[1])["interval"] == 60_000
    assert await c.cron.get("missing") is None
    await rig.advance(60)
    await eventually(lambda: has_calls(rig, 1), what="a fire of b")
    assert len(await c.cron.history("b")) == 1
    assert await c.cron.delete("b") is True
    assert await c.cron.delete("b") is False
    assert await c.cron.get("b") is None
    assert await c.cron.history("b") == []
    await rig.advance(600)
    assert len(await calls(rig)) == 1
    # A job of the same name starts afresh.
    await c.cron.every(name="b", interval=60, action="record")
    assert await c.cron.history("b") == []


async def test_history_is_newest_first_limited_and_pruned(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="tick", interval=10, action="record", max_history=3)
    for n in range(1, 6):
        await rig.advance(10)
        await eventually(lambda n=n: has_calls(rig, n), what=f"fire {n}")
    await rig.advance(0)
    history = await c.cron.history("tick")
    assert all(isinstance(fire, CronFire) for fire in history)
    assert [fire.scheduled_at for fire in history] == [START_MS + k * 10_000 for k in (5, 4, 3)]
    assert all(fire.result == "ok" and fire.finished_at is not None for fire in history)
    assert dict(history[0]) == {
        "action": "record",
        "scheduledAt": START_MS + 50_000,
        "firedAt": START_MS + 50_000,
        "finishedAt": START_MS + 50_000,
        "result": "ok",
    }
    assert len(await c.cron.history("tick", limit=1)) == 1
    # Lowering max_history prunes now; 0 clears and stops recording.
    await c.cron.every(name="tick", interval=10, action="record", max_history=1)
    assert len(await c.cron.history("tick")) == 1
    await c.cron.every(name="tick", interval=10, action="record", max_history=0)
    assert await c.cron.history("tick") == []
    await rig.advance(10)
    await eventually(lambda: has_calls(rig, 6), what="fire 6")
    assert await c.cron.history("tick") == []


async def test_a_failure_is_recorded_and_not_retried(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="bad", interval=10, action="fail")
    await c.cron.every(name="buggy", interval=10, action="crash")
    await rig.advance(10)
    await eventually(lambda: c.state["failures"] == 1, what="the failure")
    await eventually(lambda: _finished(c, "buggy"), what="the crash to be recorded")
    await eventually(lambda: _finished(c, "bad"), what="the failure to be recorded")
    (failed,) = await c.cron.history("bad")
    assert failed.result == "error"
    assert failed.error == {"group": "user", "code": "boom", "message": "boom"}
    (crashed,) = await c.cron.history("buggy")
    assert crashed.error is not None
    assert (crashed.error["group"], crashed.error["code"]) == ("actor", "internal_error")
    await rig.advance(5)
    assert c.state["failures"] == 1  # not retried
    await rig.advance(5)
    await eventually(lambda: c.state["failures"] == 2, what="the next cadence")


async def _finished(c: Any, name: str) -> bool:
    history = await c.cron.history(name)
    return bool(history) and history[0].result != "running"


async def test_an_overlapping_fire_is_skipped(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="long", interval=10, action="slow")
    await rig.advance(10)
    await eventually(lambda: len(c.state["calls"]) == 1, what="the slow run to start")
    assert [f.result for f in await c.cron.history("long")] == ["running"]
    await rig.advance(10)
    await eventually(lambda: _results(c, ["skipped", "running"]), what="the skipped fire")
    from .app import GATES

    GATES["k"].set()
    await eventually(lambda: _results(c, ["skipped", "ok"]), what="the run to finish")
    skipped = (await c.cron.history("long"))[0]
    assert (skipped.scheduled_at, skipped.fired_at) == (START_MS + 20_000, START_MS + 20_000)
    job = await c.cron.get("long")
    assert job is not None
    assert job.next_run_at == START_MS + 30_000
    assert len(c.state["calls"]) == 1


async def _results(c: Any, expected: list[str]) -> bool:
    return [fire.result for fire in await c.cron.history("long")] == expected


async def test_an_interrupted_run_is_recorded_at_the_next_start(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.cron.every(name="long", interval=10, action="slow")
    await rig.advance(10)
    await eventually(lambda: len(c.state["calls"]) == 1, what="the slow run to start")
    # Stopping outlasts the grace period (0.2 s): the run is cancelled mid-way.
    await rig.stop()
    assert rig.rows("SELECT result FROM schedule_fires") == [("running",)]
    await rig.start()
    c = await rig.ctx()
    (fire,) = await c.cron.history("long")
    assert fire.result == "error"
    assert fire.error is not None
    assert (fire.error["group"], fire.error["code"]) == ("schedule", "interrupted")
    assert fire.finished_at == START_MS + 10_000
    assert rig.rows("SELECT running_seq FROM schedules") == [(None,)]


async def test_a_job_whose_action_is_gone_is_deleted(sqlite_rig: Rig) -> None:
    from .app import make_registry

    rig = sqlite_rig
    c = await rig.ctx()
    await c.cron.every(name="old", interval=10, action="record")
    await c.schedule.after(10, "record")
    await rig.advance(10)
    await eventually(lambda: has_calls(rig, 2), what="both fires")
    await c.schedule.after(10, "record")
    await rig.restart(make_registry(without=("record",)))
    await rig.advance(10)
    c = await rig.ctx()
    await eventually(lambda: rig.rows("SELECT COUNT(*) FROM schedules") == [(0,)], what="delete")
    assert await c.cron.get("old") is None
    assert await c.cron.history("old") == []
    assert await c.schedule.list() == []
    assert len(c.state["calls"]) == 2


async def test_fire_info_follows_the_configured_args(rig: Rig) -> None:
    c = await rig.ctx()
    await c.cron.every(name="two", interval=10, action="twoArgs", args=("a", {"b": [1]}))
    await rig.advance(10)
    await eventually(lambda: has_calls(rig, 1), what="the fire")
    call = (await calls(rig))[0]
    assert call["args"] == ["a", {"b": [1]}]
    assert call["fire"]["kind"] == "every"


async def test_jobs_and_history_survive_a_restart(sqlite_rig: Rig) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.cron.set(name="hourly", expression="0 * * * *", action="record", max_history=7)
    await c.cron.every(name="tick", interval=10, action="record")
    await rig.advance(10)
    await eventually(lambda: has_calls(rig, 1), what="a fire")
    before = [dict(job) for job in await c.cron.list()]
    await rig.restart()
    c = await rig.ctx()
    assert [dict(job) for job in await c.cron.list()] == before
    assert len(await c.cron.history("tick")) == 1


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"name": ""}, "invalid_name"),
        ({"name": "é" * 65}, "invalid_name"),  # 130 UTF-8 bytes
        ({"name": 5}, "invalid_name"),
        ({"interval": 0.5}, "invalid_interval"),
        ({"interval": -10}, "invalid_interval"),
        ({"interval": "10"}, "invalid_interval"),
        ({"max_history": -1}, "invalid_max_history"),
        ({"max_history": 1001}, "invalid_max_history"),
        ({"action": "nope"}, "action_not_found"),
        ({"args": [1]}, "invalid_arguments"),
        ({"args": "abc"}, "invalid_arguments"),
    ],
)
async def test_invalid_every_jobs_are_refused(rig: Rig, kwargs: dict[str, Any], code: str) -> None:
    c = await rig.ctx()
    options: dict[str, Any] = {"name": "j", "interval": 10, "action": "record"}
    options.update(kwargs)
    if code == "invalid_arguments" and kwargs.get("args") == [1]:
        options["action"] = "fail"
    with pytest.raises(ScheduleError) as caught:
        await c.cron.every(**options)
    assert caught.value.identifier == f"schedule.{code}"
    assert await c.cron.list() == []


@pytest.mark.parametrize(
    ("expression", "timezone", "code"),
    [
        ("* * * * * *", "UTC", "invalid_cron_expression"),
        ("* * * *", "UTC", "invalid_cron_expression"),
        ("61 * * * *", "UTC", "invalid_cron_expression"),
        ("@hourly", "UTC", "invalid_cron_expression"),
        ("0 0 30 2 *", "UTC", "invalid_cron_expression"),
        (None, "UTC", "invalid_cron_expression"),
        ("0 * * * *", "Mars/Olympus_Mons", "invalid_timezone"),
        ("0 * * * *", "../../etc/passwd", "invalid_timezone"),
        ("0 * * * *", "", "invalid_timezone"),
    ],
)
async def test_invalid_cron_jobs_are_refused(
    rig: Rig, expression: Any, timezone: str, code: str
) -> None:
    c = await rig.ctx()
    with pytest.raises(ScheduleError) as caught:
        await c.cron.set(name="j", expression=expression, action="record", timezone=timezone)
    assert caught.value.identifier == f"schedule.{code}"


async def test_the_default_minimum_interval_is_five_seconds(tmp_path: Any) -> None:
    from perdure import actor, setup

    from .app import record

    registry = setup(use={"ticker": actor(state={"calls": []}, actions={"record": record})})
    rig = Rig(tmp_path, registry, memory=True)
    await rig.start()
    try:
        c = await rig.ctx()
        with pytest.raises(ScheduleError) as short:
            await c.cron.every(name="j", interval=4.999, action="record")
        # The message names the option that sets the floor, and the figures ride along.
        assert "shorter than the actor option min_cron_interval (5 s" in short.value.message
        assert short.value.metadata == {"minimum_ms": 5000, "interval_ms": 4999}
        await c.cron.every(name="j", interval=5, action="record")
    finally:
        await rig.stop()


@pytest.mark.parametrize("limit", [0, 1001, -1, 2.5, True])
async def test_history_limit_must_be_1_to_1000(rig: Rig, limit: Any) -> None:
    c = await rig.ctx()
    with pytest.raises(ScheduleError) as caught:
        await c.cron.history("x", limit=limit)
    assert caught.value.identifier == "schedule.invalid_limit"
    assert await c.cron.history("x", limit=1000) == []


async def test_max_schedules_counts_one_shots_and_recurring_jobs(tmp_path: Any) -> None:
    from .app import make_registry

    rig = Rig(tmp_path, make_registry(max_schedules=3), memory=True)
    await rig.start()
    try:
        c = await rig.ctx()
        await c.cron.every(name="a", interval=10, action="record")
        await c.cron.set(name="b", expression="0 * * * *", action="record")
        await c.schedule.after(10, "record")
        for attempt in (
            c.schedule.after(10, "record"),
            c.cron.every(name="c", interval=10, action="record"),
        ):
            with pytest.raises(ScheduleError) as caught:
                await attempt
            assert caught.value.identifier == "schedule.max_schedules_exceeded"
        # Updating an existing job is not a new one.
        await c.cron.every(name="a", interval=20, action="record")
        assert await c.cron.delete("b")
        await c.cron.every(name="c", interval=10, action="record")
    finally:
        await rig.stop()


async def test_a_run_that_outlives_its_history_window_stays_pruned(rig: Rig) -> None:
    from .app import GATES

    c = await rig.ctx()
    await c.cron.every(name="long", interval=10, action="slow", max_history=1)
    await rig.advance(10)
    await eventually(lambda: len(c.state["calls"]) == 1, what="the slow run to start")
    await rig.advance(10)
    await eventually(lambda: _results(c, ["skipped"]), what="the skipped fire")
    GATES["k"].set()
    await eventually(lambda: not c.cron._manager._running, what="the run to end")  # type: ignore[attr-defined]
    # The finished run (seq 1) is older than the one fire kept: it is not written back.
    assert [f.result for f in await c.cron.history("long")] == ["skipped"]

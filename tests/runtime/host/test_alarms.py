"""The alarm scheduler wakes sleeping actors for their schedules, a little early."""

from __future__ import annotations

import asyncio
from pathlib import Path

from perdure.runtime.host.alarms import _BATCH, _MIN_STEP_MS, PREWAKE_MS
from tests.runtime.schedules.app import make_registry
from tests.support.schedule_rig import START_MS, Rig, eventually


async def test_an_actor_is_woken_shortly_before_its_alarm_and_only_once(
    sqlite_rig: Rig,
) -> None:
    rig = sqlite_rig
    c = await rig.ctx()
    await c.schedule.after(60, "record")
    actor_id = c.actor_id
    await rig.rt.sleep_actor(actor_id)
    await rig.advance_to(START_MS + 60_000 - PREWAKE_MS - _MIN_STEP_MS - 1)
    assert not rig.rt.is_live(actor_id)
    await rig.advance_to(START_MS + 60_000 - PREWAKE_MS)
    await eventually(lambda: rig.rt.is_live(actor_id), what="the early wake")
    assert rig.stored_state(actor_id)["calls"] == []  # awake, but not due yet
    # Back to sleep before its alarm: not woken early again …
    await rig.rt.sleep_actor(actor_id)
    await rig.advance(PREWAKE_MS / 2000)
    assert not rig.rt.is_live(actor_id)
    # … but woken when it is due, and the fire is on time.
    await rig.advance_to(START_MS + 60_000)
    await eventually(lambda: rig.stored_state(actor_id)["calls"], what="the fire")
    fire = rig.stored_state(actor_id)["calls"][0]["fire"]
    assert fire["scheduledAt"] == fire["firedAt"] == START_MS + 60_000


async def test_more_actors_due_at_once_than_one_read_returns(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_registry())
    await rig.start()
    try:
        count = _BATCH + 100
        handles = [rig.handle(key=f"k{i}") for i in range(count)]
        actor_ids = await asyncio.gather(*(h.resolve() for h in handles))
        for actor_id in actor_ids:
            instance = await rig.rt.instance(actor_id)
            await instance.context.schedule.after(10, "record")
        await asyncio.gather(*(rig.rt.sleep_actor(a) for a in actor_ids))
        assert rig.rt.live_count == 0
        await rig.advance(10)

        def fired() -> int:
            (row,) = rig.rows("SELECT COUNT(*) FROM schedules")
            return count - int(row[0])

        await eventually(lambda: fired() == count, what=f"{count} fires")
    finally:
        await rig.stop()


async def test_a_claim_released_by_a_stop_fires_later_and_only_once(sqlite_rig: Rig) -> None:
    """A stop that begins while claims commit: the actions cannot run now, so the claims
    are undone (white-box: the race itself is too narrow to hit on purpose)."""
    rig = sqlite_rig
    instance = await rig.instance()
    c = instance.context
    await c.schedule.after(10, "record", "once")
    await c.cron.every(name="j", interval=10, action="record", args=["every"])
    manager = instance.schedules
    before = dict(manager.jobs)
    now = START_MS + 10_000
    runs = [manager._claim(job, now) for job in list(manager.jobs.values())]
    assert all(run is not None for run in runs)
    for run in runs:
        assert run is not None
        manager._release(run)
    assert manager.jobs == before
    await rig.advance(10)  # now they fire, once each
    await eventually(lambda: len(c.state["calls"]) == 2, what="both fires")
    await rig.advance(0)
    assert sorted(call["args"][0] for call in c.state["calls"]) == ["every", "once"]
    (fire,) = await c.cron.history("j")
    assert (fire.result, fire.scheduled_at) == ("ok", START_MS + 10_000)

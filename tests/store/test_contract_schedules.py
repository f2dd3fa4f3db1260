"""The store contract for schedules and their fire history, run against every backend.

Kept beside ``test_contract.py`` (same ``store`` fixture, so every backend listed in
``conftest.BACKENDS`` runs it) to keep each file short.
"""

from __future__ import annotations

from typing import Any

import pytest

from perdure.errors import ActorNotFound
from perdure.store import ActorCommit, ScheduleFireRecord, ScheduleRecord, Store

from .test_contract import NOW, record

BIG = 2**62  # epoch-ms columns hold 64-bit values in every backend


def one_shot(schedule_id: str, run_at: int = NOW, **fields: Any) -> ScheduleRecord:
    fields.setdefault("created_at", NOW - 1)
    fields.setdefault("args", b"\x80")
    return ScheduleRecord(id=schedule_id, kind="at", action="ping", run_at=run_at, **fields)


def recurring(name: str, **fields: Any) -> ScheduleRecord:
    fields.setdefault("run_at", NOW + 60_000)
    fields.setdefault("created_at", NOW)
    return ScheduleRecord(
        id=f"cron:{name}",
        kind="every",
        action="tick",
        args=b"\x81\x01",
        name=name,
        interval_ms=60_000,
        max_history=10,
        **fields,
    )


def fire(name: str, seq: int, result: str = "ok", **fields: Any) -> ScheduleFireRecord:
    fields.setdefault("finished_at", NOW + seq * 10 + 5 if result != "running" else None)
    return ScheduleFireRecord(
        name=name,
        seq=seq,
        action="tick",
        scheduled_at=NOW + seq * 10,
        fired_at=NOW + seq * 10 + 1,
        result=result,
        **fields,
    )


async def test_schedules_round_trip_every_field(store: Store) -> None:
    await store.create_actor(record("a1"))
    cron = ScheduleRecord(
        id="cron:daily",
        kind="cron",
        action="report",
        args=b"\x82\x01\x02",
        run_at=BIG,
        created_at=NOW,
        name="daily",
        expression="30 2 * * *",
        timezone="America/New_York",
        max_history=1000,
        last_run_at=BIG - 1,
        fire_seq=BIG - 2,
        running_seq=BIG - 3,
    )
    shots = [one_shot("b-uuid"), one_shot("a-uuid", run_at=NOW + 5)]
    await store.commit(
        ActorCommit("a1", schedule_put={s.id: s for s in [*shots, cron, recurring("tick")]})
    )
    loaded = await store.load_schedules("a1")
    assert [s.id for s in loaded] == ["a-uuid", "b-uuid", "cron:daily", "cron:tick"]
    assert loaded[2] == cron
    assert loaded[0] == shots[1]
    assert loaded[3] == recurring("tick")


async def test_schedule_put_replaces_and_delete_removes(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", schedule_put={"x": one_shot("x"), "y": one_shot("y")}))
    moved = one_shot("x", run_at=NOW + 99, args=b"\x81\x01")
    await store.commit(ActorCommit("a1", schedule_put={"x": moved}, schedule_delete=["y", "zz"]))
    assert await store.load_schedules("a1") == [moved]


async def test_schedule_delete_applies_before_put(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", schedule_put={"cron:j": recurring("j")}))
    again = recurring("j", run_at=NOW + 1)
    await store.commit(
        ActorCommit(
            "a1",
            schedule_delete=["cron:j"],
            schedule_put={"cron:j": again},
            fire_prune=[("j", BIG)],
            fire_put=[fire("j", 1)],
        )
    )
    assert await store.load_schedules("a1") == [again]
    assert await store.load_fire_history("a1", "j", 10) == [fire("j", 1)]


async def test_schedules_are_per_actor(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2"))
    await store.commit(ActorCommit("a1", schedule_put={"x": one_shot("x")}))
    await store.commit(ActorCommit("a2", schedule_put={"x": one_shot("x", run_at=NOW + 1)}))
    assert await store.load_schedules("a1") == [one_shot("x")]
    assert await store.load_schedules("a2") == [one_shot("x", run_at=NOW + 1)]
    assert await store.load_schedules("nobody") == []


async def test_fire_history_newest_first_with_limit(store: Store) -> None:
    await store.create_actor(record("a1"))
    fires = [fire("j", seq) for seq in range(1, 6)]
    await store.commit(ActorCommit("a1", fire_put=[*fires, fire("other", 1)]))
    assert await store.load_fire_history("a1", "j", 3) == fires[::-1][:3]
    assert await store.load_fire_history("a1", "j", 100) == fires[::-1]
    assert await store.load_fire_history("a1", "j", 0) == []
    assert await store.load_fire_history("a1", "j", -1) == []
    assert await store.load_fire_history("a1", "missing", 5) == []
    assert await store.load_fire_history("a1", "other", 5) == [fire("other", 1)]


async def test_fire_put_replaces_in_list_order(store: Store) -> None:
    await store.create_actor(record("a1"))
    running = fire("j", 1, "running")
    await store.commit(ActorCommit("a1", fire_put=[running]))
    assert await store.load_fire_history("a1", "j", 5) == [running]
    failed = fire("j", 1, "error", error=b"\xa1aa\x01")
    await store.commit(ActorCommit("a1", fire_put=[fire("j", 1, "ok"), failed]))
    assert await store.load_fire_history("a1", "j", 5) == [failed]


async def test_fire_prune_removes_up_to_a_seq_of_one_job(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.create_actor(record("a2"))
    await store.commit(
        ActorCommit("a1", fire_put=[fire("j", s) for s in range(1, 6)] + [fire("k", 1)])
    )
    await store.commit(ActorCommit("a2", fire_put=[fire("j", 1)]))
    # Prunes apply before puts: seq 6 survives a prune up to 3 in the same commit.
    await store.commit(ActorCommit("a1", fire_prune=[("j", 3)], fire_put=[fire("j", 6)]))
    assert [f.seq for f in await store.load_fire_history("a1", "j", 10)] == [6, 5, 4]
    assert await store.load_fire_history("a1", "k", 10) == [fire("k", 1)]
    assert await store.load_fire_history("a2", "j", 10) == [fire("j", 1)]
    await store.commit(ActorCommit("a1", fire_prune=[("j", BIG), ("nothing", 5)]))
    assert await store.load_fire_history("a1", "j", 10) == []


async def test_schedule_fields_make_a_commit_non_empty(store: Store) -> None:
    assert not ActorCommit("a1", schedule_put={"x": one_shot("x")}).is_empty()
    assert not ActorCommit("a1", schedule_delete=["x"]).is_empty()
    assert not ActorCommit("a1", fire_put=[fire("j", 1)]).is_empty()
    assert not ActorCommit("a1", fire_prune=[("j", 1)]).is_empty()


async def test_schedule_commit_to_missing_actor_writes_nothing(store: Store) -> None:
    with pytest.raises(ActorNotFound):
        await store.commit(
            ActorCommit("ghost", schedule_put={"x": one_shot("x")}, fire_put=[fire("j", 1)])
        )
    assert await store.load_schedules("ghost") == []
    assert await store.load_fire_history("ghost", "j", 5) == []


async def test_schedules_commit_atomically_with_state(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(
        ActorCommit(
            "a1",
            state=b"s1",
            set_wake_at=True,
            wake_at=NOW,
            schedule_put={"x": one_shot("x")},
            fire_put=[fire("j", 1)],
        )
    )
    got = await store.get_actor("a1")
    assert got is not None
    assert (got.state, got.wake_at) == (b"s1", NOW)
    assert await store.load_schedules("a1") == [one_shot("x")]


async def test_delete_actor_removes_schedules_and_history(store: Store) -> None:
    await store.create_actor(record("a1", key=("k",)))
    await store.create_actor(record("a2"))
    for actor_id in ("a1", "a2"):
        await store.commit(
            ActorCommit(actor_id, schedule_put={"x": one_shot("x")}, fire_put=[fire("j", 1)])
        )
    assert await store.delete_actor("a1") is True
    assert await store.load_schedules("a1") == []
    assert await store.load_fire_history("a1", "j", 5) == []
    assert await store.load_schedules("a2") == [one_shot("x")]
    # A new actor with the same id starts without schedules.
    await store.create_actor(record("a1", key=("k",)))
    assert await store.load_schedules("a1") == []
    assert await store.load_fire_history("a1", "j", 5) == []


async def test_returned_schedule_data_is_a_copy(store: Store) -> None:
    await store.create_actor(record("a1"))
    args = bytearray(b"\x80")
    commit = ActorCommit("a1", schedule_put={"x": one_shot("x", args=args)})  # type: ignore[arg-type]
    await store.commit(commit)
    args[0] = 0
    commit.schedule_put.clear()
    loaded = await store.load_schedules("a1")
    assert loaded == [one_shot("x")]
    assert type(loaded[0].args) is bytes
    loaded.clear()
    assert await store.load_schedules("a1") == [one_shot("x")]

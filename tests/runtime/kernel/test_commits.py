"""The commit pipeline by itself: staging, one commit per tick, fences and the poison path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.errors import ActorAborted, ActorNotFound, StateNotSerializable
from perdure.runtime.kernel.commits import CommitPipeline
from perdure.store.base import ActorCommit, QueueMessageRecord, ScheduleFireRecord, ScheduleRecord
from perdure.store.encoding import encode_value
from perdure.store.kv import DB_PAGE_TAG
from perdure.telemetry import Observers


class Sink:
    """Records the commits submitted; each gets a future the test settles."""

    def __init__(self, *, settle: bool = True) -> None:
        self.commits: list[ActorCommit] = []
        self.futures: list[asyncio.Future[None]] = []
        self.settle = settle
        self.refuse: Exception | None = None

    def submit(self, commit: ActorCommit) -> asyncio.Future[None]:
        if self.refuse is not None:
            raise self.refuse
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.settle:
            future.set_result(None)
        self.commits.append(commit)
        self.futures.append(future)
        return future


class Actor:
    """The owner's side: a state to encode, and what the pipeline tells it."""

    def __init__(self) -> None:
        self.state: Any = {"n": 0}
        self.label = "thing/a1"
        self.actor_id, self.name, self.key = "a1", "thing", ("k",)
        self.observer = Observers()
        self.written = 0
        self.failures: list[BaseException] = []

    def encode(self) -> bytes:
        return encode_value(self.state)

    def pipeline(
        self, sink: Sink, *, fence: int | None = 3, state_warning: int = 0
    ) -> CommitPipeline:
        return CommitPipeline(
            sink,
            "a1",
            self,
            last_state=self.encode(),
            fence=fence,
            state_written=self._written,
            on_failure=self.failures.append,
            state_warning=state_warning,
        )

    def _written(self) -> None:
        self.written += 1


def _message(message_id: int) -> QueueMessageRecord:
    return QueueMessageRecord(message_id, "jobs", b"body", 0)


def _schedule(schedule_id: str) -> ScheduleRecord:
    return ScheduleRecord(schedule_id, "at", "tick", b"", 10, 0)


def _fire(seq: int) -> ScheduleFireRecord:
    return ScheduleFireRecord("job", seq, "tick", 0, 0, "ok")


async def test_flushes_of_one_tick_share_one_commit_with_the_changed_state() -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink)
    actor.state["n"] = 1
    first = pipeline.request_flush()
    pipeline.put_message(_message(1), 2)
    second = pipeline.request_flush()
    assert first is second
    await asyncio.gather(first, second)
    [commit] = sink.commits
    assert commit.fence == 3
    assert commit.state == actor.encode()
    assert commit.queue_put == [_message(1)]
    assert commit.queue_next_id == 2
    assert actor.written == 1


async def test_nothing_new_submits_nothing_but_waits_for_the_commit_in_flight() -> None:
    actor, sink = Actor(), Sink(settle=False)
    pipeline = actor.pipeline(sink)
    await pipeline.request_flush()  # unchanged state, nothing staged: resolves at once
    assert sink.commits == []
    actor.state["n"] = 1
    in_flight = pipeline.flush_now()
    reader = pipeline.request_flush()  # a read-only action after the write
    await asyncio.sleep(0)
    assert len(sink.commits) == 1
    assert not reader.done(), "a reader must wait for the state it may have read"
    sink.futures[0].set_result(None)
    await asyncio.gather(in_flight, reader)
    assert actor.written == 1


async def test_flush_now_returns_the_stores_own_future() -> None:
    actor, sink = Actor(), Sink(settle=False)
    pipeline = actor.pipeline(sink)
    pipeline.write_history({"step": b"entry"}, ())
    assert pipeline.flush_now() is sink.futures[0]


async def test_staged_writes_cancel_or_replace_each_other_before_the_commit() -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink)
    pipeline.put_message(_message(1), 2)
    pipeline.delete_message(1)  # sent and consumed before its commit: no row at all
    pipeline.delete_message(7)
    pipeline.write_history({"a": b"1", "b": b"2"}, ())
    pipeline.write_history({}, ["b", "c"])
    pipeline.delete_schedule("s1")
    pipeline.put_schedule(_schedule("s1"))  # re-created after a delete: kept
    pipeline.put_schedule(_schedule("s2"))
    pipeline.delete_schedule("s2")
    pipeline.put_fire(_fire(1))
    pipeline.put_fire(_fire(5))
    pipeline.prune_fires("job", 3)  # the store prunes before it puts: drop covered puts
    pipeline.set_wake_at(None)
    await pipeline.flush_now()
    [commit] = sink.commits
    assert commit.queue_put == []
    assert commit.queue_delete == [7]
    assert commit.history_put == {"a": b"1"}
    assert commit.history_delete == ["b", "c"]
    assert commit.schedule_put == {"s1": _schedule("s1")}
    assert commit.schedule_delete == ["s2"]
    assert commit.fire_put == [_fire(5)]
    assert commit.fire_prune == [("job", 3)]
    assert commit.set_wake_at
    assert commit.wake_at is None


async def test_a_created_actor_stores_its_generation_unfenced_then_fences() -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink, fence=None)
    pipeline.mark_initialized()
    pipeline.store_generation(1)
    await pipeline.flush_now()
    pipeline.set_wake_at(5)
    await pipeline.flush_now()
    start, later = sink.commits
    assert (start.fence, start.generation, start.initialized) == (None, 1, True)
    assert (later.fence, later.generation) == (1, None)


async def test_a_state_that_cannot_be_encoded_fails_every_waiter_and_poisons_once() -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink)
    pipeline.write_history({"probe": b"entry"}, ())
    actor.state = object()
    waiters = [pipeline.request_flush(), pipeline.request_flush()]
    for outcome in await asyncio.gather(*waiters, return_exceptions=True):
        assert isinstance(outcome, StateNotSerializable)
        assert "thing/a1" in str(outcome)
    with pytest.raises(StateNotSerializable):
        await pipeline.flush_now()
    assert sink.commits == []
    assert len(actor.failures) == 1
    actor.state = {"n": 0}
    await pipeline.flush_now()  # the refused commit's other writes were kept, not lost
    assert sink.commits[0].history_put == {"probe": b"entry"}


async def test_a_failed_commit_fails_its_waiters_and_poisons_once() -> None:
    actor, sink = Actor(), Sink(settle=False)
    pipeline = actor.pipeline(sink)
    actor.state["n"] = 1
    waiter = pipeline.request_flush()
    await asyncio.sleep(0)
    sink.futures[0].set_exception(ActorNotFound())
    with pytest.raises(ActorNotFound):
        await waiter
    sink.refuse = RuntimeError("store closed")
    actor.state["n"] = 2
    with pytest.raises(RuntimeError):
        await pipeline.flush_now()
    assert [type(error) for error in actor.failures] == [ActorNotFound]


async def test_a_closed_pipeline_refuses_late_flushes() -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink)
    actor.state["n"] = 1
    late = pipeline.request_flush()
    pipeline.close()
    with pytest.raises(ActorAborted):
        await late
    with pytest.raises(ActorAborted):
        await pipeline.flush_now()
    assert sink.commits == []


async def test_the_database_pages_do_not_count_as_the_users_kv_writes() -> None:
    # c.kv bounds what one commit carries (kv.too_many_writes) by kv_writes(): the pages
    # c.db stages beside them must not use that room.
    pipeline = Actor().pipeline(Sink())
    pipeline.put_kv(b"sa", b"1")
    for number in range(5):
        pipeline.put_page(DB_PAGE_TAG + number.to_bytes(4, "big"), b"page")
    pipeline.put_page(DB_PAGE_TAG + (0).to_bytes(4, "big"), b"again")  # the same page
    assert pipeline.kv_writes() == 1
    pipeline.delete_pages(DB_PAGE_TAG + (3).to_bytes(4, "big"), b"\xff")
    pipeline.delete_kv(b"sb")
    assert pipeline.kv_writes() == 2
    await pipeline.flush_now()
    assert pipeline.kv_writes() == 0
    pipeline.put_kv(b"sc", b"1")
    assert pipeline.kv_writes() == 1


async def test_a_state_past_the_warning_size_is_told_once_per_awake_actor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    actor, sink = Actor(), Sink()
    pipeline = actor.pipeline(sink, state_warning=1000)
    actor.state["pad"] = "x" * 900  # under the size: nothing said
    await pipeline.request_flush()
    assert not [r for r in caplog.records if "state_size_warning" in r.getMessage()]
    actor.state["pad"] = "x" * 2000
    await pipeline.request_flush()
    actor.state["n"] = 2
    await pipeline.request_flush()
    warnings = [r for r in caplog.records if "state_size_warning" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].levelname == "WARNING"
    assert "thing/a1" in warnings[0].getMessage()
    assert "c.kv" in warnings[0].getMessage()
    assert len(sink.commits) == 3  # the warning changes nothing that is written

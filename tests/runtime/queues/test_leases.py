"""Leases on the test kit's manual clock (the timing logic, without a server).

A completable message received outside a workflow is hidden for its visibility timeout
and redelivered after it with one more attempt; ``nack(delay)`` brings it back after the
delay and not before; ``max_attempts`` makes it a dead letter, which an operator
requeues (attempts reset, deliverable and completable again) or drops; a sleeping actor
is woken when a lease runs out; a workflow never takes a message leased elsewhere; a
message of a queue the code no longer declares gets the default lease.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from perdure import ActionContext, actor, queue, setup
from perdure.errors import ArgumentError, DeadLetterNotFound, MessageNotDead, PerdureError
from perdure.queue_message import DEFAULT_VISIBILITY_TIMEOUT
from perdure.runtime.actor.operations import Administer
from perdure.store import SQLiteStore
from perdure.testing import ActorTestEnv
from tests.support.apps.leases import LEASE, MAX_ATTEMPTS, registry

from .misuse_app import registry as misuse_registry

START = datetime(2026, 1, 1, tzinfo=UTC)
JUST_BEFORE = LEASE - 0.05


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def _rows(env: ActorTestEnv, actor_id: str) -> list[tuple[int, int, bool, str | None]]:
    """(id, attempts, dead, error) of every stored message of the actor."""
    return [
        (m.id, m.attempts, m.dead_at is not None, m.error)
        for m in await env.store.load_queue(actor_id)
    ]


async def test_a_lease_hides_the_message_until_it_runs_out(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", {"n": 1})
    first = await worker.take()
    assert first == {"id": 1, "body": {"n": 1}, "attempts": 1}
    assert await worker.take() is None  # leased: nobody else gets it
    assert await worker.size() == 1
    await env.advance(JUST_BEFORE)
    assert await worker.take() is None
    await env.advance(0.1)
    assert await worker.take() == {"id": 1, "body": {"n": 1}, "attempts": 2}
    await worker.complete(1)
    assert await worker.size() == 0
    assert await env.store.load_queue(await worker.resolve()) == []


async def test_nack_gives_it_back_after_its_delay(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", "a")
    await worker.take()
    await worker.nack(1, 0.5, "busy")
    assert await worker.take() is None
    await env.advance(0.45)
    assert await worker.take() is None
    await env.advance(0.1)
    assert await worker.take() == {"id": 1, "body": "a", "attempts": 2}
    assert await _rows(env, await worker.resolve()) == [(1, 2, False, "busy")]
    await worker.nack(1)  # no delay: back at once
    assert await worker.take() == {"id": 1, "body": "a", "attempts": 3}


async def test_max_attempts_makes_a_dead_letter(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    actor_id = await worker.resolve()
    await worker.send("jobs", "doomed")
    await worker.send("jobs", "fine")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert await worker.take() == {"id": 1, "body": "doomed", "attempts": attempt}
        await worker.nack(1, 0, f"failure {attempt}") if attempt < MAX_ATTEMPTS else None
        await env.advance(LEASE + 0.1)
    # The third lease ran out: the next receive passes it over to the dead letters.
    assert await worker.take() == {"id": 2, "body": "fine", "attempts": 1}
    rows = await _rows(env, actor_id)
    assert rows[0][:3] == (1, MAX_ATTEMPTS, True)
    assert (
        rows[0][3] == "delivered 3 times without completion (max_attempts 3); last error: failure 2"
    )
    assert await worker.size() == 1  # dead letters are not in the live queue


async def test_a_nack_past_max_attempts_is_a_dead_letter_at_once(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    actor_id = await worker.resolve()
    await worker.send("jobs", "x")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert (await worker.take())["attempts"] == attempt
        await worker.nack(1, 0, "bad input")
    assert await _rows(env, actor_id) == [
        (1, 3, True, "delivered 3 times without completion (max_attempts 3); last error: bad input")
    ]
    assert await worker.take() is None


async def test_requeue_and_drop_dead_letters(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    actor_id = await worker.resolve()
    for body in ("one", "two"):
        await worker.send("jobs", body)
    for _ in range(MAX_ATTEMPTS):
        assert [(await worker.take())["id"] for _ in range(2)] == [1, 2]
        for message_id in (1, 2):
            await worker.nack(message_id)
    assert [row[2] for row in await _rows(env, actor_id)] == [True, True]
    ref = env.runtime.dispatch.ref(actor_id)
    requeued = await ref.administer(Administer("requeue", "1"))
    assert requeued == {"id": 1, "queue": "jobs", "attempts": 0}
    assert await _rows(env, actor_id) == [(1, 0, False, None), (2, 3, True, _reason(3))]
    assert await worker.take() == {"id": 1, "body": "one", "attempts": 1}
    await worker.complete(1)
    await ref.administer(Administer("drop", "2"))
    assert await env.store.load_queue(actor_id) == []
    with pytest.raises(DeadLetterNotFound) as missing:
        await ref.administer(Administer("drop", "2"))
    assert missing.value.identifier == "actor.dead_letter_not_found"
    await worker.send("jobs", "live")
    with pytest.raises(MessageNotDead) as live:
        await ref.administer(Administer("requeue", "3"))
    assert live.value.identifier == "actor.message_not_dead"


async def test_a_requeued_dead_letter_goes_back_to_its_place(env: ActorTestEnv) -> None:
    """Receives take messages in id order: a dead letter requeued after newer messages
    came in is delivered before them (the live queue is walked in order, not sorted
    at each receive)."""
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", "old")
    for _ in range(MAX_ATTEMPTS):
        assert (await worker.take())["id"] == 1
        await worker.nack(1)
    for body in ("newer", "newest"):
        await worker.send("jobs", body)
    ref = env.runtime.dispatch.ref(await worker.resolve())
    await ref.administer(Administer("requeue", "1"))
    taken = [await worker.take() for _ in range(3)]
    assert [(m["id"], m["body"]) for m in taken] == [(1, "old"), (2, "newer"), (3, "newest")]


def _reason(attempts: int) -> str:
    return f"delivered {attempts} times without completion (max_attempts {MAX_ATTEMPTS})"


async def test_a_sleeping_actor_wakes_when_a_lease_runs_out(env: ActorTestEnv) -> None:
    looper = env.client.looper.get_or_create("l")
    await looper.send("jobs", "again and again")
    await env.settle()
    assert await looper.deliveries() == [[1, 1]]
    actor_id = await looper.resolve()
    # Past its sleep_timeout (1 s), before its alarm (the lease's end, 2 s, less the
    # scheduler's half-second head start).
    await env.advance(1.2)
    assert not env.runtime.is_live(actor_id)
    await env.advance(LEASE - 1.2 + 0.05)  # its alarm woke it; its run loop took it again
    assert env.runtime.is_live(actor_id)
    assert (await looper.deliveries())[:2] == [[1, 1], [1, 2]]


async def test_a_workflow_skips_a_message_leased_elsewhere(env: ActorTestEnv) -> None:
    pipeline = env.client.pipeline.get_or_create("p")
    assert await pipeline.total() == [0, 0]
    # An action leases the message before the workflow sees it (both in one tick).
    await pipeline.send("jobs", {"value": 5})
    await env.settle()
    assert await pipeline.total() == [5, 1]  # the workflow took the first one
    worker_lease = await _lease_before_workflow(env, pipeline)
    assert worker_lease["attempts"] == 1
    assert await pipeline.total() == [5, 1]
    await env.advance(LEASE + 0.1)  # the lease runs out: now the workflow takes it
    assert await pipeline.total() == [12, 2]
    assert await pipeline.size() == 0


async def _lease_before_workflow(env: ActorTestEnv, pipeline: object) -> dict[str, object]:
    actor_id = await pipeline.resolve()  # type: ignore[attr-defined]
    instance = env.runtime.live_instance(actor_id)
    assert instance is not None
    assert instance.queue is not None
    instance.queue.enqueue("jobs", {"value": 7})
    taken = await pipeline.take()  # type: ignore[attr-defined]
    await env.settle()
    return dict(taken)


async def test_bad_lease_arguments(env: ActorTestEnv) -> None:
    with pytest.raises(ArgumentError) as zero:
        queue(max_attempts=0)
    assert zero.value.code == "invalid_max_attempts"
    with pytest.raises(ArgumentError) as negative:
        queue(visibility_timeout=-1)
    assert negative.value.code == "invalid_duration"
    with pytest.raises(TypeError, match="max_attempts"):
        queue(maxAttempts=3)  # type: ignore[call-arg]
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", 1)
    await worker.take()
    with pytest.raises(PerdureError) as bad_delay:
        await worker.nack(1, -1)
    assert bad_delay.value.identifier == "user.invalid_duration" or (
        bad_delay.value.code == "invalid_duration"
    )


async def test_misuse_of_leases_has_codes() -> None:
    async with ActorTestEnv(misuse_registry, start=START) as env:
        misuse = env.client.misuse.get_or_create("m")
        await misuse.send("jobs", "a")
        assert await misuse.attempt("options_without_completable") == "lease_needs_completable"
        assert await misuse.attempt("nack_unleased") == "not_leased"  # took "a" for good
        await misuse.send("jobs", "b")
        assert await misuse.attempt("nack_twice") == "already_completed"
        assert await misuse.attempt("keep") is None  # "b", its second delivery
        await env.advance(LEASE + 0.1)
        assert await misuse.attempt("lease_lost") == "lease_lost"


async def _take_any(c: ActionContext) -> list[Any]:
    message = await c.queue.next(timeout=0, completable=True)
    return [] if message is None else [message.name, message.attempts]


async def test_a_message_of_a_queue_no_longer_declared_gets_the_default_lease(
    tmp_path: Path,
) -> None:
    before = setup(use={"box": actor(state={}, queues={"jobs": queue(), "old": queue()})})
    taker = actor(state={}, queues={"jobs": queue()}, actions={"take": _take_any})
    after = setup(use={"box": taker})
    async with ActorTestEnv(before, store=SQLiteStore(tmp_path / "db"), start=START) as env:
        await env.client.box.get_or_create("b").send("old", "left over")
    async with ActorTestEnv(after, store=SQLiteStore(tmp_path / "db"), start=START) as env:
        box = env.client.box.get_or_create("b")
        assert await box.take() == ["old", 1]
        await env.advance(DEFAULT_VISIBILITY_TIMEOUT - 1)
        assert await box.take() == []
        await env.advance(1.1)
        assert await box.take() == ["old", 2]

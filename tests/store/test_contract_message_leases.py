"""Message leases and dead letters in the store contract, on every backend (migration 7).

A queue message's lease state (``attempts``, ``visible_at``) and dead-letter state
(``dead_at``, ``error``) are written by putting the record again and read back with it,
through single commits and commits written together (one statement on PostgreSQL).
``ActorCommit.update_message`` keeps one put per message, so a delete in the same commit
still removes it. Messages stored before migration 7 read back with no lease, and keep a
lease once reopened.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from perdure.store import ActorCommit, QueueMessageRecord, Store
from tests.store.sqlite.test_store import _database_of_schema, opened

from .test_contract import TIMEOUT, message, record


def leased(message_id: int, attempts: int, visible_at: int | None) -> QueueMessageRecord:
    return dataclasses.replace(message(message_id), attempts=attempts, visible_at=visible_at)


def dead(message_id: int, at: int, error: str) -> QueueMessageRecord:
    return dataclasses.replace(message(message_id), attempts=3, dead_at=at, error=error)


async def test_a_lease_is_written_and_read_back(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", queue_put=[message(1), message(2)]))
    assert [
        (m.attempts, m.visible_at, m.dead_at, m.error) for m in await store.load_queue("a1")
    ] == [
        (0, None, None, None),
        (0, None, None, None),
    ]
    # A lease: the row is put again with its new attempts and visibility, body unchanged.
    await store.commit(ActorCommit("a1", queue_put=[leased(1, 1, 5_000)]))
    assert await store.load_queue("a1") == [leased(1, 1, 5_000), message(2)]
    # Given back with an error, then dead.
    back = dataclasses.replace(leased(1, 2, None), error="boom")
    await store.commit(ActorCommit("a1", queue_put=[back]))
    assert await store.load_queue("a1") == [back, message(2)]
    await store.commit(ActorCommit("a1", queue_put=[dead(1, 7_000, "max_attempts")]))
    assert await store.load_queue("a1") == [dead(1, 7_000, "max_attempts"), message(2)]
    # A dead letter is dropped like any message.
    await store.commit(ActorCommit("a1", queue_delete=[1]))
    assert await store.load_queue("a1") == [message(2)]


async def test_update_message_keeps_one_put_per_message(store: Store) -> None:
    await store.create_actor(record("a1"))
    commit = ActorCommit("a1", queue_next_id=3, queue_put=[message(1), message(2)])
    commit.update_message(leased(2, 1, 9_000))
    commit.update_message(leased(2, 2, 10_000))
    commit.update_message(leased(1, 1, 9_000))
    assert [m.id for m in commit.queue_put] == [1, 2]
    commit.delete_message(1)  # sent, leased and consumed before the commit went out
    await store.commit(commit)
    assert await store.load_queue("a1") == [leased(2, 2, 10_000)]
    # An update of a message put by an earlier commit is one more put.
    later = ActorCommit("a1")
    later.update_message(dead(2, 11_000, "gave up"))
    assert later.queue_put == [dead(2, 11_000, "gave up")]
    await store.commit(later)
    assert await store.load_queue("a1") == [dead(2, 11_000, "gave up")]


async def test_leases_of_commits_written_together(store: Store) -> None:
    # Commits of distinct actors that set their state, submitted together: the shape a
    # grouping backend writes as one statement.
    ids = [f"a{index}" for index in range(4)]
    for actor_id in ids:
        await store.create_actor(record(actor_id))
        await store.commit(ActorCommit(actor_id, queue_put=[message(1), message(2)]))
    commits = [
        ActorCommit(
            actor_id,
            state=b"s",
            queue_put=[leased(1, index + 1, 1_000 * index), dead(2, 50 + index, f"e{index}")],
        )
        for index, actor_id in enumerate(ids)
    ]
    await asyncio.wait_for(asyncio.gather(*(store.commit(c) for c in commits)), TIMEOUT)
    for index, actor_id in enumerate(ids):
        expected = [leased(1, index + 1, 1_000 * index), dead(2, 50 + index, f"e{index}")]
        assert await store.load_queue(actor_id) == expected


async def test_messages_of_a_schema_6_database_have_no_lease(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    rows = ", ".join(f"('a1', {n}, 'jobs', x'62', {n}, NULL)" for n in (1, 2))
    actor = "INSERT INTO actors (actor_id, name, key, created_at) VALUES ('a1', 'c', 'a1', 1)"
    _database_of_schema(path, 6, actor, f"INSERT INTO queue_messages VALUES {rows}")
    async with opened(path) as store:
        old = await store.load_queue("a1")
        assert old == [QueueMessageRecord(n, "jobs", b"b", n) for n in (1, 2)]
        # Migration 7 added the columns: the first lease of an old message is a put.
        first = dataclasses.replace(old[0], attempts=1, visible_at=5)
        await store.commit(ActorCommit("a1", queue_put=[first]))
        assert await store.load_queue("a1") == [first, old[1]]
    async with opened(path) as store:  # and it is there after a restart
        assert await store.load_queue("a1") == [first, old[1]]

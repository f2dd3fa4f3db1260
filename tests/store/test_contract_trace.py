"""The trace context of queue messages, in the store contract, on every backend: a
message's ``trace`` (its sender's W3C ``traceparent``) is written and read back with it,
through single commits, commits written together, overwrites and a reopened store; and
messages stored before migration 5 read back without one."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from perdure.store import ActorCommit, MemoryStore, QueueMessageRecord, Store
from tests.store.sqlite.test_store import _database_of_schema, opened

from .conftest import StoreFactory
from .test_contract import TIMEOUT, message, record

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def traced(message_id: int, trace: str | None) -> QueueMessageRecord:
    return dataclasses.replace(message(message_id), trace=trace)


async def test_a_message_keeps_its_trace(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.commit(ActorCommit("a1", queue_put=[traced(1, PARENT), message(2)]))
    assert await store.load_queue("a1") == [traced(1, PARENT), traced(2, None)]
    # A put that overwrites a message replaces its trace too.
    await store.commit(ActorCommit("a1", queue_put=[traced(1, None), traced(2, OTHER)]))
    assert await store.load_queue("a1") == [traced(1, None), traced(2, OTHER)]


async def test_traces_of_commits_written_together(store: Store) -> None:
    # Commits of distinct actors that set their state, submitted together: the shape a
    # grouping backend writes as one statement.
    ids = [f"a{index}" for index in range(4)]
    for actor_id in ids:
        await store.create_actor(record(actor_id))
    commits = [
        ActorCommit(
            actor_id,
            state=b"s",
            queue_next_id=3,
            queue_put=[traced(1, PARENT if index % 2 else None), traced(2, OTHER)],
        )
        for index, actor_id in enumerate(ids)
    ]
    await asyncio.wait_for(asyncio.gather(*(store.commit(c) for c in commits)), TIMEOUT)
    for index, actor_id in enumerate(ids):
        expected = [traced(1, PARENT if index % 2 else None), traced(2, OTHER)]
        assert await store.load_queue(actor_id) == expected


async def test_a_trace_survives_reopening(store_factory: StoreFactory, tmp_path: Path) -> None:
    first = store_factory(tmp_path)
    if isinstance(first, MemoryStore):
        pytest.skip("the memory store keeps nothing once closed")
    await first.open()
    try:
        await first.create_actor(record("a1"))
        await first.commit(ActorCommit("a1", queue_put=[traced(5, PARENT)]))
    finally:
        await first.close()
    second = store_factory(tmp_path)
    await second.open()
    try:
        assert await second.load_queue("a1") == [traced(5, PARENT)]
    finally:
        await second.close()


async def test_messages_of_a_schema_4_database_have_no_trace(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _database_of_schema(
        path,
        4,
        "INSERT INTO actors (actor_id, name, key, created_at) VALUES ('a1', 'counter', 'a1', 1)",
        "INSERT INTO queue_messages (actor_id, id, name, body, created_at)"
        " VALUES ('a1', 1, 'jobs', x'62', 2)",
    )
    async with opened(path) as store:
        assert await store.load_queue("a1") == [QueueMessageRecord(1, "jobs", b"b", 2)]
        await store.commit(ActorCommit("a1", queue_put=[QueueMessageRecord(2, "j", b"", 3, OTHER)]))
        assert [m.trace for m in await store.load_queue("a1")] == [None, OTHER]

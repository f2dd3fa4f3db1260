"""What the database alone charges for the rows perdure must write (used by ``floor.py``).

These figures run perdure's own statements, built by its store code, on perdure's own
schema, but straight on a database connection: no event loop, no engine, no server. They
are the part of a perdure figure that no change to perdure's Python can remove without
writing less, and so bound the ratios ``floor.py`` reports:

- ``step_sql_us``: one durable step on SQLite (WAL, ``synchronous=NORMAL``): ``BEGIN
  IMMEDIATE``, the commit of one completed step entry (the generation fence and the
  history row, as ``CommitOp`` applies it), ``COMMIT``. Compare with the one-row commit.
- ``pg_commit_us``: a one-row commit on PostgreSQL (autocommit, the server's
  ``synchronous_commit``, which perdure keeps).
- ``pg_progress_commit_us``: the commit of one step of the seed's progress workload on
  PostgreSQL (state, the consumed message, three history entries, the event), as
  perdure's writer sends it when it is alone in its batch: one prepared statement.
  Each job of that workload is two such commits, one after the other.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from perdure.keys import normalize_key
from perdure.store import ActorCommit, ActorRecord, SQLiteStore, open_store
from perdure.store.base import EventRecord, QueueMessageRecord
from perdure.store.encoding import encode_value
from perdure.store.postgres.ops import _single_statement
from perdure.store.postgres.schema import configure_connection
from perdure.store.postgres.store import PostgresStore
from perdure.store.sqlite.ops import CommitOp
from perdure.store.sqlite.writer import connect
from perdure.workflows.history import Entry

ACTOR_ID = "floor-bounds-actor"
STEP_ENTRY = encode_value(Entry("step", "completed", 3, {"o": None, "a": 1}).to_record())


def _actor() -> ActorRecord:
    return ActorRecord(ACTOR_ID, "bounds", normalize_key("one"), 0, generation=1)


def step_sql_us(commits: int) -> float:
    """Median µs (five batches) of one step's commit applied as the SQLite writer does."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bounds.db"
        asyncio.run(_create_sqlite_actor(path))
        db = connect(str(path))
        db.execute("PRAGMA synchronous = NORMAL").fetchall()
        loop = asyncio.new_event_loop()
        try:
            batches = []
            for batch in range(5):
                ops = [
                    CommitOp(
                        loop.create_future(),
                        ActorCommit(ACTOR_ID, fence=1, history_put={f"b{batch}/s-{i}": STEP_ENTRY}),
                    )
                    for i in range(commits // 5)
                ]
                started = time.perf_counter()
                for op in ops:
                    db.execute("BEGIN IMMEDIATE")
                    op.apply(db)
                    db.execute("COMMIT")
                batches.append((time.perf_counter() - started) / len(ops) * 1e6)
                assert all(op.error is None for op in ops)
            # Timed statements that wrote nothing would flatter the floor.
            written = db.execute(
                "SELECT count(*) FROM workflow_history WHERE actor_id = ?", (ACTOR_ID,)
            ).fetchone()[0]
            assert written == 5 * (commits // 5), written
        finally:
            loop.close()
            db.close()
    return statistics.median(batches)


async def _create_sqlite_actor(path: Path) -> None:
    store = SQLiteStore(path)
    await store.open()
    try:
        await store.create_actor(_actor())
    finally:
        await store.close()


# -- PostgreSQL -----------------------------------------------------------------------


def _progress_commit(index: int) -> ActorCommit:
    """One step of the progress workload (``mark-running`` after a receive), as the
    engine commits it: the shape ``workflow_bench.py`` produces on PostgreSQL."""
    loop = "progress-loop"
    return ActorCommit(
        ACTOR_ID,
        fence=1,
        state=encode_value(
            {"progress": {"stage": "running", "completed": index, "total": index + 1}, "sum": 0}
        ),
        event_seq=index + 1,
        queue_delete=[index + 1],
        history_put={
            loop: encode_value({"k": "loop", "s": "running", "q": 1, "d": {"i": index}}),
            f"{loop}/~{index}/wait-job": encode_value(
                {
                    "k": "message",
                    "s": "completed",
                    "q": 2,
                    "d": {"m": [{"id": index + 1, "name": "jobs", "body": {"value": 1}}]},
                }
            ),
            f"{loop}/~{index}/mark-running": STEP_ENTRY,
        },
        event_put=[
            EventRecord(index + 1, "progressUpdated", encode_value([{"stage": "running"}]), 0)
        ],
    )


async def postgres_bounds(url: str, commits: int) -> dict[str, float]:
    """``pg_commit_us`` and ``pg_progress_commit_us`` (medians of five batches), in the
    schema of ``url`` (which must be empty: perdure's tables are created in it)."""
    store = open_store(url)
    assert isinstance(store, PostgresStore), url
    await store.open()
    try:
        await store.create_actor(_actor())
        messages = [
            QueueMessageRecord(i + 1, "jobs", encode_value({"value": 1}), 0) for i in range(commits)
        ]
        await store.submit(ActorCommit(ACTOR_ID, queue_put=messages, queue_next_id=commits + 1))
        async with await psycopg.AsyncConnection.connect(store.url, autocommit=True) as conn:
            await configure_connection(conn, store.schema)
            await conn.execute("CREATE TABLE floor_bounds (k serial PRIMARY KEY, v bytea)")
            one_row = await _batches(
                conn, commits, lambda i: ("INSERT INTO floor_bounds (v) VALUES (%s)", [b"x" * 64])
            )
            progress = await _batches(
                conn, commits, lambda i: _single_statement(_progress_commit(i), "")
            )
            await conn.execute("DROP TABLE floor_bounds")
            await _check_progress_commits(conn, 5 * (commits // 5), commits)
    finally:
        await store.close()
    return {"pg_commit_us": one_row, "pg_progress_commit_us": progress}


async def _batches(conn: psycopg.AsyncConnection[Any], commits: int, statement: Any) -> float:
    batches = []
    size = commits // 5
    for batch in range(5):
        started = time.perf_counter()
        for index in range(batch * size, (batch + 1) * size):
            sql, params = statement(index)
            cursor = conn.cursor(binary=True)
            await cursor.execute(sql, params)
        batches.append((time.perf_counter() - started) / size * 1e6)
    return statistics.median(batches)


async def _check_progress_commits(
    conn: psycopg.AsyncConnection[Any], applied: int, messages: int
) -> None:
    """Timed statements that wrote nothing would flatter the floor: each applied commit
    left its event and removed its message."""
    cursor = await conn.execute(
        "SELECT (SELECT count(*) FROM actor_events WHERE actor_id = %(a)s),"
        " (SELECT count(*) FROM queue_messages WHERE actor_id = %(a)s)",
        {"a": ACTOR_ID},
    )
    events, left = await cursor.fetchone() or (0, 0)
    assert (events, left) == (applied, messages - applied), (events, left)

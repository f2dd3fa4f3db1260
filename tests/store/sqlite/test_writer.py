"""A quiet SQLite store writes the first commit of an iteration at once (the caller finds
it durable without waiting for the iteration to end), and the next ones of the same task
up to 16 in a row; the commits of other tasks in that iteration form one group, after
which the store is busy and groups every commit again."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from perdure.store import ActorCommit, ActorRecord, SQLiteStore

TIMEOUT = 10.0
STREAK = 16  # perdure.store.sqlite.writer._AT_ONCE_STREAK


def _step(actor_id: str, index: int) -> ActorCommit:
    return ActorCommit(actor_id, history_put={f"s{index}": b"x"})


def _stored_steps(path: Path, actor_id: str) -> int:
    db = sqlite3.connect(path)
    try:
        (count,) = db.execute(
            "SELECT count(*) FROM workflow_history WHERE actor_id = ?", (actor_id,)
        ).fetchone()
    finally:
        db.close()
    return int(count)


async def _quiet_store(path: Path, actors: int = 1) -> SQLiteStore:
    """An open store whose last group was one commit (the quiet state)."""
    store = SQLiteStore(path)
    await store.open()
    for index in range(actors):
        await store.create_actor(ActorRecord(f"a{index}", "counter", (f"a{index}",), 1_000))
    await asyncio.wait_for(store.commit(_step("a0", -1)), TIMEOUT)  # a group of one
    return store


async def test_a_lone_commit_is_durable_when_submitted(tmp_path: Path) -> None:
    store = await _quiet_store(tmp_path / "db.sqlite")
    try:
        future = store.submit(_step("a0", 0))
        assert future.done()
        assert future.exception() is None
        # On disk, read by another connection, before this task has yielded once.
        assert _stored_steps(tmp_path / "db.sqlite", "a0") == 2
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)


async def test_at_most_sixteen_in_a_row_then_the_loop_runs(tmp_path: Path) -> None:
    store = await _quiet_store(tmp_path / "db.sqlite")
    try:
        at_once: list[bool] = []
        async with asyncio.timeout(TIMEOUT):
            for index in range(2 * STREAK + 2):
                future = store.submit(_step("a0", index))
                at_once.append(future.done())
                await future  # a done future: no yield, as in a workflow's step
        # The 17th waits for the end of the iteration (the task yields), and being a
        # group of one, leaves the store quiet again.
        assert at_once == ([True] * STREAK + [False]) * 2
        assert _stored_steps(tmp_path / "db.sqlite", "a0") == 2 * STREAK + 3
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)


async def test_other_tasks_commits_in_that_iteration_are_one_group(tmp_path: Path) -> None:
    store = await _quiet_store(tmp_path / "db.sqlite", actors=10)
    try:
        at_once: list[bool] = []

        async def one(index: int) -> None:
            future = store.submit(_step(f"a{index}", 0))
            at_once.append(future.done())
            await future

        # Ten tasks that all run in the same iteration, each submitting one commit.
        await asyncio.wait_for(asyncio.gather(*(one(index) for index in range(10))), TIMEOUT)
        assert at_once == [True] + [False] * 9
        # After a group of nine the store is busy: a lone commit waits for its group.
        lone = store.submit(_step("a0", 1))
        assert not lone.done()
        await asyncio.wait_for(lone, TIMEOUT)
        for index in range(10):
            assert _stored_steps(tmp_path / "db.sqlite", f"a{index}") == (3 if index == 0 else 1)
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)

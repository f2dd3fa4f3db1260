"""SQLite-specific behaviour: files, migrations, pragmas, crash durability."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perdure.store import ActorCommit, ActorRecord, SQLiteStore, Store
from perdure.store.migrations import (
    MIGRATIONS,
    Migration,
    SchemaTooNew,
    apply_sqlite_migrations,
    check_ledger,
    split_sqlite_statements,
)
from perdure.store.sqlite.checkpoint import FALLBACK_AUTOCHECKPOINT_PAGES
from perdure.store.sqlite.nodes import LIST_NODES
from perdure.store.sqlite.ops import CallOp, CommitOp, CreateOp, DeleteOp
from perdure.store.sqlite.store import _DUE_ACTORS, _NEXT_WAKE_AT
from perdure.store.sqlite.writer import GroupCommitWriter
from tests.support.wait import eventually

TIMEOUT = 10.0
CRASH_WRITER = Path(__file__).parents[1] / "crash_writer.py"


def record(actor_id: str, **fields: Any) -> ActorRecord:
    return ActorRecord(actor_id, "counter", (actor_id,), 1_000, **fields)


@contextlib.contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to inspect the file, always closed."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        yield db
    finally:
        db.close()


@contextlib.asynccontextmanager
async def opened(path: Path, **options: Any) -> Any:
    store = SQLiteStore(path, **options)
    await store.open()
    try:
        yield store
    finally:
        await asyncio.wait_for(store.close(), TIMEOUT)


# --- files and reopening ----------------------------------------------------------------


async def test_open_creates_directories_and_handles_odd_names(tmp_path: Path) -> None:
    path = tmp_path / "deep er" / "dir#1" / "my db?%.sqlite"
    async with opened(path) as store:
        await store.create_actor(record("a1"))
        assert await store.get_actor("a1") == record("a1")
    assert path.exists()


async def test_a_store_can_be_reopened_after_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite")
    await store.open()
    await store.create_actor(record("a1"))
    await store.close()
    await store.open()
    try:
        assert await store.get_actor("a1") == record("a1")
    finally:
        await store.close()


def test_invalid_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        SQLiteStore(tmp_path / "db.sqlite", durability="sometimes")  # type: ignore[arg-type]


# --- pragmas ----------------------------------------------------------------------------


async def test_wal_mode_and_process_durability(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path) as store:
        assert await store.pragmas() == {"journal_mode": "wal", "synchronous": 1}
        assert store.durability == "process"
    with raw(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_power_durability_sets_synchronous_full(tmp_path: Path) -> None:
    async with opened(tmp_path / "db.sqlite", durability="power") as store:
        assert await store.pragmas() == {"journal_mode": "wal", "synchronous": 2}


async def test_wal_is_checkpointed_by_the_checkpoint_thread(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path) as store:
        writer = store._writer
        assert writer is not None
        future = asyncio.get_running_loop().create_future()
        writer.submit(CallOp(future, lambda db: db.execute("PRAGMA wal_autocheckpoint").fetchone()))
        # The write connection checkpoints only as a fallback, far above SQLite's 1,000.
        assert await asyncio.wait_for(future, TIMEOUT) == (FALLBACK_AUTOCHECKPOINT_PAGES,)
        await store.create_actor(record("a1"))
        for index in range(200):  # ~2 MB of history: ~500 pages in the WAL, under the fallback
            await store.commit(ActorCommit("a1", history_put={f"h{index}": b"x" * 10_000}))
        # Only a checkpoint copies pages into the database file itself.
        await eventually(
            lambda: path.stat().st_size > 1_000_000, what="the WAL copied into the file"
        )
        assert writer.checkpointer.checkpoints >= 1


# --- migrations -------------------------------------------------------------------------


def _ledger(path: Path) -> list[tuple[Any, ...]]:
    with raw(path) as db:
        return db.execute("SELECT version, name, applied_at FROM perdure_migrations").fetchall()


async def test_migrations_are_applied_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path):
        pass
    first = _ledger(path)
    assert [(v, n) for v, n, _ in first] == [(m.version, m.name) for m in MIGRATIONS]
    async with opened(path):
        pass
    assert _ledger(path) == first  # nothing re-applied, applied_at unchanged


async def test_two_stores_opening_a_new_file_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    one, two = SQLiteStore(path), SQLiteStore(path)
    await asyncio.wait_for(asyncio.gather(one.open(), two.open()), TIMEOUT)
    try:
        await one.create_actor(record("a1"))
        assert await two.get_actor("a1") == record("a1")
    finally:
        await one.close()
        await two.close()
    assert len(_ledger(path)) == len(MIGRATIONS)


async def test_pending_migrations_are_applied_generically(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path):
        pass
    extra = Migration(
        len(MIGRATIONS) + 1,
        "extra_table",
        sqlite="CREATE TABLE extra (x TEXT DEFAULT 'a;b'); CREATE INDEX extra_x ON extra (x);",
        postgres="CREATE TABLE extra (x TEXT DEFAULT 'a;b'); CREATE INDEX extra_x ON extra (x);",
    )
    with raw(path) as db:
        assert apply_sqlite_migrations(db, [*MIGRATIONS, extra]) == [extra.version]
        assert apply_sqlite_migrations(db, [*MIGRATIONS, extra]) == []
        db.execute("INSERT INTO extra DEFAULT VALUES")
        assert db.execute("SELECT x FROM extra").fetchall() == [("a;b",)]
    assert [row[1] for row in _ledger(path)][-1] == "extra_table"


async def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    broken = Migration(
        len(MIGRATIONS) + 1,
        "broken",
        sqlite="CREATE TABLE half (x); CREATE TABLE half (y);",
        postgres="",
    )
    with raw(path) as db:
        with pytest.raises(sqlite3.OperationalError):
            apply_sqlite_migrations(db, [*MIGRATIONS, broken])
        assert not db.in_transaction
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert "half" not in tables
    assert "actors" not in tables  # everything pending is applied in one transaction


def _database_of_schema(path: Path, version: int, *statements: str) -> None:
    """A database migrated up to ``version`` only, then ``statements``."""
    with raw(path) as db:
        apply_sqlite_migrations(db, MIGRATIONS[:version])
        for statement in statements:
            db.execute(statement)


async def test_a_database_of_schema_2_loses_its_second_fencing_counter(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _database_of_schema(
        path,
        2,
        "INSERT INTO actors (actor_id, name, key, created_at, generation, state,"
        " owner_node, lease_generation, lease_expires_at)"
        " VALUES ('a1', 'counter', 'a1', 1000, 5, x'73', 'n1', 9, 1234)",
    )
    async with opened(path) as store:
        assert await store.get_actor("a1") == record("a1", generation=5, state=b"s")
        lease = await store.get_lease("a1")
        assert lease is not None
        assert (lease.node_id, lease.generation, lease.expires_at) == ("n1", 5, 1234)
    with raw(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(actors)")}
    assert "lease_generation" not in columns
    assert {"generation", "owner_node", "lease_expires_at"} <= columns


async def test_a_database_of_schema_3_gains_the_nodes_table_and_owner_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    _database_of_schema(
        path,
        3,
        "INSERT INTO actors (actor_id, name, key, created_at, owner_node, lease_expires_at)"
        " VALUES ('a1', 'counter', 'a1', 1000, 'n1', 9999999999999)",
    )
    async with opened(path) as store:
        node = await store.register_node("n1", "http://n1:6420", 60_000)
        # What `perdure nodes` does beside a running server: a store without the lock.
        async with opened(path, exclusive=False) as reader:
            [listed] = await reader.list_nodes()
    assert (listed.node_id, listed.address, listed.expires_at) == (
        "n1",
        "http://n1:6420",
        node.expires_at,
    )
    assert listed.actors == 1
    with raw(path) as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {LIST_NODES}", (1, 0, 0)).fetchall()
    assert "actors_owner_node" in str(plan), plan


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path):
        pass
    with raw(path) as db:
        db.execute("INSERT INTO perdure_migrations VALUES (999, 'future', 0)")
    store = SQLiteStore(path)
    with pytest.raises(SchemaTooNew, match="999"):
        await asyncio.wait_for(store.open(), TIMEOUT)
    await store.close()


def test_the_ledger_is_numbered_without_gaps() -> None:
    check_ledger(MIGRATIONS)
    with pytest.raises(ValueError, match="expected 2"):
        check_ledger([MIGRATIONS[0], Migration(3, "gap", "", "")])
    for migration in MIGRATIONS:
        assert migration.postgres.strip(), f"migration {migration.version} lacks Postgres SQL"
        assert split_sqlite_statements(migration.sqlite)


def test_split_statements_keeps_semicolons_in_strings() -> None:
    script = "CREATE TABLE t (x DEFAULT ';');\nINSERT INTO t VALUES ('a;b');\n\n"
    assert split_sqlite_statements(script) == [
        "CREATE TABLE t (x DEFAULT ';');",
        "INSERT INTO t VALUES ('a;b');",
    ]
    with pytest.raises(ValueError, match="Incomplete"):
        split_sqlite_statements("CREATE TABLE t (x); INSERT INTO t VALUES ('unterminated)")


# --- query plans ------------------------------------------------------------------------


async def test_alarm_queries_use_the_wake_index(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with opened(path):
        pass
    with raw(path) as db:
        for sql, params in ((_DUE_ACTORS, (1, 10)), (_NEXT_WAKE_AT, ())):
            plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            assert "actors_wake_at" in plan, plan
            assert "SCAN" not in plan, plan


# --- writer behaviour -------------------------------------------------------------------


async def test_an_unexpected_error_fails_only_its_own_write(tmp_path: Path) -> None:
    """A write SQLite rejects mid-batch rolls the batch back; the others are replayed."""
    async with opened(tmp_path / "db.sqlite") as store:
        for index in range(10):
            await store.create_actor(record(f"a{index}"))
        writes = [
            store.commit(ActorCommit(f"a{index}", state=b"ok", history_put={"s": b"1"}))
            for index in range(10)
        ]
        # generation does not fit SQLite's 64-bit integer: fails at bind time, after the
        # commit's state was already written in the batch's transaction.
        writes.insert(
            5, store.commit(ActorCommit("a3", history_put={"bad": b"x"}, generation=2**64))
        )
        results = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), TIMEOUT)
        assert [type(r).__name__ for r in results if r is not None] == ["OverflowError"]
        for index in range(10):
            got = await store.get_actor(f"a{index}")
            assert got is not None
            assert (got.state, got.generation) == (b"ok", 0)
            assert await store.load_history(f"a{index}") == {"s": b"1"}


async def test_one_batch_isolates_expected_and_unexpected_failures(tmp_path: Path) -> None:
    """Drive one batch through the writer deterministically (no timing involved)."""
    path = tmp_path / "db.sqlite"
    async with opened(path) as store:
        await store.create_actor(record("a1"))
        await store.create_actor(record("a2"))
    loop = asyncio.get_running_loop()
    ops = [
        CommitOp(loop.create_future(), ActorCommit("a1", state=b"one")),
        CreateOp(loop.create_future(), ActorRecord("a3", "counter", ("a1",), 0)),  # same key
        CommitOp(loop.create_future(), ActorCommit("ghost", state=b"x")),
        CommitOp(loop.create_future(), ActorCommit("a2", state=b"bad", generation=2**64)),
        DeleteOp(loop.create_future(), "a2"),
        CreateOp(loop.create_future(), record("a4")),
    ]
    writer = GroupCommitWriter(path, synchronous="NORMAL")
    with raw(path) as db:
        writer._write_batch(db, ops)
    outcomes = [type(op.error).__name__ if op.error else op.result for op in ops]
    assert outcomes == [None, "ActorAlreadyExists", "ActorNotFound", "OverflowError", True, None]
    for op in ops:
        op.future.cancel()
    async with opened(path) as store:
        got = await store.get_actor("a1")
        assert got is not None
        assert got.state == b"one"
        assert await store.get_actor("a2") is None
        assert await store.get_actor("a3") is None
        assert await store.get_actor("a4") == record("a4")


async def test_commit_contents_are_copied_at_submission(tmp_path: Path) -> None:
    async with opened(tmp_path / "db.sqlite") as store:
        await store.create_actor(record("a1"))
        commit = ActorCommit("a1", history_put={"a": b"1"})
        pending = asyncio.ensure_future(store.commit(commit))
        await asyncio.sleep(0)
        commit.history_put["b"] = b"2"
        await asyncio.wait_for(pending, TIMEOUT)
        assert await store.load_history("a1") == {"a": b"1"}


# --- crash durability -------------------------------------------------------------------


def _parse(lines: list[str], acknowledged: dict[str, int]) -> None:
    for line in lines:
        actor_id, step = line.split()
        acknowledged[actor_id] = max(acknowledged.get(actor_id, 0), int(step))


async def _run_and_kill(path: Path | str, wanted: int) -> dict[str, int]:
    """Run the crash writer, read ``wanted`` acknowledgements, SIGKILL it, return them all.

    ``path`` is a SQLite file or a store URL (the PostgreSQL crash test uses this too).
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CRASH_WRITER), str(path), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    acknowledged: dict[str, int] = {}
    lines: list[str] = []
    try:
        assert await asyncio.wait_for(process.stdout.readline(), 30) == b"ready\n"
        for _ in range(wanted):
            lines.append((await asyncio.wait_for(process.stdout.readline(), TIMEOUT)).decode())
    finally:
        # os.kill, not process.kill(): Popen.send_signal polls first and may reap the child
        # before asyncio's watcher does, which then reports exit status 255.
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        rest = (await asyncio.wait_for(process.stdout.read(), TIMEOUT)).decode()
        await asyncio.wait_for(process.wait(), TIMEOUT)
    # Lines already in the pipe were acknowledged too; a torn last line was not.
    _parse([*lines, *rest.split("\n")[:-1]], acknowledged)
    assert process.returncode == -signal.SIGKILL
    return acknowledged


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
async def check_acknowledged(store: Store, acknowledged: dict[str, int]) -> None:
    """Every acknowledged step of the crash writer survived, each commit whole."""
    for actor_id, step in acknowledged.items():
        got = await store.get_actor(actor_id)
        assert got is not None
        assert got.state is not None
        stored = int(got.state)
        assert stored >= step, f"{actor_id}: acknowledged {step}, found {stored}"
        # Each commit is atomic across the crash: state, history and queue agree.
        history = await store.load_history(actor_id)
        assert set(history) == {f"loop/~{i}/step" for i in range(1, stored + 1)}
        assert [m.id for m in await store.load_queue(actor_id)] == list(range(1, stored + 1))


async def test_acknowledged_commits_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    acknowledged = await _run_and_kill(path, wanted=600)
    assert len(acknowledged) == 8
    async with opened(path) as store:
        await check_acknowledged(store, acknowledged)

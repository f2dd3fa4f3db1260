"""The read-only view of an actor's committed SQL database (runtime/kernel/db_view.py):
an actor without pages has an empty database; reads and read pragmas pass, anything
that writes or sets is ``db.read_only`` and changes nothing; a query past its time is
``db.timeout``, past the row cap ``db.too_many_rows``; a database too large is not read;
the same view on the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

from typing import Any

import pytest

from perdure import ActionContext, actor, db, setup
from perdure.errors import DbError
from perdure.runtime.kernel import db_view
from perdure.testing import ActorTestEnv
from tests.support.runtimes import RuntimeFactory

_COUNTING = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"


async def _migrate(database: Any) -> None:
    await database.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")


async def _fill(c: ActionContext, count: int) -> None:
    for index in range(count):
        await c.db.execute("INSERT INTO t (v) VALUES (?)", bytes([index]))


registry = setup(use={"box": actor(state={}, db=db(on_migrate=_migrate), actions={"fill": _fill})})


async def _refused(env: ActorTestEnv, actor_id: str, sql: str) -> str:
    with pytest.raises(DbError) as refused:
        await db_view.db_query(env.store, actor_id, sql)
    return str(refused.value.code)


async def test_reads_pass_and_anything_else_is_read_only() -> None:
    async with ActorTestEnv(registry) as env:
        box = env.client.box.get_or_create("a")
        actor_id = await box.resolve()
        assert await db_view.db_tables(env.store, "no pages yet") == []
        await box.fill(3)
        assert await env.db(actor_id, "SELECT v FROM t WHERE id = ?", 2) == [{"v": b"\x01"}]
        assert await env.db(actor_id, "PRAGMA user_version") == [{"user_version": 0}]
        assert len(await env.db(actor_id, "PRAGMA table_info(t)")) == 2
        for sql in (
            "INSERT INTO t (v) VALUES (1)",
            "CREATE TABLE u (x)",
            "PRAGMA user_version = 3",
            "PRAGMA journal_mode = WAL",
            "PRAGMA incremental_vacuum",
            "ATTACH ':memory:' AS other",
            "SELECT load_extension('x')",
        ):
            assert await _refused(env, actor_id, sql) == "read_only", sql
        assert await env.db(actor_id, "SELECT count(*) AS n FROM t") == [{"n": 3}]


async def test_time_rows_and_size_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    async with ActorTestEnv(registry) as env:
        box = env.client.box.get_or_create("a")
        await box.fill(2)
        actor_id = await box.resolve()
        monkeypatch.setattr(db_view, "VIEW_TIMEOUT", 0.05)
        assert await _refused(env, actor_id, _COUNTING) == "timeout"
        monkeypatch.setattr(db_view, "VIEW_MAX_ROWS", 1)
        assert await _refused(env, actor_id, "SELECT * FROM t") == "too_many_rows"
        assert await _refused(env, actor_id, "SELECT randomblob(20000000)") == "too_large"
        monkeypatch.setattr(db_view, "ANSWER_MAX_BYTES", 10)
        assert await _refused(env, actor_id, "SELECT zeroblob(6) UNION ALL SELECT 'abcdef'") == (
            "too_large"
        )
        monkeypatch.setattr(db_view, "VIEW_MAX_BYTES", 2048)
        assert await _refused(env, actor_id, "SELECT 1") == "too_large"


async def test_the_view_reads_what_was_committed_on_every_store(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    box = runtime.client().box.get_or_create("a")
    await box.fill(2)
    actor_id = await box.resolve()
    store = runtime.store
    (table,) = await db_view.db_tables(store, actor_id)
    assert [column["name"] for column in table["columns"]] == ["id", "v"]
    page = await db_view.db_rows(store, actor_id, "t", 1, 10)
    assert (page["rows"], page["total"]) == ([[2, b"\x01"]], 2)

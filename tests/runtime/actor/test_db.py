"""``c.db`` in process (docs/storage.md): statements return rows as dicts; on_migrate
(the database's, then the actor's) runs before any other hook at every wake; writes
are durable with the action's commit, in the same commit as the state and KV writes,
and a database larger than SQLite's page cache survives a restart; transactions commit
or roll back; statements that would escape the actor are refused (db.forbidden), and
a full database is db.full. On the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from perdure import ActionContext, ActorRuntime, actor, db, setup
from perdure.errors import PerdureError
from perdure.runtime.kernel.db_pages import PAGE_SIZE, PAGES_END
from perdure.store import MemoryStore
from perdure.store.kv import DB_PAGE_TAG
from perdure.testing import ActorTestEnv
from tests.support.docs import python_blocks
from tests.support.runtimes import RuntimeFactory, StoreFactory

HOOKS: list[str] = []


async def migrate(database: Any) -> None:
    HOOKS.append("db.on_migrate")
    await database.execute(
        "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, n INT)"
    )


FAILING: list[bool] = []


async def migrate_or_fail(database: Any) -> None:
    if FAILING:
        await database.execute("CREATE TABLE first_try (x)")
        raise ValueError("a migration that fails")
    await migrate(database)


def on_migrate(c: Any, is_new: bool) -> None:
    HOOKS.append(f"on_migrate:{is_new}")


def create_state(c: Any, _input: Any) -> dict[str, Any]:
    HOOKS.append("create_state")
    return {"count": 0}


def on_wake(c: Any) -> None:
    HOOKS.append("on_wake")


async def add(c: ActionContext, name: str, n: int = 0) -> int:
    rows = await c.db.execute("INSERT INTO items (name, n) VALUES (?, ?) RETURNING id", name, n)
    c.state["count"] += 1
    c.kv.put(f"item:{name}", n)
    return int(rows[0]["id"])


async def add_then_fail(c: ActionContext, name: str) -> None:
    await c.db.execute("INSERT INTO items (name) VALUES (?)", name)
    raise ValueError("after the insert")


async def query(c: ActionContext, sql: str, params: list[Any] | None = None) -> Any:
    return await c.db.execute(sql, *(params or []))


async def bulk(c: ActionContext, count: int, size: int) -> int:
    await c.db.execute(
        "WITH RECURSIVE seq(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM seq WHERE v < ?) "
        "INSERT INTO items (name, n) SELECT printf('%.*c', ?, 'x'), v FROM seq",
        count,
        size,
    )
    return count


async def in_transaction(c: ActionContext, fail: bool) -> None:
    async with c.db.transaction() as tx:
        await tx.execute("INSERT INTO items (name) VALUES ('tx-1')")
        await tx.execute("INSERT INTO items (name) VALUES ('tx-2')")
        if fail:
            raise ValueError("roll back")


async def transaction_fn(c: ActionContext) -> int:
    async def body(tx: Any) -> int:
        await tx.execute("INSERT INTO items (name) VALUES ('fn')")
        return len(await tx.execute("SELECT id FROM items"))

    result: int = await c.db.transaction(body)
    return result


async def execute_inside_transaction(c: ActionContext) -> str:
    async with c.db.transaction():
        try:
            await c.db.execute("SELECT 1")
        except PerdureError as exc:
            return exc.code
    return "no error"


def state(c: ActionContext) -> Any:
    return c.state


async def kv_get(c: ActionContext, key: str) -> Any:
    return await c.kv.get(key)


async def kv_all(c: ActionContext) -> Any:
    return [[k, v] for k, v in await c.kv.list("")] + [[k, v] for k, v in await c.kv.list(b"")]


ACTIONS = {
    "add": add,
    "addThenFail": add_then_fail,
    "query": query,
    "bulk": bulk,
    "inTransaction": in_transaction,
    "transactionFn": transaction_fn,
    "executeInsideTransaction": execute_inside_transaction,
    "state": state,
    "kvGet": kv_get,
    "kvAll": kv_all,
}
registry = setup(
    use={
        "items": actor(
            db=db(on_migrate=migrate),
            create_state=create_state,
            on_migrate=on_migrate,
            on_wake=on_wake,
            actions=ACTIONS,
        ),
        "small": actor(
            db=db(on_migrate=migrate, max_size=65_536),
            state={"count": 0},
            actions=ACTIONS,
        ),
        "plain": actor(state={}, actions={"query": query}),
        "migrating": actor(db=db(on_migrate=migrate_or_fail), state={}, actions=ACTIONS),
    }
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    HOOKS.clear()
    FAILING.clear()


async def test_rows_come_back_as_dicts_and_migrations_run_first(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    assert await items.add("one", 1) == 1
    assert await items.add("two", 2) == 2
    assert await items.query("SELECT id, name, n FROM items ORDER BY id") == [
        {"id": 1, "name": "one", "n": 1},
        {"id": 2, "name": "two", "n": 2},
    ]
    named = await items.query("SELECT name FROM items WHERE n = :n", [{"n": 2}])
    assert named == [{"name": "two"}]
    assert await items.query("SELECT x'00ff' AS b, 1.5 AS f, NULL AS z") == [
        {"b": b"\x00\xff", "f": 1.5, "z": None}
    ]
    assert HOOKS == ["db.on_migrate", "on_migrate:True", "create_state", "on_wake"]


async def test_writes_survive_a_restart_with_the_state_and_kv(
    make_runtime: RuntimeFactory, stores: StoreFactory
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    await items.add("one", 1)
    # ~1.3 MB of rows: more than the page cache reads ahead, so a restart reads pages
    # from the store on demand.
    await items.bulk(1000, 1200)
    await runtime.stop()
    HOOKS.clear()
    runtime = await make_runtime(registry, stores())
    items = runtime.client().items.get_or_create("a")
    rows = await items.query("SELECT count(*) AS c, sum(length(name)) AS s FROM items")
    assert rows == [{"c": 1001, "s": 1000 * 1200 + 3}]
    assert await items.state() == {"count": 1}
    assert await items.kvGet("item:one") == 1
    assert await items.query("PRAGMA integrity_check") == [{"integrity_check": "ok"}]
    assert HOOKS == ["db.on_migrate", "on_migrate:False", "on_wake"]


async def test_the_pages_ride_in_the_same_commit_as_the_state(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    await items.add("one", 1)
    actor_id = await items.resolve()
    commits: list[Any] = []
    store = runtime.store
    submit = store.submit

    def spy(commit: Any) -> Any:
        commits.append(commit)
        return submit(commit)

    store.submit = spy  # type: ignore[method-assign]
    try:
        await items.add("two", 2)
    finally:
        store.submit = submit  # type: ignore[method-assign]
    carrying = [c for c in commits if any(k.startswith(DB_PAGE_TAG) for k in c.kv_put)]
    assert len(carrying) == 1
    assert carrying[0].state is not None  # the state change is in that same commit
    assert any(k.startswith(b"s") for k in carrying[0].kv_put)  # and the KV put
    pages = await store.kv_list(actor_id, start=DB_PAGE_TAG, end=PAGES_END)
    assert pages
    assert all(len(value) == PAGE_SIZE for _, value in pages)


async def test_a_failed_action_keeps_its_completed_statements_like_its_state(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    with pytest.raises(PerdureError):
        await items.addThenFail("kept")
    assert await items.query("SELECT name FROM items") == [{"name": "kept"}]


async def test_transactions_commit_or_roll_back(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    with pytest.raises(PerdureError):
        await items.inTransaction(True)
    assert await items.query("SELECT name FROM items") == []
    await items.inTransaction(False)
    assert await items.transactionFn() == 3
    assert await items.executeInsideTransaction() == "transaction"
    names = await items.query("SELECT name FROM items ORDER BY id")
    assert [row["name"] for row in names] == ["tx-1", "tx-2", "fn"]
    # A manual transaction in one execute (rivetkit's multiStatementInsert).
    await items.query(
        "BEGIN; INSERT INTO items (name) VALUES ('m'); "
        "UPDATE items SET name = 'm2' WHERE id = last_insert_rowid(); COMMIT;"
    )
    assert (await items.query("SELECT name FROM items ORDER BY id DESC LIMIT 1")) == [
        {"name": "m2"}
    ]


async def test_statements_of_concurrent_actions_run_one_at_a_time(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    ids = await asyncio.gather(*(items.add(f"n{i}", i) for i in range(20)))
    assert sorted(ids) == list(range(1, 21))
    assert await items.state() == {"count": 20}


@pytest.mark.parametrize(
    "sql",
    [
        "ATTACH DATABASE 'other.db' AS other",
        "PRAGMA journal_mode=DELETE",
        "PRAGMA locking_mode=NORMAL",
        "PRAGMA max_page_count=100000000",
        "PRAGMA writable_schema=ON",
        "PRAGMA page_size=512",
        "SELECT load_extension('x')",
        "VACUUM INTO 'copy.db'",
        "CREATE TEMP TABLE t (x)",
    ],
)
async def test_statements_that_escape_the_actor_are_refused(
    make_runtime: RuntimeFactory, sql: str
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    with pytest.raises(PerdureError) as caught:
        await items.query(sql)
    assert caught.value.group == "db"
    assert caught.value.code == "forbidden"
    assert await items.query("PRAGMA journal_mode") == [{"journal_mode": "memory"}]


async def test_sql_errors_and_the_size_limit_have_codes(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(registry)
    small = runtime.client().small.get_or_create("a")
    with pytest.raises(PerdureError) as caught:
        await small.query("SELEKT 1")
    assert (caught.value.group, caught.value.code) == ("db", "sql")
    with pytest.raises(PerdureError) as caught:
        await small.bulk(100, 4000)  # 400 kB into a 64 kB database
    assert (caught.value.group, caught.value.code) == ("db", "full")
    assert await small.query("SELECT count(*) AS c FROM items") == [{"c": 0}]
    plain = runtime.client().plain.get_or_create("a")
    with pytest.raises(PerdureError) as caught:
        await plain.query("SELECT 1")
    assert (caught.value.group, caught.value.code) == ("db", "not_configured")


async def test_freed_pages_go_back_to_the_store(
    make_runtime: RuntimeFactory, stores: StoreFactory
) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    await items.bulk(500, 2000)
    actor_id = await items.resolve()
    full = len(await runtime.store.kv_list(actor_id, start=DB_PAGE_TAG, end=PAGES_END))
    await items.query("DELETE FROM items")
    await items.query("PRAGMA incremental_vacuum")
    await items.query("INSERT INTO items (name) VALUES ('after')")
    stored = await runtime.store.kv_list(actor_id, start=DB_PAGE_TAG, end=PAGES_END)
    assert full > 250
    assert len(stored) < 10  # the file was truncated: its pages deleted
    await runtime.stop()
    runtime = await make_runtime(registry, stores())
    items = runtime.client().items.get_or_create("a")
    assert await items.query("SELECT name FROM items") == [{"name": "after"}]
    assert await items.query("PRAGMA integrity_check") == [{"integrity_check": "ok"}]


async def test_db_pages_are_not_the_users_kv_records(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(registry)
    items = runtime.client().items.get_or_create("a")
    await items.add("one", 1)
    assert await items.kvAll() == [["item:one", 1]]


async def test_a_failed_migration_fails_the_start_and_leaves_nothing(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(registry)
    migrating = runtime.client().migrating.get_or_create("a")
    FAILING.append(True)
    with pytest.raises(PerdureError):
        await migrating.query("SELECT 1")
    FAILING.clear()
    tables = await migrating.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    assert tables == [{"name": "items"}]  # first_try was rolled back with its migration


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_the_test_kit_runs_db_actors(store: str) -> None:
    # On these stores statements run on the loop's thread: the kit's settle sees them.
    async with ActorTestEnv(registry, store=store) as env:
        items = env.client.items.get_or_create("a")
        assert await items.add("one", 1) == 1
        assert await env.kv(items) == [("item:one", 1)]  # the user's records, not pages
        await env.advance(60)  # past the sleep timeout: the actor sleeps, the db closes
        assert not env.runtime.is_live(await items.resolve())
        assert await items.query("SELECT name FROM items") == [{"name": "one"}]


async def test_the_storage_guide_example_runs() -> None:
    guide = (Path(__file__).parents[3] / "docs" / "storage.md").read_text()
    (block,) = [b for b in python_blocks(guide) if "chat_room = actor(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "storage.md", "exec"), namespace)
    async with ActorTestEnv(setup(use={"chatRoom": namespace["chat_room"]})) as env:
        room = env.client.chatRoom.get_or_create("lobby")
        assert await room.post("ann", "hello") == 1
        assert await room.post("bob", "hi") == 2
        assert await room.recent(1) == [{"id": 2, "author": "bob", "body": "hi"}]


class ThreadedMemoryStore(MemoryStore):
    """A memory store that says its reads may wait: c.db takes the worker-thread path
    (PostgreSQL's) without a server."""

    reads_inline = False


async def slow_count(c: ActionContext) -> str:
    # About a second of SQLite's time on the worker thread, whose caller gives up.
    statement = c.db.execute(
        "WITH RECURSIVE seq(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM seq WHERE v < 3000000) "
        "SELECT count(*) AS c FROM seq"
    )
    try:
        await asyncio.wait_for(statement, 0.05)
    except TimeoutError:
        return "cancelled"
    return "finished"


async def test_the_worker_thread_path_and_a_caller_cancelled_mid_statement() -> None:
    slow = actor(
        db=db(on_migrate=migrate),
        state={"count": 0},
        actions={**ACTIONS, "slowCount": slow_count},
    )
    slow_registry = setup(use={"slow": slow})
    store = ThreadedMemoryStore()
    async with ActorRuntime(slow_registry, store) as runtime:
        handle = runtime.client().slow.get_or_create("a")
        await handle.bulk(300, 2000)  # ~600 kB: read through the loop after a restart
        assert await handle.slowCount() == "cancelled"  # its statement runs on
        # The next statement waits for the worker, then runs: never two at once.
        assert await handle.add("after", 1) == 301
    async with ActorRuntime(slow_registry, store) as runtime:
        handle = runtime.client().slow.get_or_create("a")
        rows = await handle.query("SELECT count(*) AS c, sum(length(name)) AS s FROM items")
        assert rows == [{"c": 301, "s": 300 * 2000 + 5}]
        assert await handle.query("PRAGMA integrity_check") == [{"integrity_check": "ok"}]


def test_db_definitions_refuse_what_would_fail_later() -> None:
    with pytest.raises(PerdureError) as caught:
        db(onMigrate=migrate)  # rivetkit's spelling
    assert caught.value.code == "unknown_argument"
    assert "on_migrate" in caught.value.message
    with pytest.raises(PerdureError, match="db\\(\\.\\.\\.\\)"):
        actor(db={"on_migrate": migrate})
    with pytest.raises(PerdureError, match="max_size"):
        db(max_size=10)

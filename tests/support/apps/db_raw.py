"""rivetkit's ``dbActorRaw`` fixture (driver-test-suite/actor-db-raw.ts, used by its
actor-db and actor-db-raw driver tests) written with perdure's ``c.db``
(tests/runtime/actor/test_db_rivetkit.py runs those tests' checks against it).

What differs from the TypeScript, on purpose: ``c.db.transaction(fn, timeout=...)``
takes seconds; ``vacuum`` runs ``PRAGMA incremental_vacuum`` (perdure refuses
``VACUUM``, which builds a copy of the whole database in memory: docs/storage.md); the
actions about rivetkit's runtime socket, its lifecycle observer and its wake holds are
left out (they test rivetkit's host, not the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from perdure import ActionContext, actor, db
from perdure.errors import PerdureError


async def migrate(database: Any) -> None:
    await database.execute(
        """
        CREATE TABLE IF NOT EXISTS test_data (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            value TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '',
            created_at INTEGER NOT NULL
        )
        """
    )


def _now() -> int:
    return int(time.time() * 1000)


async def _insert(c: ActionContext, value: str, payload: str = "") -> None:
    await c.db.execute(
        "INSERT INTO test_data (value, payload, created_at) VALUES (?, ?, ?)",
        value,
        payload,
        _now(),
    )


async def reset(c: ActionContext) -> None:
    await c.db.execute("DELETE FROM test_data")


async def insert_value(c: ActionContext, value: str) -> dict[str, int]:
    await _insert(c, value)
    rows = await c.db.execute("SELECT last_insert_rowid() AS id")
    return {"id": rows[0]["id"]}


async def insert_value_and_read_back(c: ActionContext, value: str) -> Any:
    await _insert(c, value)
    rows = await c.db.execute(
        "SELECT id, value, hex(value) AS hex_value, length(value) AS sqlite_length "
        "FROM test_data ORDER BY id DESC LIMIT 1"
    )
    return rows[0] if rows else None


async def get_values(c: ActionContext) -> list[dict[str, Any]]:
    return await c.db.execute("SELECT * FROM test_data ORDER BY id")


async def get_value(c: ActionContext, row_id: int) -> Any:
    rows = await c.db.execute("SELECT value FROM test_data WHERE id = ?", row_id)
    return rows[0]["value"] if rows else None


async def get_count(c: ActionContext) -> int:
    rows = await c.db.execute("SELECT COUNT(*) AS count FROM test_data")
    return int(rows[0]["count"])


async def insert_many(c: ActionContext, count: int) -> dict[str, int]:
    if count <= 0:
        return {"count": 0}
    now = _now()
    values = ", ".join(f"('User {i}', '', {now})" for i in range(count))
    await c.db.execute(f"INSERT INTO test_data (value, payload, created_at) VALUES {values}")
    return {"count": count}


async def update_value(c: ActionContext, row_id: int, value: str) -> dict[str, bool]:
    await c.db.execute("UPDATE test_data SET value = ? WHERE id = ?", value, row_id)
    return {"success": True}


async def delete_value(c: ActionContext, row_id: int) -> None:
    await c.db.execute("DELETE FROM test_data WHERE id = ?", row_id)


async def transaction_commit(c: ActionContext, value: str) -> None:
    async def body(tx: Any) -> None:
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES (?, '', ?)", value, _now()
        )

    await c.db.transaction(body)


async def transaction_rollback(c: ActionContext, value: str) -> None:
    async def body(tx: Any) -> None:
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES (?, '', ?)", value, _now()
        )
        raise RuntimeError("expected rollback")

    try:
        await c.db.transaction(body)
    except RuntimeError as exc:
        if str(exc) != "expected rollback":
            raise


async def transaction_with_timeout(c: ActionContext, timeout_ms: int) -> None:
    async def body(tx: Any) -> None:
        await tx.execute("SELECT 1")

    await c.db.transaction(body, timeout=timeout_ms / 1000)


async def transaction_exec(c: ActionContext) -> list[str]:
    async def body(tx: Any) -> None:
        await tx.execute(
            f"""
            INSERT INTO test_data (value, payload, created_at) VALUES ('exec-first', '', {_now()});
            INSERT INTO test_data (value, payload, created_at) VALUES ('exec-second', '', {_now()});
            """
        )

    await c.db.transaction(body)
    return [row["value"] for row in await c.db.execute("SELECT value FROM test_data ORDER BY id")]


async def transaction_automatic_rollback(c: ActionContext) -> list[dict[str, Any]]:
    await c.db.execute(
        """
        CREATE TABLE IF NOT EXISTS transaction_rollback_probe (
            id INTEGER PRIMARY KEY,
            value TEXT NOT NULL
        );
        DELETE FROM transaction_rollback_probe;
        """
    )

    async def body(tx: Any) -> None:
        await tx.execute("INSERT INTO transaction_rollback_probe(id, value) VALUES (1, 'first')")
        await tx.execute(
            "INSERT OR ROLLBACK INTO transaction_rollback_probe(id, value) VALUES (1, 'duplicate')"
        )

    with contextlib.suppress(PerdureError):  # SQLite's ROLLBACK policy ended it already
        await c.db.transaction(body)
    await c.db.execute("INSERT INTO transaction_rollback_probe(id, value) VALUES (2, 'after')")
    return await c.db.execute("SELECT id, value FROM transaction_rollback_probe ORDER BY id")


async def concurrent_transactions(c: ActionContext) -> list[str]:
    started = asyncio.Event()

    async def first(tx: Any) -> None:
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES ('first-start', '', ?)",
            _now(),
        )
        started.set()
        await asyncio.sleep(0.02)
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES ('first-end', '', ?)",
            _now(),
        )

    def inserting(value: str) -> Any:
        async def body(tx: Any) -> None:
            await tx.execute(
                "INSERT INTO test_data (value, payload, created_at) VALUES (?, '', ?)",
                value,
                _now(),
            )

        return body

    first_done = asyncio.ensure_future(c.db.transaction(first))
    await started.wait()
    await asyncio.gather(
        first_done,
        c.db.transaction(inserting("second")),
        c.db.transaction(inserting("third")),
    )
    return [row["value"] for row in await c.db.execute("SELECT value FROM test_data ORDER BY id")]


async def transaction_parks_ordinary_sql(c: ActionContext) -> list[str]:
    started = asyncio.Event()

    async def body(tx: Any) -> None:
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES ('tx-start', '', ?)",
            _now(),
        )
        started.set()
        await asyncio.sleep(0.02)
        await tx.execute(
            "INSERT INTO test_data (value, payload, created_at) VALUES ('tx-end', '', ?)",
            _now(),
        )

    async def ordinary() -> None:
        await started.wait()
        await _insert(c, "ordinary")

    await asyncio.gather(c.db.transaction(body), ordinary())
    return [row["value"] for row in await c.db.execute("SELECT value FROM test_data ORDER BY id")]


async def transaction_deadlock_diagnostic(c: ActionContext, nested: bool) -> str:
    async def body(tx: Any) -> None:
        if nested:
            await tx.transaction(lambda _: None)
        else:
            await c.db.execute("SELECT 1")

    try:
        await c.db.transaction(body, timeout=0.05)
    except PerdureError as exc:
        return exc.message
    return "unexpected success"


async def terminal_transaction_diagnostic(c: ActionContext) -> str:
    captured: list[Any] = []

    async def body(tx: Any) -> None:
        captured.append(tx)
        await tx.execute("SELECT 1")

    await c.db.transaction(body)
    try:
        await captured[0].execute("SELECT 1")
    except PerdureError as exc:
        return exc.message
    return "unexpected success"


async def manual_transaction_compatibility(c: ActionContext) -> int:
    await c.db.execute("BEGIN")
    try:
        await _insert(c, "manual-compatible")
        await c.db.execute("COMMIT")
    except BaseException:
        await c.db.execute("ROLLBACK")
        raise
    rows = await c.db.execute(
        "SELECT count(*) AS count FROM test_data WHERE value = 'manual-compatible'"
    )
    return int(rows[0]["count"])


async def insert_payload_of_size(c: ActionContext, size: int) -> dict[str, int]:
    await _insert(c, "payload", "x" * size)
    rows = await c.db.execute("SELECT last_insert_rowid() AS id")
    return {"id": rows[0]["id"], "size": size}


async def get_payload_size(c: ActionContext, row_id: int) -> int:
    rows = await c.db.execute("SELECT length(payload) AS size FROM test_data WHERE id = ?", row_id)
    return int(rows[0]["size"]) if rows else 0


async def insert_payload_rows(c: ActionContext, count: int, payload_size: int) -> dict[str, int]:
    for i in range(max(0, count)):
        await _insert(c, f"bulk-{i}", "x" * max(0, payload_size))
    return {"count": max(0, count)}


async def round_robin_update_values(
    c: ActionContext, row_ids: list[int], iterations: int
) -> list[dict[str, Any]]:
    ids = list(dict.fromkeys(int(i) for i in row_ids if int(i) > 0))
    if not ids or iterations <= 0:
        return []

    async def body(tx: Any) -> None:
        for i in range(iterations):
            await tx.execute(
                "UPDATE test_data SET value = ? WHERE id = ?", f"v-{i}", ids[i % len(ids)]
            )

    await c.db.transaction(body)
    marks = ",".join(str(i) for i in ids)
    return await c.db.execute(f"SELECT id, value FROM test_data WHERE id IN ({marks}) ORDER BY id")


async def get_page_count(c: ActionContext) -> int:
    rows = await c.db.execute("PRAGMA page_count")
    return int(next(iter(rows[0].values())))


async def vacuum(c: ActionContext) -> None:
    await c.db.execute("PRAGMA incremental_vacuum")


async def integrity_check(c: ActionContext) -> str:
    rows = await c.db.execute("PRAGMA integrity_check")
    return str(next(iter(rows[0].values())))


async def run_mixed_workload(c: ActionContext, seed_count: int, churn_count: int) -> None:
    seeds, churn, now = max(1, seed_count), max(0, churn_count), _now()
    upsert = "INSERT OR REPLACE INTO test_data (id, value, payload, created_at) VALUES (?, ?, ?, ?)"

    async def body(tx: Any) -> None:
        for i in range(seeds):
            await tx.execute(upsert, i + 1, f"seed-{i}", "x" * (1024 + (i % 5) * 128), now)
        for i in range(churn):
            row_id = i % seeds + 1
            if i % 9 == 0:
                await tx.execute("DELETE FROM test_data WHERE id = ?", row_id)
            else:
                await tx.execute(upsert, row_id, f"upd-{i}", "x" * (768 + (i % 7) * 96), now + i)

    await c.db.transaction(body)


async def repeat_update(c: ActionContext, row_id: int, count: int) -> dict[str, str]:
    if count <= 0:
        return {"value": ""}
    statements = ["BEGIN"]
    statements += [
        f"UPDATE test_data SET value = 'Updated {i}' WHERE id = {int(row_id)}" for i in range(count)
    ]
    statements.append("COMMIT")
    await c.db.execute("; ".join(statements))
    return {"value": f"Updated {count - 1}"}


async def multi_statement_insert(c: ActionContext, value: str) -> Any:
    await c.db.execute(
        f"BEGIN; INSERT INTO test_data (value, payload, created_at) VALUES ('{value}', '', "
        f"{_now()}); UPDATE test_data SET value = '{value}-updated' WHERE id = "
        "last_insert_rowid(); COMMIT;"
    )
    rows = await c.db.execute("SELECT value FROM test_data ORDER BY id DESC LIMIT 1")
    return rows[0]["value"] if rows else None


def trigger_sleep(c: ActionContext) -> None:
    c.sleep()


db_actor_raw = actor(
    state={"disconnectInsertEnabled": False, "transactionHolding": False},
    db=db(on_migrate=migrate),
    actions={
        "reset": reset,
        "insertValue": insert_value,
        "insertValueAndReadBack": insert_value_and_read_back,
        "getValues": get_values,
        "getValue": get_value,
        "getCount": get_count,
        "rawSelectCount": get_count,
        "insertMany": insert_many,
        "updateValue": update_value,
        "deleteValue": delete_value,
        "transactionCommit": transaction_commit,
        "transactionRollback": transaction_rollback,
        "transactionWithTimeout": transaction_with_timeout,
        "transactionExec": transaction_exec,
        "transactionAutomaticRollback": transaction_automatic_rollback,
        "concurrentTransactions": concurrent_transactions,
        "transactionParksOrdinarySql": transaction_parks_ordinary_sql,
        "transactionDeadlockDiagnostic": transaction_deadlock_diagnostic,
        "terminalTransactionDiagnostic": terminal_transaction_diagnostic,
        "manualTransactionCompatibility": manual_transaction_compatibility,
        "insertPayloadOfSize": insert_payload_of_size,
        "getPayloadSize": get_payload_size,
        "insertPayloadRows": insert_payload_rows,
        "roundRobinUpdateValues": round_robin_update_values,
        "getPageCount": get_page_count,
        "vacuum": vacuum,
        "integrityCheck": integrity_check,
        "runMixedWorkload": run_mixed_workload,
        "repeatUpdate": repeat_update,
        "multiStatementInsert": multi_statement_insert,
        "triggerSleep": trigger_sleep,
        "ping": lambda c: "pong",
    },
    options={"action_timeout": 120, "sleep_timeout": 0.1},
)

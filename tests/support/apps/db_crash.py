"""An actor whose every action writes SQL rows, KV records and a state field, for the
``kill -9`` tests of ``c.db`` (tests/scenarios/crash/test_db_crash.py).

``apply(n)`` inserts ``ROWS`` rows ``(n, i)`` into the table ``ops`` (each ``PAD``
bytes, so the database grows over many pages and B-tree splits), sets ``meta.last``
to ``n``, writes ``KEYS`` KV records ``op:<n>:<i>`` and appends ``n`` to
``state["ops"]``: all of it in one commit. ``audit()`` reads it all back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from perdure import ActionContext, actor, db, setup

ROWS = 2
KEYS = 3
PAD = 700


async def migrate(database: Any) -> None:
    await database.execute(
        "CREATE TABLE IF NOT EXISTS ops (n INTEGER NOT NULL, i INTEGER NOT NULL, pad TEXT, "
        "PRIMARY KEY (n, i));"
        "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY, last INTEGER);"
        "INSERT OR IGNORE INTO meta (id, last) VALUES (1, NULL)"
    )


async def apply(c: ActionContext, n: int) -> int:
    # Other actions of the actor run meanwhile, and a commit may go out at any of their
    # ends: the SQL is one transaction, and the KV and state writes follow its commit
    # with no await in between, so that one commit carries all of the action.
    async with c.db.transaction() as tx:
        for i in range(ROWS):
            await tx.execute("INSERT INTO ops (n, i, pad) VALUES (?, ?, ?)", n, i, "x" * PAD)
        await tx.execute("UPDATE meta SET last = ? WHERE id = 1", n)
    c.kv.put_batch({f"op:{n:08}:{i}": n for i in range(KEYS)})
    c.state["ops"].append(n)
    return n


async def audit(c: ActionContext) -> dict[str, Any]:
    rows = await c.db.execute("SELECT n, count(*) AS c FROM ops GROUP BY n")
    keys = Counter(value for _, value in await c.kv.list("op:"))
    meta = await c.db.execute("SELECT last FROM meta")
    check = await c.db.execute("PRAGMA integrity_check")
    return {
        "ops": c.state["ops"],
        "rows": {str(row["n"]): row["c"] for row in rows},
        "keys": {str(n): count for n, count in keys.items()},
        "last": meta[0]["last"],
        "integrity": check[0]["integrity_check"],
    }


ledger = actor(
    state={"ops": []}, db=db(on_migrate=migrate), actions={"apply": apply, "audit": audit}
)
registry = setup(use={"ledger": ledger})

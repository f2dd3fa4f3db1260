"""PostgreSQL plumbing: connections, the migration lock, and per-schema names.

A deployment lives in one schema (``search_path``). Everything that PostgreSQL scopes to
the whole database rather than to a schema — advisory locks and ``NOTIFY`` channels — gets
a name derived from the schema, so two deployments (or two tests) sharing a database never
lock each other out or wake each other up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from perdure.errors import InternalError
from perdure.store.migrations import (
    LEDGER_POSTGRES,
    MIGRATIONS,
    Migration,
    check_ledger,
    pending_migrations,
)

__all__ = [
    "apply_postgres_migrations",
    "configure_connection",
    "current_schema",
    "ensure_flush_on_commit",
    "lock_key",
    "pooled",
    "wake_channel",
]

Connection = psycopg.AsyncConnection[Any]


def lock_key(schema: str) -> int:
    """The advisory-lock key guarding migrations of ``schema`` (a signed 64-bit int).

    Computed here rather than with ``hashtext()``, whose results PostgreSQL does not
    promise to keep across major versions: nodes of different versions must agree.
    """
    digest = hashlib.sha256(b"perdure.migrations\x00" + schema.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def wake_channel(schema: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel of ``schema``: short, and a plain identifier."""
    return "perdure_wake_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


async def configure_connection(conn: Connection, schema: str | None) -> None:
    """Point a new connection at ``schema`` (if given); it stays in autocommit mode."""
    if schema is not None:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))


async def current_schema(conn: Connection) -> str:
    """The schema that unqualified ``CREATE TABLE`` would use on this connection."""
    cursor = await conn.execute("SELECT current_schema()")
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        raise InternalError(
            "PostgreSQL has no schema to create perdure's tables in: the search_path names "
            "no existing schema. Pass schema=... (or ?schema= in the URL)."
        )
    name: str = row[0]
    return name


async def apply_postgres_migrations(
    conn: Connection, schema: str | None, migrations: Sequence[Migration] = MIGRATIONS
) -> tuple[str, list[int]]:
    """Apply pending migrations in one transaction; return the schema and the versions.

    ``pg_advisory_xact_lock`` serialises every node migrating the same schema: the second
    one waits, then finds the ledger up to date. The lock is released with the
    transaction, so a node that dies mid-migration leaves neither a lock nor half a schema.
    ``schema`` is created if missing (under the lock: ``CREATE SCHEMA IF NOT EXISTS`` run
    by two sessions at once can still fail).
    """
    check_ledger(migrations)
    async with conn.transaction():
        target = schema if schema is not None else await current_schema(conn)
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(target),))
        if schema is not None:
            cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            if await cursor.fetchone() is None:
                await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        await conn.execute(LEDGER_POSTGRES)
        cursor = await conn.execute("SELECT version FROM perdure_migrations")
        applied = [row[0] for row in await cursor.fetchall()]
        todo = pending_migrations(applied, migrations)
        for migration in todo:
            # A script of several statements, sent without parameters (the simple query
            # protocol runs them all). It comes from the ledger, never from user input.
            await conn.execute(migration.postgres)
            await conn.execute(
                "INSERT INTO perdure_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.version, migration.name, time.time_ns() // 1_000_000),
            )
    return target, [migration.version for migration in todo]


@contextlib.asynccontextmanager
async def pooled(pool: AsyncConnectionPool[Connection]) -> AsyncIterator[Connection]:
    """``pool.connection()``, without losing a cancellation that lands as it is served.

    psycopg_pool waits for a free connection with ``asyncio.wait_for``, which on Python
    3.11 returns the result instead of raising when the cancellation and the connection
    arrive together (fixed in 3.12). The caller would then go on as if never cancelled.
    """
    task = asyncio.current_task()
    requested = 0 if task is None else task.cancelling()
    async with pool.connection() as conn:
        if task is not None and task.cancelling() > requested:
            raise asyncio.CancelledError
        yield conn


async def ensure_flush_on_commit(conn: Connection) -> None:
    """For ``durability="power"``: every commit must be flushed to disk before it returns."""
    cursor = await conn.execute(
        "SELECT current_setting('fsync'), current_setting('synchronous_commit')"
    )
    row = await cursor.fetchone()
    assert row is not None
    fsync, synchronous_commit = row
    if fsync != "on":
        raise InternalError(
            "durability='power' needs a PostgreSQL server running with fsync=on "
            f"(this one has fsync={fsync})."
        )
    if synchronous_commit == "off":
        await conn.execute("SET synchronous_commit TO on")

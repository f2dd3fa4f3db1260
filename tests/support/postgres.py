"""PostgreSQL for tests: where the server is, one fresh schema per test, skip or fail.

The server is ``$PERDURE_TEST_POSTGRES_URL`` (default: the local one, user ``postgres``,
database ``test``). When it does not answer, PostgreSQL tests are skipped — except in CI
(``CI=true``), where they fail: there, PostgreSQL is required.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
from functools import cache

import psycopg
import pytest
from psycopg import sql

from perdure.store.postgres.store import PostgresStore

__all__ = [
    "POSTGRES_URL",
    "control_local_postgres",
    "drop_schema",
    "new_schema_name",
    "postgres_store",
    "require_local_postgres",
    "require_postgres",
    "wait_postgres",
]

POSTGRES_URL = os.environ.get(
    "PERDURE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@cache
def _unavailable() -> str | None:
    """Why the server cannot be used, or ``None`` if it answers (asked once per run)."""
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at $PERDURE_TEST_POSTGRES_URL ({POSTGRES_URL}) is not reachable: {exc}"
    return None


def require_postgres() -> None:
    """Skip the test if no server answers; fail it instead when ``CI=true``."""
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} — PostgreSQL tests are required in CI.", pytrace=False)
    pytest.skip(reason)


def schema_url(schema: str) -> str:
    """The test server's URL, pointed at ``schema`` (perdure's ``schema=`` parameter)."""
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}schema={schema}"


def new_schema_name() -> str:
    """A schema name no other test uses."""
    return f"perdure_test_{secrets.token_hex(6)}"


def drop_schema(schema: str) -> None:
    """Drop a test's schema and everything in it (no error if it was never created)."""
    if _unavailable() is not None:
        return
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def postgres_store(schema: str, **options: object) -> PostgresStore:
    """An unopened store on the test server in ``schema`` (small pool: tests are many)."""
    options.setdefault("pool_max", 4)
    return PostgresStore(POSTGRES_URL, schema=schema, **options)  # type: ignore[arg-type]


def require_local_postgres() -> None:
    """Skip unless the test server is this machine's and ``pg_ctlcluster`` can stop it
    (tests that stop, kill or restart the database itself)."""
    require_postgres()
    if shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        pytest.skip("needs a local PostgreSQL cluster (pg_ctlcluster)")
    if "127.0.0.1" not in POSTGRES_URL and "localhost" not in POSTGRES_URL:
        pytest.skip("the test PostgreSQL is not this machine's")


def control_local_postgres(action: str, *options: str, check: bool = True) -> None:
    """``pg_ctlcluster <version> main <action> [options]`` on the local cluster, e.g.
    ``("stop", "-m", "immediate")`` (the server killed: no shutdown checkpoint, crash
    recovery at the next start), ``("start",)`` or ``("restart",)``. ``check=False``
    ignores a failure (``start`` fails when the server is already running)."""
    version = sorted(os.listdir("/etc/postgresql"))[0]
    command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action, *options]
    subprocess.run(command, check=check, timeout=60, capture_output=True)


async def wait_postgres(timeout: float = 60.0) -> None:
    """Wait until the test server accepts connections again."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(POSTGRES_URL)
            except psycopg.Error:
                await asyncio.sleep(0.25)
                continue
            await connection.close()
            return

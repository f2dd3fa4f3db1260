"""A workflow test rig: a runtime on a real database that can be restarted.

The database is a SQLite file, or a PostgreSQL schema when ``postgres_schema`` is given.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from perdure import ActorRuntime, Registry, WorkflowContext, setup, workflow
from perdure.runtime import Clock
from perdure.runtime.local.client import LocalHandle
from perdure.store import SQLiteStore, Store
from perdure.workflows.engine import WorkflowRunner
from tests.support import wait
from tests.support.postgres import (
    POSTGRES_URL,
    drop_schema,
    new_schema_name,
    postgres_store,
    require_postgres,
)

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""The params of a rig fixture: ``@pytest.fixture(params=BACKENDS)``."""


class Rig:
    """Starts, stops and restarts a runtime on one database."""

    def __init__(
        self, path: Path, registry: Registry, *, postgres_schema: str | None = None
    ) -> None:
        self.path = path
        self.registry = registry
        self.postgres_schema = postgres_schema
        self.runtime: ActorRuntime | None = None
        self.clock: Clock | None = None  # the runtime's clock (None: the system's)

    def _store(self) -> Store:
        if self.postgres_schema is not None:
            return postgres_store(self.postgres_schema)
        return SQLiteStore(self.path)

    async def start(self, registry: Registry | None = None) -> ActorRuntime:
        if registry is not None:
            self.registry = registry
        self.runtime = ActorRuntime(self.registry, self._store(), clock=self.clock)
        await self.runtime.start()
        return self.runtime

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()
            self.runtime = None

    async def restart(self, registry: Registry | None = None) -> ActorRuntime:
        await self.stop()
        return await self.start(registry)

    def handle(self, name: str, key: str = "k") -> LocalHandle:
        assert self.runtime is not None
        return self.runtime.client().actor(name).get_or_create(key)

    async def wake(self, name: str, key: str = "k") -> str:
        """Create or wake the actor (so its workflow runs) and return its id."""
        assert self.runtime is not None
        actor_id = await self.handle(name, key).resolve()
        await self.runtime.instance(actor_id)
        return actor_id

    async def runner(self, name: str, key: str = "k") -> WorkflowRunner:
        """The live workflow runner of actor ``name`` (woken if asleep)."""
        assert self.runtime is not None
        instance = await self.runtime.instance(await self.handle(name, key).resolve())
        assert instance.workflow is not None
        return instance.workflow

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database directly (a separate connection, as another process would).

        ``query`` uses ``?`` placeholders, whatever the database.
        """
        if self.postgres_schema is not None:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                schema = sql.Identifier(self.postgres_schema)
                conn.execute(sql.SQL("SET search_path TO {}").format(schema))
                return list(conn.execute(query.replace("?", "%s"), params))  # type: ignore[arg-type]
        with sqlite3.connect(self.path) as connection:
            return list(connection.execute(query, params))

    def execute(self, statement: str, *params: Any) -> None:
        """Change the database directly (``?`` placeholders), as another process would."""
        if self.postgres_schema is not None:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                schema = sql.Identifier(self.postgres_schema)
                conn.execute(sql.SQL("SET search_path TO {}").format(schema))
                conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
            return
        with sqlite3.connect(self.path) as connection:
            connection.execute(statement, params)


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Wait until ``check()`` is true, or fail after ``timeout`` seconds."""
    await wait.eventually(check, timeout=timeout, interval=interval)


@contextlib.asynccontextmanager
async def rig_on(backend: str, path: Path) -> AsyncIterator[Rig]:
    """A rig on ``backend`` (``sqlite``: a file at ``path``; ``postgres``: a schema of
    its own, dropped after), stopped after; tests start it with their registry."""
    schema = None
    if backend == "postgres":
        require_postgres()
        schema = new_schema_name()
    rig = Rig(path, setup(use={"placeholder": workflow(run=_noop)}), postgres_schema=schema)
    try:
        yield rig
    finally:
        await rig.stop()
        if schema is not None:
            drop_schema(schema)


async def _noop(ctx: WorkflowContext) -> None:
    return None

"""Shared pieces of the runtime tests: store backends, runtimes, and bounded waiting.

Every runtime test runs on the memory store, on a real SQLite file and on PostgreSQL. A
:class:`StoreFactory` hands out store objects over one backing database, so a test can
"restart" by stopping a runtime and starting another one on a *new* store object that
finds the same data (for SQLite: a new ``SQLiteStore`` on the same path; for PostgreSQL:
a new ``PostgresStore`` on the test's schema).

It is also a pytest plugin (listed in tests/conftest.py), so its fixtures serve every
folder: ``stores`` (each test runs on memory, on a SQLite file and on PostgreSQL),
``sqlite_stores``, ``make_runtime`` and ``make_sqlite_runtime``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from perdure.registry import Registry
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.store import MemoryStore, SQLiteStore, Store
from perdure.store.encoding import decode_value
from tests.support import wait
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

__all__ = [
    "WAIT",
    "RuntimeFactory",
    "StoreFactory",
    "StoreKind",
    "eventually",
    "read_state_from_disk",
    "stored_state",
]

StoreKind = Literal["memory", "sqlite", "postgres"]

# The longest any test waits for something to happen: generous for a loaded CI machine,
# short enough that a hang fails fast instead of eating the suite's time budget.
WAIT = 5.0


class StoreFactory:
    """New store objects over one backing database (see the module docstring)."""

    def __init__(self, kind: StoreKind, directory: Path) -> None:
        self.kind = kind
        self.path = directory / "perdure.db"
        # A MemoryStore keeps its data across close()/open(), but not across objects:
        # "reopening" it means opening the same object again.
        self._memory = MemoryStore()
        # For PostgreSQL: this test's own schema, dropped by the fixture afterwards.
        self.schema = new_schema_name()

    def __call__(self) -> Store:
        if self.kind == "memory":
            return self._memory
        if self.kind == "postgres":
            return postgres_store(self.schema)
        return SQLiteStore(self.path)


class RuntimeFactory:
    """Starts runtimes for a test and stops whatever the test left running."""

    def __init__(self, stores: StoreFactory) -> None:
        self.stores = stores
        self._started: list[ActorRuntime] = []

    async def __call__(self, registry: Registry, store: Store | None = None) -> ActorRuntime:
        """A started runtime on ``store`` (default: a new store over the test's database)."""
        runtime = ActorRuntime(registry, store if store is not None else self.stores())
        await runtime.start()
        self._started.append(runtime)
        return runtime

    async def close(self) -> None:
        """Stop every runtime (``stop`` is idempotent, so stopped ones are no-ops)."""
        for runtime in self._started:
            async with asyncio.timeout(WAIT):
                await runtime.stop()


async def eventually(
    predicate: Callable[[], bool], *, timeout: float = WAIT, what: str = "condition"
) -> None:
    """Poll ``predicate`` until it holds; fail the test after ``timeout`` seconds."""
    await wait.eventually(predicate, timeout=timeout, what=what)


async def stored_state(runtime: ActorRuntime, actor_id: str) -> Any:
    """The actor's state as the runtime's store holds it (``None`` if never written)."""
    record = await runtime.store.get_actor(actor_id)
    assert record is not None, f"actor {actor_id} is not in the store"
    return None if record.state is None else decode_value(record.state)


def read_state_from_disk(path: Path, actor_id: str) -> Any:
    """The actor's state read through a separate sqlite3 connection (not the store's).

    What this sees is what another process, or this one after ``kill -9``, would find.
    """
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT state FROM actors WHERE actor_id = ?", (actor_id,)).fetchone()
    finally:
        db.close()
    assert row is not None, f"actor {actor_id} is not in {path.name}"
    return None if row[0] is None else decode_value(row[0])


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Store objects over this test's database, on the backend under test."""
    kind: StoreKind = request.param
    if kind == "postgres":
        require_postgres()
    factory = StoreFactory(kind, tmp_path)
    try:
        yield factory
    finally:
        if kind == "postgres":
            drop_schema(factory.schema)


@pytest.fixture
def sqlite_stores(tmp_path: Path) -> StoreFactory:
    """For the tests that need a real file to look at from outside the runtime."""
    return StoreFactory("sqlite", tmp_path)


@pytest.fixture
async def make_runtime(stores: StoreFactory) -> AsyncIterator[RuntimeFactory]:
    """Start runtimes with ``await make_runtime(registry)``; all are stopped afterwards."""
    factory = RuntimeFactory(stores)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
async def make_sqlite_runtime(sqlite_stores: StoreFactory) -> AsyncIterator[RuntimeFactory]:
    """Like ``make_runtime``, always on a SQLite file (``factory.stores.path``)."""
    factory = RuntimeFactory(sqlite_stores)
    try:
        yield factory
    finally:
        await factory.close()

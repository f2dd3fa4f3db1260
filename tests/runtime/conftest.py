"""Fixtures of the runtime tests: each test runs on memory, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ..support.postgres import drop_schema, require_postgres
from .harness import RuntimeFactory, StoreFactory, StoreKind


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

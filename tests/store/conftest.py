"""The ``store`` fixture: every contract test runs once per backend.

Adding a backend is one entry in ``BACKENDS``: a factory that builds an unopened store
(and may call ``pytest.skip`` when its server is not reachable). A factory with a
``cleanup(tmp_path)`` method has it called after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from perdure.store import MemoryStore, SQLiteStore, Store
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

StoreFactory = Callable[[Path], Store]


def _memory(tmp_path: Path) -> Store:
    return MemoryStore()


def _sqlite(tmp_path: Path) -> Store:
    return SQLiteStore(tmp_path / "store.db")


class _Postgres:
    """Stores in a fresh schema per test; every store of one test shares that schema."""

    def __init__(self) -> None:
        self._schemas: dict[Path, str] = {}

    def __call__(self, tmp_path: Path) -> Store:
        require_postgres()
        schema = self._schemas.setdefault(tmp_path, new_schema_name())
        return postgres_store(schema)

    def cleanup(self, tmp_path: Path) -> None:
        schema = self._schemas.pop(tmp_path, None)
        if schema is not None:
            drop_schema(schema)


BACKENDS = [
    pytest.param(_memory, id="memory"),
    pytest.param(_sqlite, id="sqlite"),
    pytest.param(_Postgres(), id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Builds an unopened store of the backend under test (for lifecycle tests)."""
    factory: StoreFactory = request.param
    try:
        yield factory
    finally:
        cleanup = getattr(factory, "cleanup", None)
        if cleanup is not None:
            cleanup(tmp_path)


@pytest.fixture
async def store(store_factory: StoreFactory, tmp_path: Path) -> AsyncIterator[Store]:
    """An open store of the backend under test, closed after the test."""
    instance = store_factory(tmp_path)
    await instance.open()
    try:
        yield instance
    finally:
        await instance.close()

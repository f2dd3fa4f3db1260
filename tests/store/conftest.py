"""The ``store`` fixture: every contract test runs once per backend.

Adding a backend is one entry in ``BACKENDS``: a factory that builds an unopened store
(and may call ``pytest.skip`` when its server is not reachable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from perdure.store import MemoryStore, SQLiteStore, Store

StoreFactory = Callable[[Path], Store]


def _memory(tmp_path: Path) -> Store:
    return MemoryStore()


def _sqlite(tmp_path: Path) -> Store:
    return SQLiteStore(tmp_path / "store.db")


BACKENDS = [
    pytest.param(_memory, id="memory"),
    pytest.param(_sqlite, id="sqlite"),
]


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    """Builds an unopened store of the backend under test (for lifecycle tests)."""
    factory: StoreFactory = request.param
    return factory


@pytest.fixture
async def store(store_factory: StoreFactory, tmp_path: Path) -> AsyncIterator[Store]:
    """An open store of the backend under test, closed after the test."""
    instance = store_factory(tmp_path)
    await instance.open()
    try:
        yield instance
    finally:
        await instance.close()

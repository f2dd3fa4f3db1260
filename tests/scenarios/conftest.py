"""Fixtures shared by several scenario folders (the crash and lease tests' store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import drop_schema, new_schema_name, require_postgres, schema_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_args(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The server's store: SQLite in its data directory, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield []
        return
    require_postgres()
    schema = new_schema_name()
    try:
        yield ["--store", schema_url(schema)]
    finally:
        drop_schema(schema)

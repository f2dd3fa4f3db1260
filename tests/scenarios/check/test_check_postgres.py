"""``perdure check --store postgresql://…`` against a store the old code wrote through a
real ``perdure serve`` on PostgreSQL (skipped locally without a server; required in CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tests.support.postgres import (
    POSTGRES_URL,
    drop_schema,
    new_schema_name,
    require_postgres,
    schema_url,
)

from .conftest import Stored, drive_old_code, fill_store, runs

_TABLES = ("actors", "workflow_history", "queue_messages")


def _contents(schema: str) -> dict[str, Any]:
    """Every row of the tables the check reads (and could write), in a fixed order."""
    found: dict[str, Any] = {}
    with psycopg.connect(POSTGRES_URL) as conn:
        for table in _TABLES:
            query = sql.SQL("SELECT t::text FROM {}.{} t ORDER BY 1").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            found[table] = [row[0] for row in conn.execute(query).fetchall()]
    return found


def test_check_on_postgresql(tmp_path: Path) -> None:
    require_postgres()
    schema = new_schema_name()
    try:
        _check_on_postgresql(schema, tmp_path)
    finally:
        drop_schema(schema)


def _check_on_postgresql(schema: str, tmp_path: Path) -> None:
    url = schema_url(schema)
    work = tmp_path / "work"
    work.mkdir()
    stored = Stored(tmp_path / "data", work)
    fill_store("old", stored, drive_old_code, ["--store", url])
    before, ran = _contents(schema), runs(work, "midloop")
    assert before["workflow_history"], "the old code stored no history"

    report, status = stored.check_json("same", store=url)
    assert status == 0, report
    assert report["workflows"] == 6, report
    assert report["outcomes"]["fails"] == 1, report
    report, status = stored.check_json("renamed", store=url)
    assert status == 1, report
    keys = {finding["key"][0] for finding in report["problems"]}
    assert keys == {"waiting", "midloop", "sleeping"}, report
    assert all(finding["location"] == "b" for finding in report["problems"])

    assert _contents(schema) == before, "the check changed the database"
    assert runs(work, "midloop") == ran, "a step body ran"

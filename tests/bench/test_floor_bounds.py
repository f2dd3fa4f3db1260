"""``bench/floor_bounds.py`` times perdure's own statements straight on the database; these
checks keep it in step with the store code it borrows (the bench itself verifies that
every timed commit wrote its rows, so a statement that silently wrote nothing fails)."""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pytest

from tests.support.postgres import drop_schema, new_schema_name, require_postgres, schema_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import floor_bounds


def test_step_sql_commits_one_history_row_per_step() -> None:
    figure = floor_bounds.step_sql_us(50)
    assert math.isfinite(figure)
    assert figure > 0


@pytest.mark.postgres
def test_postgres_bounds_apply_the_progress_commit() -> None:
    require_postgres()
    schema = new_schema_name()
    try:
        figures = asyncio.run(floor_bounds.postgres_bounds(schema_url(schema), 50))
    finally:
        drop_schema(schema)
    assert set(figures) == {"pg_commit_us", "pg_progress_commit_us"}
    assert all(math.isfinite(value) and value > 0 for value in figures.values())

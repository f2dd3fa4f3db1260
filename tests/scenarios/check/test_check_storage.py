"""``perdure check`` on actors that keep data in ``c.kv`` and ``c.db`` (SQLite store
written by a real server): their KV records and database pages, kept in the same KV
space as the engine's own records, neither fail nor confuse the replay. Unchanged code
passes; the workflow whose steps used ``step.kv`` continues from its frontier."""

from __future__ import annotations

from pathlib import Path

import pytest

from perdure.client import Client

from .conftest import Stored, fill_store, wait_for

APP = "tests.support.apps.db_view:storage"


def _drive(url: str, work: Path) -> None:
    with Client(url) as client:
        notes = client.notes.get_or_create("n")
        for index in range(3):
            notes.add(f"note {index}")
        stash = client.stash.get_or_create("s")
        stash.ping()
        wait_for(lambda: stash.workflow_status()["status"] == "running", "stash waiting")


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    root = tmp_path_factory.mktemp("check-storage")
    stored = Stored(root / "data", root / "work")
    stored.work.mkdir()
    fill_store(APP, stored, _drive)
    return stored


def test_unchanged_code_passes_with_kv_and_db(stored: Stored) -> None:
    report, status = stored.check_json(APP)
    assert status == 0, report
    assert report["problems"] == [], report
    assert report["warnings"] == [], report
    assert report["actors"] == 2, report
    assert report["workflows"] == 1, report
    assert report["outcomes"] == {"continues": 1}, report

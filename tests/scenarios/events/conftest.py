"""A real ``perdure serve`` of tests/scenarios/events/app.py on SQLite, one per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

REGISTRY = "tests.scenarios.events.app:registry"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A started server (SQLite in ``tmp_path``); killed at the end if still running."""
    process = ServerProcess(REGISTRY, tmp_path / "data")
    process.start()
    try:
        yield process
    finally:
        if process.running:
            process.kill()

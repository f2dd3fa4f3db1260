"""The ``server`` fixture of the workflow scenarios: a real ``perdure serve`` of the test
module's ``REGISTRY`` on SQLite, killed after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of ``request.module.REGISTRY``, with its data under ``tmp_path``."""
    registry: str = request.module.REGISTRY
    process = ServerProcess(registry, tmp_path / "data", extra_args=["--log-level", "warning"])
    process.start()
    try:
        yield process
    finally:
        process.kill()

"""A real ``perdure serve`` of :mod:`tests.scenarios.models.app` for the typed-model tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

REGISTRY = "tests.scenarios.models.app:registry"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of this test alone, on its own data directory (it may restart it)."""
    process = ServerProcess(REGISTRY, tmp_path / "data", extra_args=["--log-level", "warning"])
    process.start()
    try:
        yield process
    finally:
        if process.running:
            process.terminate()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A key no other test uses."""
    return f"{request.node.name}-{time.monotonic_ns()}".replace(",", "-")

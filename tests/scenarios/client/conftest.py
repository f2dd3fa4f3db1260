"""A real ``perdure serve`` subprocess for the client tests.

``server`` is shared by the tests of a module (each test uses its own actor keys);
``fresh_server`` belongs to one test, which may kill and restart it on the same port and
data directory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess as _ServerProcess
from tests.support.server import free_port

__all__ = ["REGISTRY", "ServerProcess", "free_port"]

REGISTRY = "tests.scenarios.client.app:registry"


class ServerProcess(_ServerProcess):
    """The client test registry on a data directory (same port across restarts)."""

    def __init__(self, data: Path) -> None:
        super().__init__(REGISTRY, data, extra_args=["--log-level", "warning"])

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM) if it runs; kill it if that takes too long."""
        if self.running:
            self.terminate()
        else:
            self.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server shared by the tests of one module."""
    process = ServerProcess(tmp_path_factory.mktemp("perdure-data"))
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of this test alone (it may kill and restart it)."""
    process = ServerProcess(tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A key no other test uses (the module's server is shared)."""
    return f"{request.node.name}-{time.monotonic_ns()}".replace(",", "-")

"""Real ``perdure serve`` processes of ``tests.support.apps.leases`` for the lease tests: on SQLite
in their data directory, or on a fresh PostgreSQL schema where the store matters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

REGISTRY = "tests.support.apps.leases:registry"
StartServer = Callable[..., ServerProcess]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Starts servers of the lease app (lease seconds, step seconds, store); all are
    killed after the test."""
    started: list[ServerProcess] = []

    def start(lease: float, *, step: float = 0.0, store: list[str] | None = None) -> ServerProcess:
        env = {"PERDURE_LEASE_S": str(lease), "PERDURE_STEP_S": str(step)}
        data = tmp_path / f"data-{len(started)}"
        server = ServerProcess(REGISTRY, data, env=env, extra_args=store or [])
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.kill()

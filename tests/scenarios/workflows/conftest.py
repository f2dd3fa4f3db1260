"""The fixtures of the workflow scenarios, each serving the test module's ``REGISTRY``:
``server``, a real ``perdure serve`` on SQLite, and ``cluster``, three real nodes on
one fresh PostgreSQL schema (with the environment ``cluster_env`` gives them, which a
module may override); all killed after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
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


@pytest.fixture
def cluster_env() -> dict[str, str]:
    """The environment of the ``cluster`` nodes (none of the module's own)."""
    return {}


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, cluster_env: dict[str, str]
) -> Iterator[Cluster]:
    """Three nodes of ``request.module.REGISTRY`` on one PostgreSQL schema, with a short
    lease TTL (2 s): a killed node's actors are taken over quickly."""
    registry: str = request.module.REGISTRY
    nodes = Cluster(registry, 3, base_dir=tmp_path, lease_ttl=2.0, env=cluster_env)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()

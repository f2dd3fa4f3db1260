"""A real ``perdure serve tests.support.apps.admin:registry`` for the admin API tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

REGISTRY = "tests.support.apps.admin:registry"


@pytest.fixture(scope="module")
def causes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the test app looks for the files that make its steps fail."""
    return tmp_path_factory.mktemp("causes")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, causes: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        REGISTRY, tmp_path_factory.mktemp("admin"), env={"ADMIN_TEST_DIR": str(causes)}
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4().hex[:10]}"

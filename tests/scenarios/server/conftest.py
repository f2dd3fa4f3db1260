"""Real ``perdure serve`` subprocesses on free loopback ports, driven by httpx and websockets.

``server`` is one server for the whole session (most tests only add actors with their own
keys); tests that kill or stop the process use ``fresh_server``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .process import ServerProcess


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the session; killed at the end whatever happened."""
    proc = ServerProcess(tmp_path_factory.mktemp("server")).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the test's own (for kill and restart tests); not started yet."""
    proc = ServerProcess(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4().hex[:12]}"

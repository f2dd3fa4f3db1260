"""One real ``perdure serve`` of tests/support/apps/lifecycle.py (SQLite) for the
module: every test uses actors of its own keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

REGISTRY = "tests.support.apps.lifecycle:registry"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A started server; ``PARITY_DIR`` (its data directory's parent) is where
    ``slowStart``'s ``on_destroy`` leaves its mark."""
    folder: Path = tmp_path_factory.mktemp("lifecycle")
    with ServerProcess(REGISTRY, folder / "data", env={"PARITY_DIR": str(folder)}) as process:
        yield process

"""Fixtures shared by the edge tests (each suite's own servers live in its modules)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.server import ServerProcess

from .values_support import serve_values


@pytest.fixture(scope="module")
def values_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``perdure serve tests.scenarios.edge.values_app:registry``, one per test module (the
    decoding, value and error-shape tests)."""
    yield from serve_values(tmp_path_factory)

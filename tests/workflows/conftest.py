"""The ``rig`` fixture of the workflow tests: a runtime on SQLite, then on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .rig import BACKENDS, Rig, rig_on


@pytest.fixture(params=BACKENDS)
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    """A stopped rig on each backend; a test starts it with its registry."""
    async with rig_on(request.param, tmp_path / "wf.db") as opened:
        yield opened

"""Fixtures of the runtime tests on a ManualClock (the alarms in host/, the schedules in
schedules/): a schedule rig (tests/support/schedule_rig.py) on SQLite (and memory).

The runtimes on every store backend (``make_runtime`` …) come from the plugin
:mod:`tests.support.runtimes`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.runtime.schedules.app import GATES, make_registry
from tests.support.schedule_rig import Rig


@pytest.fixture(params=["sqlite", "memory"])
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    """A started runtime on a ManualClock, once per backend."""
    setup = Rig(tmp_path, make_registry(), memory=request.param == "memory")
    await setup.start()
    try:
        yield setup
    finally:
        for gate in GATES.values():
            gate.set()
        GATES.clear()
        await setup.stop()


@pytest.fixture
async def sqlite_rig(tmp_path: Path) -> AsyncIterator[Rig]:
    """A rig on a real SQLite file, for tests that look at the file or restart."""
    setup = Rig(tmp_path, make_registry())
    await setup.start()
    try:
        yield setup
    finally:
        for gate in GATES.values():
            gate.set()
        GATES.clear()
        await setup.stop()

"""An autouse fixture for the tests of ported code: each test sees the one-time porting
warnings afresh. A test module imports it to use it (``from tests.support.porting import
fresh_porting_warnings``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from perdure import _time


@pytest.fixture(autouse=True)
def fresh_porting_warnings() -> Iterator[None]:
    _time._warned.clear()
    yield
    _time._warned.clear()

"""The garbage-collector tuning that ``perdure serve`` applies at start."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from perdure.tuning import DEFAULT_GEN0_THRESHOLD, tune_garbage_collector


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restore_gc")
def test_freezes_what_is_alive_and_raises_the_young_threshold() -> None:
    _, gen1, gen2 = gc.get_threshold()
    kept = [object() for _ in range(10)]
    tune_garbage_collector()
    assert gc.get_threshold() == (DEFAULT_GEN0_THRESHOLD, gen1, gen2)
    assert gc.get_freeze_count() > len(kept)


@pytest.mark.usefixtures("restore_gc")
def test_a_threshold_below_one_is_refused_and_changes_nothing() -> None:
    before = gc.get_threshold()
    with pytest.raises(ValueError, match="gen0_threshold"):
        tune_garbage_collector(0)
    assert gc.get_threshold() == before

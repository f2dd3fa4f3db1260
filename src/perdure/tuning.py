"""Process-wide tuning that a perdure server applies at start (``perdure serve``).

A server holds many long-lived objects (the registry, pydantic validators, actor state,
workflow history), and every workflow step allocates a few dozen short-lived ones. With
Python's default collector thresholds, that mix triggers a young-generation collection
every 700 allocations, and each promotes survivors toward full collections that walk
every long-lived object. Measured on the 100-actor progress benchmark
(``bench/workflow_bench.py c``): collections took 12-15 % of the run by default and under
2 % after :func:`tune_garbage_collector`.

A library must not change process-wide settings behind its user's back, so the runtime
never calls this by itself; programs that embed :class:`~perdure.ActorRuntime` can.
"""

from __future__ import annotations

import gc

__all__ = ["DEFAULT_GEN0_THRESHOLD", "tune_garbage_collector"]

# Young collections every 10,000 net allocations instead of 700: as much work in total
# for short-lived garbage, far less promotion of objects that were about to die anyway.
DEFAULT_GEN0_THRESHOLD = 10_000


def tune_garbage_collector(gen0_threshold: int = DEFAULT_GEN0_THRESHOLD) -> None:
    """Freeze what is alive now and raise the young-generation threshold.

    Call it once the application is loaded (registry imported, store opened): objects
    alive then move to the permanent generation, which collections no longer walk.
    Reference cycles among them are never freed, which suits objects kept for the life
    of the process. The older generations keep Python's default multipliers.
    """
    if gen0_threshold < 1:
        raise ValueError(f"gen0_threshold must be at least 1, not {gen0_threshold}.")
    _, gen1, gen2 = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0_threshold, gen1, gen2)

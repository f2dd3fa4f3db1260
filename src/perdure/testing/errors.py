"""The errors of the test kit: time asked to go back, work that never comes to rest.

A duration or time of the wrong type raises :class:`~perdure.errors.ArgumentError`
(codes ``invalid_duration``, ``invalid_time``), as everywhere in perdure's API.
"""

from __future__ import annotations

from perdure.errors import ArgumentError, PerdureError

__all__ = ["SettleTimeout", "TimeTravelError"]


class TimeTravelError(ArgumentError):
    """``advance_to`` was given a time before ``env.now`` (code ``time_goes_back``): a
    test's clock, like the real one, never goes back."""

    default_code = "time_goes_back"


class SettleTimeout(PerdureError, TimeoutError):
    """The runtime did not come to rest after time moved.

    Codes: ``settle_timeout`` (work still running after the real-time limit: a task that
    never waits for the clock, a store that hangs), ``too_many_timers`` (more timers fired
    in one ``advance`` than its limit: a timer that re-arms itself at once, or a
    fine-grained cron advanced over a long span; advance in smaller steps or raise
    ``max_timers``).
    """

    group = "testing"
    default_code = "settle_timeout"

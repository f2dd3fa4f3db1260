"""The errors of the test kit: misuse of the time controls, and work that never settles."""

from __future__ import annotations

from perdure.errors import PerdureError

__all__ = ["SettleTimeout", "TimeTravelError"]


class TimeTravelError(PerdureError, ValueError):
    """``advance``/``advance_to`` was given a time it cannot move to.

    Codes: ``invalid_duration`` (not a ``timedelta`` or seconds, or negative),
    ``invalid_time`` (not an aware ``datetime``), ``time_goes_back`` (before ``env.now``).
    """

    group = "testing"
    default_code = "invalid_time"


class SettleTimeout(PerdureError, TimeoutError):
    """The runtime did not come to rest after time moved.

    Codes: ``settle_timeout`` (work still running after the real-time limit: an action
    that never returns, a store that hangs), ``too_many_timers`` (more timers fired in one
    ``advance`` than its limit: a timer that re-arms itself at once, or a fine-grained cron
    advanced over a long span; advance in smaller steps or raise ``max_timers``).
    """

    group = "testing"
    default_code = "settle_timeout"

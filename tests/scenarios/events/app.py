"""The registry the event log tests serve: the README's counter, a ticker that emits
events by itself (a timer, no caller), and a counter with a tiny retention window."""

from __future__ import annotations

from typing import Any

from perdure import actor, event, setup


def _increment(c: Any, by: int = 1) -> int:
    c.state["count"] += by
    c.broadcast("changed", c.state["count"])
    return int(c.state["count"])


def _burst(c: Any, n: int) -> int:
    """``n`` events from one action (one commit)."""
    for _ in range(n):
        c.state["count"] += 1
        c.broadcast("changed", c.state["count"])
    return int(c.state["count"])


def _flood(c: Any, n: int, size: int) -> int:
    """``n`` events of ``size`` characters each, from one action."""
    payload = "x" * size
    for _ in range(n):
        c.broadcast("other", payload)
    return n


def _counter(**options: Any) -> Any:
    return actor(
        state={"count": 0},
        events={"changed": event(), "other": event()},
        actions={
            "increment": _increment,
            "burst": _burst,
            "flood": _flood,
            "other": lambda c: c.broadcast("other", "x"),
            # To the calling connection alone: not logged, not numbered.
            "whisper": lambda c: c.conn.send("other", 7),
            "get": lambda c: c.state["count"],
        },
        options={"sleep_timeout": 0.3, **options},
    )


counter = _counter()
# Retention for the gap and bound tests: 20 events, 2 s.
short = _counter(event_log_max_events=20, event_log_max_age=2.0)

registry = setup(use={"counter": counter, "short": short})

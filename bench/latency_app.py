"""The registry ``bench/latency.py`` serves: a counter with a read and a write action."""

from __future__ import annotations

from typing import Any

from perdure import actor, setup


def _increment(c: Any, amount: int = 1) -> int:
    c.state["count"] += amount
    return int(c.state["count"])


def _get(c: Any) -> int:
    return int(c.state["count"])


counter = actor(state={"count": 0}, actions={"increment": _increment, "get": _get})
registry = setup(use={"counter": counter})

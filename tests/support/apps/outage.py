"""The registry of the store-outage tests: ``perdure serve tests.support.apps.outage:registry``.

``ledger`` records every amount ``add`` was given, in order, so after an outage the
stored state shows exactly which writes were applied.
"""

from __future__ import annotations

from typing import Any

from perdure import actor, setup


def _add(c: Any, amount: Any) -> int:
    c.state["entries"].append(amount)
    return len(c.state["entries"])


def _entries(c: Any) -> list[Any]:
    return list(c.state["entries"])


ledger = actor(state={"entries": []}, actions={"add": _add, "entries": _entries})

registry = setup(use={"ledger": ledger})

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

# One action big enough to fill a capped database file (test_disk_full): actions and
# answers up to 4 MiB, above the 64 KiB / 1 MiB message limits of the default.
registry = setup(
    use={"ledger": ledger},
    max_incoming_message_size=4 * 1024 * 1024,
    max_outgoing_message_size=4 * 1024 * 1024,
)

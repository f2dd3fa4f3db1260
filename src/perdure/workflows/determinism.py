"""Deterministic values: ``ctx.now``, ``ctx.random`` and ``ctx.uuid4``, recorded once.

Workflow code outside steps runs again at every replay, so a value it reads from the
clock or a random source would change from one replay to the next. These primitives
draw the value at the first execution, record it in history at a named location (an
entry of kind ``now``, ``random`` or ``uuid4`` whose output ``o``, as a step's, holds
the value in plain form, so the inspector shows it) and return the recorded value on
every replay: after a restart, a wake, a move.

Like every primitive they take a name, unique in its scope, and go through the same
divergence checks: a recorded entry of another kind at that name, or a new one while the
scope still holds recorded entries not reached, is a divergence.

The entry commits before the value is returned, so it is durable before the code can
use it for anything (an idempotency key handed to a step, say): a crash after the call
replays the same value.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

from perdure.workflows.core import RunnerCore
from perdure.workflows.history import Entry
from perdure.workflows.port import WorkflowHost

__all__ = ["DETERMINISTIC_KINDS", "DeterminismPrimitives"]

# How each kind draws its value at the first execution, in the plain form stored.
_DRAWS: dict[str, Callable[[WorkflowHost], Any]] = {
    "now": lambda host: host.now_ms(),  # the actor's clock: a test env's moves with it
    "random": lambda host: random.random(),
    "uuid4": lambda host: str(uuid.uuid4()),
}
DETERMINISTIC_KINDS = frozenset(_DRAWS)


class DeterminismPrimitives(RunnerCore):
    """``ctx.now``, ``ctx.random`` and ``ctx.uuid4``: values drawn once, then replayed."""

    async def deterministic(self, scope: str, name: str, kind: str) -> Any:
        """The value recorded at ``scope/name`` for ``kind`` (drawn and committed the
        first time), in plain form: epoch milliseconds (``now``), a float in [0, 1)
        (``random``) or a UUID's string (``uuid4``)."""
        draw = _DRAWS[kind]
        location, entry = self.expect(scope, name, kind)
        if entry is not None and entry.kind == kind and "o" in entry.data:
            return entry.data["o"]
        # New, or a placeholder of ctx.removed(...) at this name: draw it now.
        value = draw(self.host)
        self.history.record(location, Entry(kind, "completed", data={"o": value}))
        await self.commit()
        return value

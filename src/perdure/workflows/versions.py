"""What keeps a replay the same while code evolves and the world moves on: rollback
checkpoints, ``removed()`` placeholders, ``get_version``, and recorded values.

Recorded values: ``ctx.now``, ``ctx.random`` and ``ctx.uuid4``, recorded once.

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
from perdure.workflows.history import Divergence, Entry, child_location, validate_name
from perdure.workflows.port import WorkflowHost

__all__ = ["DETERMINISTIC_KINDS", "DeterminismPrimitives", "VersionPrimitives"]


class VersionPrimitives(RunnerCore):
    """``ctx.rollback_checkpoint``, ``ctx.removed`` and ``ctx.get_version``."""

    async def rollback_checkpoint(self, scope: str, name: str) -> None:
        """Record a rollback checkpoint (steps after it may have rollback handlers)."""
        location, entry = self.expect(scope, name, "rollback_checkpoint")
        if entry is None:
            self.history.record(location, Entry("rollback_checkpoint", "completed"))
            self.stage()
        self.rollbacks.checkpoint()

    async def removed(self, scope: str, name: str, original_kind: str) -> None:
        """Accept (and skip) an old entry of ``original_kind``, or record a placeholder."""
        self.check_evicted()
        validate_name(name)
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is None:
            self.history.expect(location, "removed")
            self.history.record(location, Entry("removed", "completed", data={"ok": original_kind}))
            self.stage()
            return
        if entry.kind not in (original_kind, "removed"):
            raise Divergence(
                location,
                f"`{location}` is a {entry.kind} in history, not a "
                f"{original_kind}; fix the kind given to removed().",
            )
        self.history.visit_subtree(location)

    async def get_version(self, scope: str, name: str, latest: int) -> int:
        """Resolve a version once per position and record it."""
        self.check_evicted()
        validate_name(name)
        if latest < 1:
            raise ValueError("get_version: latest must be >= 1")
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is not None:
            self.history.expect(location, "version_check")
            return int(entry.data["v"])
        version = 1 if self.history.has_unvisited_below(scope) else latest
        self.history.record(location, Entry("version_check", "completed", data={"v": version}))
        self.stage()
        return version


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

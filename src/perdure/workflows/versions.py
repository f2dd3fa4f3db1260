"""Code evolution: rollback checkpoints, ``removed()`` placeholders and ``get_version``."""

from __future__ import annotations

from perdure.workflows.core import RunnerCore
from perdure.workflows.history import Divergence, Entry, child_location, validate_name

__all__ = ["VersionPrimitives"]


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

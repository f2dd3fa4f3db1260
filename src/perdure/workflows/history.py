"""Workflow history: locations, entries, replay bookkeeping, divergence checks, pruning.

Pure logic: no I/O and no asyncio, so it is tested on its own.

Every workflow primitive (step, loop, sleep, queue receive, join, race, try, removed,
version check, rollback checkpoint, the recorded ``now``/``random``/``uuid4`` values)
owns one *entry* at a *location*: the path of names from the root, with loop iterations
as ``~N`` segments, e.g. ``progress-loop/~3/apply-job``. The location of a primitive's
children is its *scope* (a loop iteration's scope is ``loop/~N``; a join branch's is
``join/branch``).

Replay rule: entries are visited in the order the code reaches them. Creating a *new*
entry in a scope that still has recorded but unvisited entries means the code no longer
matches its history (a step was renamed, reordered or inserted): that is a divergence,
reported before the new entry runs, so no side effect happens under the wrong history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ENTRY_KINDS",
    "ROOT",
    "RUN_ARCHIVE",
    "Divergence",
    "Entry",
    "History",
    "child_location",
    "iteration_scope",
    "parent_scope",
    "run_archive",
    "validate_name",
]

ROOT = ""
ENTRY_KINDS = frozenset(
    {
        "step",
        "loop",
        "sleep",
        "message",
        "join",
        "race",
        "try",
        "removed",
        "version_check",
        "rollback_checkpoint",
        "now",
        "random",
        "uuid4",
        "child",
        "child_result",
    }
)


class Divergence(Exception):
    """History and code disagree; carries the location and advice for the fix."""

    def __init__(self, location: str, message: str) -> None:
        super().__init__(message)
        self.location = location


def validate_name(name: str) -> None:
    """Entry names are non-empty, contain no ``/`` and do not start with ``~``."""
    if not isinstance(name, str) or not name or "/" in name or name.startswith("~"):
        raise ValueError(
            f"Invalid workflow entry name {name!r}: use a non-empty name without `/` "
            "that does not start with `~`."
        )


RUN_ARCHIVE = "~run/"
"""Where a fork archives the runs before it: ``~run/<n>/<location>`` (and
``~run/<n>/~meta``), never loaded as entries of the run."""


def run_archive(run: int) -> str:
    """The location prefix of archived run ``run``."""
    return f"{RUN_ARCHIVE}{run}/"


def child_location(scope: str, name: str) -> str:
    """The location of entry ``name`` inside ``scope``."""
    return name if scope == ROOT else f"{scope}/{name}"


def iteration_scope(loop_location: str, iteration: int) -> str:
    """The scope of one loop iteration."""
    return f"{loop_location}/~{iteration}"


def parent_scope(location: str) -> str:
    """The scope that contains ``location``."""
    head, _, _ = location.rpartition("/")
    return head


@dataclass(slots=True)
class Entry:
    """One history entry. ``data`` holds kind-specific fields (output, deadline, …)."""

    kind: str
    status: str = "pending"
    seq: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """The plain mapping that is stored (CBOR-encoded by the engine)."""
        return {"k": self.kind, "s": self.status, "q": self.seq, "d": self.data}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Entry:
        """Inverse of :meth:`to_record`."""
        return cls(record["k"], record["s"], record.get("q", 0), dict(record.get("d") or {}))


class History:
    """The entries of one workflow, with this execution's visit bookkeeping."""

    def __init__(self, entries: dict[str, Entry] | None = None) -> None:
        self.entries: dict[str, Entry] = dict(entries or {})
        self._children: dict[str, set[str]] = {}
        # Per scope, how many recorded children this execution has not visited yet: keeps
        # the divergence check O(1) per new entry.
        self._unvisited: dict[str, int] = {}
        for location in self.entries:
            scope = parent_scope(location)
            self._children.setdefault(scope, set()).add(location)
            self._unvisited[scope] = self._unvisited.get(scope, 0) + 1
        self._visited: set[str] = set()
        self._next_seq = max((e.seq for e in self.entries.values()), default=0) + 1
        self.dirty: set[str] = set()
        self.deleted: set[str] = set()

    # -------------------------------------------------------------- lookups

    def get(self, location: str) -> Entry | None:
        """The recorded entry at ``location``, or ``None``."""
        return self.entries.get(location)

    def expect(self, location: str, kind: str) -> Entry | None:
        """Visit ``location`` expecting ``kind``; the entry if recorded, else ``None``.

        Raises :class:`Divergence` if the location was already visited in this execution
        (a duplicate name), if the recorded entry is of another kind, or if a new entry is
        being created while its scope still holds unvisited recorded entries.
        """
        if location in self._visited:
            raise Divergence(
                location,
                f"Duplicate workflow entry `{location}`: each name must be unique in its scope.",
            )
        entry = self.entries.get(location)
        if entry is None:
            self._check_scope_complete(parent_scope(location), location)
        elif entry.kind != kind and entry.kind != "removed":
            raise Divergence(
                location,
                f"History diverged at `{location}`: the code asks for a {kind} but history "
                f"holds a {entry.kind}. If the code changed on purpose, keep the old entry "
                f'with ctx.removed("{location.rpartition("/")[2]}", "{entry.kind}") '
                "or guard the change with ctx.get_version(...).",
            )
        self._mark_visited(location)
        return entry

    def _mark_visited(self, location: str) -> None:
        if location in self._visited:
            return
        self._visited.add(location)
        if location in self.entries:
            scope = parent_scope(location)
            self._unvisited[scope] -= 1

    def _check_scope_complete(self, scope: str, new_location: str) -> None:
        if not self._unvisited.get(scope):
            return
        pending = sorted(self.unvisited(scope), key=lambda loc: self.entries[loc].seq)
        if pending:
            raise Divergence(
                pending[0],
                f"History diverged at `{pending[0]}`: it was recorded before, but the code now "
                f"creates `{new_location}` instead. A step was renamed, reordered or inserted. "
                f'If it was removed on purpose, add ctx.removed("{pending[0].rpartition("/")[2]}"'
                f', "{self.entries[pending[0]].kind}") where it was; to change behaviour for '
                "new runs only, use ctx.get_version(...).",
            )

    def unvisited(self, scope: str) -> list[str]:
        """Recorded direct children of ``scope`` not visited in this execution."""
        return [loc for loc in self._children.get(scope, ()) if loc not in self._visited]

    def has_unvisited_below(self, scope: str) -> bool:
        """True if any recorded entry inside ``scope`` (at any depth) is unvisited."""
        prefix = f"{scope}/" if scope else ""
        return any(loc not in self._visited and loc.startswith(prefix) for loc in self.entries)

    def check_complete(self, scope: str) -> None:
        """At the end of a scope every recorded child must have been visited."""
        if not self._unvisited.get(scope):
            return
        pending = self.unvisited(scope)
        if pending:
            first = min(pending, key=lambda loc: self.entries[loc].seq)
            kind = self.entries[first].kind
            raise Divergence(
                first,
                f"History diverged: `{first}` exists in history but the code no longer "
                f'reaches it. If it was removed on purpose, add ctx.removed("'
                f'{first.rpartition("/")[2]}", "{kind}") where it was.',
            )

    def visit_subtree(self, location: str) -> None:
        """Mark an entry and everything below it as visited (used by ``removed``)."""
        prefix = f"{location}/"
        for loc in list(self.entries):
            if loc == location or loc.startswith(prefix):
                self._mark_visited(loc)

    # -------------------------------------------------------------- changes

    def record(self, location: str, entry: Entry) -> Entry:
        """Add or replace the entry at ``location`` and mark it dirty."""
        if location not in self.entries:
            entry.seq = self._next_seq
            self._next_seq += 1
            self._children.setdefault(parent_scope(location), set()).add(location)
            self._visited.add(location)  # new in this execution: never counted as unvisited
        else:
            self._mark_visited(location)
        self.entries[location] = entry
        self.deleted.discard(location)
        self.dirty.add(location)
        return entry

    def touch(self, location: str) -> None:
        """Mark an existing entry as changed."""
        self.dirty.add(location)

    def delete_subtree(self, scope: str) -> list[str]:
        """Delete every entry inside ``scope`` (not the scope's own entry)."""
        prefix = f"{scope}/"
        doomed = [loc for loc in self.entries if loc.startswith(prefix)]
        self._forget(doomed)
        return doomed

    def prune_iterations(self, loop_location: str, keep_from: int) -> list[str]:
        """Delete the entries of iterations ``< keep_from`` of a loop; returns them."""
        prefix = f"{loop_location}/~"
        doomed = []
        for loc in self.entries:
            if loc.startswith(prefix):
                number, _, _ = loc[len(prefix) :].partition("/")
                if number.isdigit() and int(number) < keep_from:
                    doomed.append(loc)
        self._forget(doomed)
        return doomed

    def _forget(self, locations: Iterable[str]) -> None:
        for loc in locations:
            scope = parent_scope(loc)
            if loc not in self._visited:
                self._unvisited[scope] -= 1
            del self.entries[loc]
            children = self._children.get(scope)
            if children is not None:
                children.discard(loc)
            self._visited.discard(loc)
            self.dirty.discard(loc)
            self.deleted.add(loc)

    def take_changes(self) -> tuple[dict[str, Entry], list[str]]:
        """The dirty entries and deleted locations since the last call; resets both."""
        changed = {loc: self.entries[loc] for loc in self.dirty if loc in self.entries}
        deleted = sorted(self.deleted)
        self.dirty.clear()
        self.deleted.clear()
        return changed, deleted

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def backoff_delay(attempts: int, base: float, maximum: float) -> float:
    """Retry delay after ``attempts`` failed attempts: ``min(max, base · 2^attempts)``."""
    return float(min(maximum, base * (2**attempts)))

"""Repairing a workflow's history: retry a failed workflow, or replay it from a step.

Pure planning over the stored entries (no I/O): the runtime stops the workflow, applies
the plan in one commit and starts the workflow again, which then replays its history as
after any restart.

- **Retry** (the workflow ``failed``): every step whose retries were spent
  (``exhausted``) gets a fresh set of attempts. Its earlier errors stay in the entry
  (``errors``, oldest first) for the inspector. A workflow that failed on a divergence
  has nothing to reset: it simply runs again against the (fixed) code. A workflow whose
  rollback handlers ran cannot be retried (its undone steps would count as done): replay
  it from the first undone step.
- **Replay from a step**: the entry at that location and every entry recorded after it
  are deleted, so those steps run again. The entries that contain it (a loop, a join
  branch) stay; a location inside an earlier iteration of a loop, or inside a finished
  loop, join, race or try, cannot be replayed by itself (its container would return its
  recorded result without running it): replay the container instead. Messages that the
  deleted receives had taken go back to the queue, so the replayed receive gets the
  same message rather than waiting for a new one. The actor's state is not rewound:
  replayed steps run against the state as it is now.
- **Fork from a step**: a replay that starts a new run and keeps the old one for the
  record. The old run's status record and every entry it had (those the replay keeps
  too) are archived under ``~run/<n>/`` (:func:`~perdure.workflows.history.run_archive`),
  which the engine never loads; the new run is number ``n + 1``. A fork may give the new
  run its own input (``ctx.input`` reads it; kept in its status record) and, when it
  starts at a receive, the message that receive gets (in place of those it took). A
  fork is a new run: an operator's cancel or pause of the old one does not carry over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perdure.errors import RepairRefused, UnknownLocation
from perdure.workflows.history import Entry, parent_scope, run_archive

__all__ = [
    "RepairPlan",
    "RepairRefused",
    "UnknownLocation",
    "plan_fork",
    "plan_replay",
    "plan_retry",
]


@dataclass(slots=True)
class RepairPlan:
    """What to write: entries to put, locations to delete, messages to requeue (each
    ``{"id", "name", "body", "at"}`` as a receive recorded it) and the new status;
    ``archive``: records to write as they are (a fork's archived run)."""

    puts: dict[str, Entry] = field(default_factory=dict)
    archive: dict[str, Any] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    requeue: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def plan_retry(meta: dict[str, Any], entries: dict[str, Entry]) -> RepairPlan:
    """Reset the exhausted steps of a failed workflow (``workflow.not_failed`` if it has
    not failed)."""
    status = meta.get("status", "pending")
    if status != "failed":
        raise RepairRefused(
            f"The workflow is {status}, not failed: there is nothing to retry.",
            code="not_failed",
            metadata={"status": status},
        )
    _check_not_compensated(entries, keep=entries)
    plan = RepairPlan(meta=_restarted(meta))
    for location, entry in entries.items():
        if entry.kind == "step" and entry.status == "exhausted":
            plan.puts[location] = _fresh_attempts(entry)
    return plan


def plan_replay(meta: dict[str, Any], entries: dict[str, Entry], location: str) -> RepairPlan:
    """Delete the entry at ``location`` and everything recorded after it (see the module
    docstring for what cannot be replayed)."""
    target = entries.get(location)
    if target is None:
        raise UnknownLocation(location)
    _check_containers(entries, location)
    containers = set(_ancestors(location))
    plan = RepairPlan(meta=_restarted(meta))
    for other, entry in entries.items():
        if other in containers or entry.seq < target.seq:
            continue
        plan.deletes.append(other)
        if entry.kind == "message" and entry.status == "completed":
            plan.requeue.extend(entry.data.get("m", []))
    plan.deletes.sort(key=lambda loc: entries[loc].seq)
    deleted = set(plan.deletes)
    _check_not_compensated(
        entries, keep={loc: e for loc, e in entries.items() if loc not in deleted}
    )
    return plan


def plan_fork(
    meta: dict[str, Any], entries: dict[str, Entry], location: str, given: dict[str, Any]
) -> RepairPlan:
    """Archive the run and start the next one from ``location`` (as :func:`plan_replay`
    would); ``given`` may hold the new run's ``input`` and, for a fork at a receive, the
    ``message`` that receive gets."""
    plan = plan_replay(meta, entries, location)
    run = int(meta.get("run", 1))
    prefix = run_archive(run)
    plan.archive = {f"{prefix}{loc}": entry.to_record() for loc, entry in entries.items()}
    plan.archive[f"{prefix}~meta"] = dict(meta)
    fresh = {k: v for k, v in plan.meta.items() if k not in ("cancel", "paused")}
    fresh.update(run=run + 1, forkedFrom={"run": run, "from": location})
    if "input" in given:
        fresh["input"] = given["input"]
    plan.meta = fresh
    if "message" in given:
        _replace_message(plan, entries[location], location, given["message"])
    return plan


def _replace_message(plan: RepairPlan, target: Entry, location: str, body: Any) -> None:
    """The receive at ``location`` gets ``body`` instead of the messages it took."""
    taken = target.data.get("m") or []
    if target.kind != "message" or target.status != "completed" or not taken:
        raise RepairRefused(
            f"`{location}` is not a receive that took a message: a fork gives a new "
            "message only to the receive it starts from.",
            code="fork_unsupported",
            metadata={"location": location},
        )
    ids = {message["id"] for message in taken}
    first = taken[0]
    plan.requeue = [message for message in plan.requeue if message["id"] not in ids]
    plan.requeue.insert(
        0, {"id": first["id"], "name": first["name"], "body": body, "at": first["at"]}
    )


def _check_not_compensated(entries: dict[str, Entry], keep: dict[str, Entry]) -> None:
    """Refuse a repair that would keep a step whose rollback handler has run: replayed, it
    would return its recorded result as if it still held, though it was undone."""
    undone = sorted(
        (entry.seq, location) for location, entry in keep.items() if entry.data.get("rb")
    )
    if undone:
        first = undone[0][1]
        raise RepairRefused(
            f"The workflow rolled back: `{first}` and the steps after it were undone by their "
            f"rollback handlers. Replay from `{first}` (or earlier) so they run again.",
            code="rolled_back",
            metadata={"location": first},
        )


def _restarted(meta: dict[str, Any]) -> dict[str, Any]:
    """The status record of a repaired run: running again, its deadline counted afresh
    from now (a deadline's cancel is dropped with it; an operator's cancel stays)."""
    restarted = {**meta, "status": "running", "error": None, "output": None}
    for clock in ("startedAt", "deadlineAt"):
        restarted.pop(clock, None)
    cancel = restarted.get("cancel")
    if cancel is not None and cancel.get("deadline") is not None:
        del restarted["cancel"]
    return restarted


def _fresh_attempts(entry: Entry) -> Entry:
    data = dict(entry.data)
    errors = list(data.get("errors") or [])
    if data.get("e") is not None:
        errors.append({**data["e"], "attempts": data.get("a", 0)})
    data.update({"a": 0, "errors": errors})
    for spent in ("e", "fk", "r"):
        data.pop(spent, None)
    return Entry(entry.kind, "failed", entry.seq, data)


def _ancestors(location: str) -> list[str]:
    """The entries that contain ``location`` (its loop, join …), innermost first.
    Iteration scopes (``loop/~3``) are not entries and are skipped."""
    found = []
    scope = parent_scope(location)
    while scope:
        if not scope.rpartition("/")[2].startswith("~"):
            found.append(scope)
        scope = parent_scope(scope)
    return found


def _check_containers(entries: dict[str, Entry], location: str) -> None:
    """Refuse a location whose containers would not run it again."""
    scope = parent_scope(location)
    while scope:
        head, _, last = scope.rpartition("/")
        if last.startswith("~"):  # an iteration of the loop at `head`
            loop = entries.get(head)
            iteration = last[1:]
            if loop is None or loop.status == "completed" or str(loop.data.get("i")) != iteration:
                raise RepairRefused(
                    f"`{location}` is in an iteration of loop `{head}` that is over: replaying "
                    f"it alone cannot work. Replay from `{head}` (the whole loop), or from a "
                    "step of its current iteration.",
                    code="replay_unsupported",
                    metadata={"location": location, "container": head},
                )
            scope = head
            continue
        container = entries.get(scope)
        if container is not None and container.status == "completed":
            raise RepairRefused(
                f"`{location}` is inside `{scope}`, which has finished and would return its "
                f"recorded result without running it again. Replay from `{scope}` instead.",
                code="replay_unsupported",
                metadata={"location": location, "container": scope},
            )
        scope = head

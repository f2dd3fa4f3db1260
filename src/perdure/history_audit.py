"""``perdure check``: every stored workflow, replayed against the code about to deploy.

Walks a store read-only (:func:`open_read_only`: a write would be refused by the
database itself) and hands each stored workflow to the judge of
:mod:`perdure.workflows.judge`, which replays it as a restart would, up to its frontier,
running no step body. What it finds is a :class:`CheckReport`; ``perdure.cli.check_command``
prints it.

What counts against a deploy (a *problem*): a workflow that is not finished and would
diverge, or whose replay raises; an actor whose name the registry no longer has while
its workflow is not finished. Finished workflows (completed, failed, cancelled: any
status but pending, running and paused) are replayed too (an operator may replay
them), but their divergences are *warnings* unless ``strict``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perdure.registry import Registry
from perdure.store.base import ActorRecord, Store
from perdure.store.encoding import decode_value
from perdure.store.read_only import open_read_only
from perdure.workflows.core import META_LOCATION
from perdure.workflows.judge import Verdict, judge_history

__all__ = [
    "CheckOptions",
    "CheckReport",
    "Finding",
    "check_store",
    "is_live",
    "open_read_only",
]

PAGE = 500
Progress = Callable[[int, int], None]
# The statuses of a workflow a restart runs on: every other one (completed, failed,
# cancelled, ...) is finished. "unknown" (a status record that cannot be read) counts
# as live: the check cannot tell that it is finished.
LIVE_STATUSES = frozenset({"pending", "running", "paused", "unknown"})


def is_live(status: str) -> bool:
    """True when a workflow of this stored status is not finished."""
    return status in LIVE_STATUSES


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """``timeout``: seconds one replay may take; ``time_limit``: seconds for the whole
    check (what is left is reported as not checked); ``strict``: warnings count too."""

    timeout: float = 10.0
    time_limit: float | None = None
    strict: bool = False


@dataclass(frozen=True, slots=True)
class Finding:
    """One actor the check has something to say about.

    ``kind``: ``diverged``, ``error`` (the replay raises), ``missing`` (no such actor in
    the registry) or ``not_a_workflow`` (a history, but the code defines no workflow).
    ``live``: its workflow is not finished, so a restart would run it.
    """

    kind: str
    actor_id: str
    name: str
    key: tuple[str, ...]
    live: bool
    verdict: Verdict | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The finding as ``--json`` prints it."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "actor_id": self.actor_id,
            "name": self.name,
            "key": list(self.key),
            "live": self.live,
        }
        verdict = self.verdict
        if verdict is not None:
            data.update(
                status=verdict.status,
                location=verdict.location,
                history=verdict.history,
                code=verdict.code,
                fix=verdict.fix,
            )
        data["message"] = self.message if verdict is None else verdict.message
        return data


@dataclass(slots=True)
class CheckReport:
    """What the walk found; ``outcomes`` counts the judge's verdicts by outcome."""

    total: int = 0
    actors: int = 0
    workflows: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    complete: bool = True
    seconds: float = 0.0
    strict: bool = False

    @property
    def problems(self) -> list[Finding]:
        """Findings that fail the check (live ones; all of them when strict)."""
        return [f for f in self.findings if f.live or self.strict]

    @property
    def warnings(self) -> list[Finding]:
        """Findings reported without failing the check."""
        return [f for f in self.findings if not (f.live or self.strict)]

    @property
    def ok(self) -> bool:
        """True when nothing fails the check and every actor was checked."""
        return self.complete and not self.problems


# ------------------------------------------------------------------------------- walking


async def check_store(
    store: Store,
    registry: Registry,
    options: CheckOptions,
    progress: Progress | None = None,
) -> CheckReport:
    """Judge every actor of ``store`` against ``registry`` (the store is only read)."""
    started = time.monotonic()
    report = CheckReport(total=await store.count_actors(), strict=options.strict)
    after: str | None = None
    while report.complete:
        page = await store.list_actors(after=after, limit=PAGE)
        for record in page:
            limit = options.time_limit
            if limit is not None and time.monotonic() - started > limit:
                report.complete = False
                break
            await _check_actor(store, registry, record, options, report)
            report.actors += 1
            if progress is not None:
                progress(report.actors, report.total)
        if len(page) < PAGE:
            break
        after = page[-1].actor_id
    report.seconds = time.monotonic() - started
    return report


async def _check_actor(
    store: Store,
    registry: Registry,
    record: ActorRecord,
    options: CheckOptions,
    report: CheckReport,
) -> None:
    definition = registry.get(record.name)
    raw = await store.load_history(record.actor_id)
    status = _stored_status(raw)
    live = bool(raw) and is_live(status)
    if definition is None or definition.kind != "workflow" or "run" not in definition.hooks:
        if definition is None or raw:  # a plain actor with no history is just that
            kind = "missing" if definition is None else "not_a_workflow"
            message = _absent_message(kind, status if raw else None)
            key = tuple(record.key)
            report.findings.append(
                Finding(kind, record.actor_id, record.name, key, live, None, message)
            )
        return
    report.workflows += 1
    verdict = await _judge(definition, record, raw, options.timeout)
    report.outcomes[verdict.outcome] += 1
    if verdict.problem:
        report.findings.append(
            Finding(
                verdict.outcome,
                record.actor_id,
                record.name,
                tuple(record.key),
                is_live(verdict.status),
                verdict,
            )
        )


async def _judge(
    definition: Any, record: ActorRecord, raw: dict[str, bytes], timeout: float
) -> Verdict:
    work = judge_history(definition, (record.actor_id, record.key), raw, record.state, record.input)
    try:
        return await asyncio.wait_for(work, timeout)
    except TimeoutError:
        return Verdict(
            "error",
            _stored_status(raw),
            message=f"the replay did not reach its frontier within {timeout:g} s",
            fix="a workflow should only await ctx primitives outside its steps",
        )


def _stored_status(raw: dict[str, bytes]) -> str:
    encoded = raw.get(META_LOCATION)
    if encoded is None:
        return "pending"
    try:
        meta = decode_value(encoded)
    except Exception:
        return "unknown"
    return str(meta.get("status", "pending")) if isinstance(meta, dict) else "unknown"


def _absent_message(kind: str, status: str | None) -> str:
    if kind == "missing":
        what = "no workflow" if status is None else f"a {status} workflow"
        return f"the registry has no actor of this name any more (it holds {what})"
    return f"the code defines no workflow for it, but it holds a {status} workflow history"

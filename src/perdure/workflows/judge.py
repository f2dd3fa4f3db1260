"""The pre-deploy judge: replay one stored history against new code, with no side effect.

``perdure check`` asks, for each stored workflow, what a restart on the code about to be
deployed would do. It answers by running the engine's own replay (the primitives of
:class:`~perdure.workflows.engine.WorkflowRunner`, the same divergence checks of
:mod:`perdure.workflows.history`) on a host that stores nothing and runs nothing: the
replay goes on while the code meets recorded entries and stops at the *frontier*, the
first point where a restart would do something (run a step body, wait for a sleep, take
a message, complete one). Stopping there means "would continue fine"; a divergence
raised before it is what the restart would fail with.

Two things the engine would only find later are found here too:

- entries the replay went past without reaching (a removed or moved step: recorded
  before an entry the code has already replayed in the same scope, yet not reached).
  The engine fails on them once that scope gets a new entry or ends;
- a finished workflow, which a restart does not run again, is still replayed to its end
  (an operator may replay it with ``perdure workflow replay``); its verdict says it is
  finished, so the caller may weigh it apart.

A run that failed is judged by its stored outcome: one that failed by raising (say after
its compensations) and raises the same error again on the new code ``fails``, as one
whose step ran out of retries does; another error is an ``error`` naming both.

Nothing here does I/O: the caller loads the stored record and history.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from perdure.definition import ActorDefinition
from perdure.errors import EngineSignal, WorkflowFailure
from perdure.queue_message import QueueMessage
from perdure.store.base import QueueMessageRecord
from perdure.store.encoding import decode_value
from perdure.store.kv import RawKv
from perdure.telemetry import NO_OBSERVER, Observer
from perdure.workflows.context import StepContext
from perdure.workflows.core import maybe_await
from perdure.workflows.engine import WorkflowRunner
from perdure.workflows.history import ROOT, Divergence, Entry, History, parent_scope
from perdure.workflows.port import ActorClient, MessageQueue
from perdure.workflows.runner_support import error_info

__all__ = ["Frontier", "Verdict", "judge_history"]

T = TypeVar("T")
_log = logging.getLogger("perdure.history_audit")


class Frontier(EngineSignal):
    """The replay reached a point a restart would execute: stop, nothing runs."""

    def __init__(self, action: str, location: str | None = None) -> None:
        super().__init__(action)
        self.action = action
        self.location = location


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a restart on the new code would do with one stored workflow.

    ``outcome``: ``continues`` (reaches its frontier, then would run on), ``ends``
    (replays to its end), ``fails`` (replays into the failure its history holds),
    ``diverged`` or ``error`` (the new code raises on this history).
    """

    outcome: str
    status: str
    location: str | None = None
    history: str | None = None
    code: str | None = None
    fix: str | None = None
    message: str | None = None

    @property
    def problem(self) -> bool:
        """True when a restart on the new code would fail."""
        return self.outcome in ("diverged", "error")


async def judge_history(
    definition: ActorDefinition,
    identity: tuple[str, Sequence[str]],
    raw_history: Mapping[str, bytes],
    state: bytes | None,
    create_input: bytes | None = None,
) -> Verdict:
    """Replay ``raw_history`` (as stored) against ``definition``'s workflow.

    ``identity`` is the actor's ``(actor_id, key)``; ``create_input`` its stored create
    input (``ctx.input`` of a first run). Never raises for what the workflow code does:
    its exceptions are the verdict.
    """
    host = CheckHost(definition, identity, raw_history, state, create_input)
    runner = CheckRunner(host, definition.hooks["run"])
    try:
        return await runner.judge()
    except Exception as exc:  # the stored history itself cannot be read
        return Verdict("error", "unknown", message=f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- the runner


class _WatchedHistory(History):
    """The history, noting the first divergence even where the engine swallows it
    (a join re-raises its first branch's outcome, which may be another branch's
    frontier), and what the code asked for when it came."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        super().__init__(entries)
        self.recorded_until = max((e.seq for e in entries.values()), default=0)
        self.divergence: tuple[Divergence, str | None] | None = None

    def note(self, exc: Divergence, asked: str | None) -> None:
        if self.divergence is None:
            self.divergence = (exc, asked)

    def expect(self, location: str, kind: str) -> Entry | None:
        try:
            return super().expect(location, kind)
        except Divergence as exc:
            self.note(exc, f"{_kind(kind)} `{location}`")
            raise

    def check_complete(self, scope: str) -> None:
        try:
            super().check_complete(scope)
        except Divergence as exc:
            self.note(exc, None)
            raise

    def skipped(self) -> list[str]:
        """Recorded entries not reached, though the replay reached an entry recorded
        after them in the same scope: removed or moved (in the order recorded)."""
        by_scope: dict[str, list[str]] = {}
        for location in self.entries:
            by_scope.setdefault(parent_scope(location), []).append(location)
        found: list[str] = []
        for scope, locations in by_scope.items():
            unreached = set(self.unvisited(scope))
            reached = [
                self.entries[loc].seq
                for loc in locations
                if loc not in unreached and self.entries[loc].seq <= self.recorded_until
            ]
            if reached:
                last = max(reached)
                found.extend(loc for loc in unreached if self.entries[loc].seq < last)
        return sorted(found, key=lambda loc: self.entries[loc].seq)


class CheckRunner(WorkflowRunner):
    """The engine's runner, stopped at the frontier instead of executing it."""

    history: _WatchedHistory
    # The last entry the replay reached: where an unexpected exception is reported.
    reached: str | None = None

    def expect(self, scope: str, name: str, kind: str) -> tuple[str, Entry | None]:
        """Visit an entry as the engine does, remembering it."""
        location, entry = super().expect(scope, name, kind)
        self.reached = location
        return location, entry

    async def load(self) -> None:
        """Load as a restart does, then watch the history."""
        await super().load()
        self.history = _WatchedHistory(self.history.entries)

    async def step(
        self, scope: str, name: str, fn: Callable[[StepContext], Any], **options: Any
    ) -> Any:
        """A recorded step returns its output; one a restart would run is the frontier."""

        def frontier(_: StepContext) -> NoReturn:
            raise Frontier("would run step")

        return await _located(super().step(scope, name, frontier, **options), scope, name)

    async def sleep(
        self, scope: str, name: str, deadline: int | None, seconds: float | None
    ) -> None:
        """A sleep still to wait is the frontier (one past its deadline completes)."""
        await _located(super().sleep(scope, name, deadline, seconds), scope, name)

    async def queue_batch(self, scope: str, name: str, *args: Any, **options: Any) -> Any:
        """A receive not in history (or still waiting) is the frontier."""
        return await _located(super().queue_batch(scope, name, *args, **options), scope, name)

    async def removed(self, scope: str, name: str, original_kind: str) -> None:
        """``ctx.removed``, its own divergence (a wrong kind) noted too."""
        try:
            await super().removed(scope, name, original_kind)
        except Divergence as exc:
            self.history.note(exc, f'ctx.removed("{name}", "{original_kind}")')
            raise

    async def judge(self) -> Verdict:
        """Replay and say what a restart would do."""
        await self.load()
        status = str(self.meta.get("status", "pending"))
        try:
            await maybe_await(self.fn(self.context(ROOT)))
            self.check_complete(ROOT)
        except Frontier as stop:
            return self._verdict("continues", status, stop.location, stop.action)
        except Divergence:
            pass  # noted by the history; reported below
        except WorkflowFailure as exc:
            return self._verdict("fails", status, None, str(exc))
        except Exception as exc:
            if self._fails_as_stored(exc):
                return self._verdict("fails", status, None, _described(exc))
            return self._unexpected(status, exc)
        return self._verdict("ends", status, None, None)

    def _fails_as_stored(self, exc: Exception) -> bool:
        """The run failed by raising, and the new code raises the same error: the
        replay reaches the outcome its history holds (``compensate, then fail``)."""
        stored = self.meta.get("error")
        if self.meta.get("status") != "failed" or not isinstance(stored, dict):
            return False
        raised = error_info(exc)
        return all(stored.get(field) == raised[field] for field in ("name", "message"))

    def _verdict(
        self, outcome: str, status: str, location: str | None, message: str | None
    ) -> Verdict:
        noted = self.history.divergence
        if noted is not None:
            return _diverged(self.history, status, *noted)
        skipped = self.history.skipped() if outcome == "continues" else []
        if skipped:
            return _skipped(self.history, status, skipped[0], location)
        return Verdict(outcome, status, location, message=message)

    def _unexpected(self, status: str, exc: Exception) -> Verdict:
        noted = self.history.divergence
        if noted is not None:
            return _diverged(self.history, status, *noted)
        return Verdict(
            "error",
            status,
            self.reached,
            code=None if self.reached is None else f"raises after `{self.reached}`",
            message=_described(exc) + self._stored_failure(),
            fix="the new code raises on this stored history; fix the workflow code",
        )

    def _stored_failure(self) -> str:
        stored = self.meta.get("error")
        if self.meta.get("status") != "failed" or not isinstance(stored, dict):
            return ""
        return f" (the stored run failed with {stored.get('name')}: {stored.get('message')})"


def _described(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


async def _located(work: Awaitable[T], scope: str, name: str) -> T:
    """Await ``work``; a frontier it reaches is placed at ``scope/name``."""
    try:
        return await work
    except Frontier as stop:
        if stop.location is None:
            stop.location = name if scope == ROOT else f"{scope}/{name}"
        raise


# How the entry kinds read in a report (the stored names are the engine's).
_KIND_NAMES = {
    "message": "queue receive",
    "version_check": "get_version",
    "now": "ctx.now",
    "random": "ctx.random",
    "uuid4": "ctx.uuid4",
}


def _kind(kind: str) -> str:
    return _KIND_NAMES.get(kind, kind.replace("_", " "))


def _describe(history: History, location: str) -> str:
    entry = history.entries.get(location)
    if entry is None:
        return f"nothing at `{location}`"
    return f"{entry.status} {_kind(entry.kind)} `{location}`"


def _removed_call(history: History, location: str) -> str:
    entry = history.entries.get(location)
    kind = entry.kind if entry is not None else "step"
    return f'ctx.removed("{location.rpartition("/")[2]}", "{kind}")'


def _diverged(history: History, status: str, exc: Divergence, asked: str | None) -> Verdict:
    location = exc.location
    if asked is not None and asked.endswith(f"`{location}`") and location in history.entries:
        # Same place, another kind (or the same name twice).
        fix = (
            "give each entry a unique name in its scope"
            if str(exc).startswith("Duplicate")
            else f"keep the old entry with {_removed_call(history, location)} and use a new "
            "name, or branch on ctx.get_version(...)"
        )
    else:
        fix = (
            f"if it was removed or renamed on purpose, add {_removed_call(history, location)} "
            "where it was; to change behaviour for new runs only, branch on "
            "ctx.get_version(...)"
        )
    return Verdict(
        "diverged",
        status,
        location,
        history=_describe(history, location),
        code=asked or "nothing: the code no longer reaches it",
        fix=fix,
        message=str(exc),
    )


def _skipped(history: History, status: str, location: str, frontier: str | None) -> Verdict:
    return Verdict(
        "diverged",
        status,
        location,
        history=_describe(history, location),
        code=f"goes on to `{frontier}` without reaching it" if frontier else "never reaches it",
        fix=f"if it was removed on purpose, add {_removed_call(history, location)} where it "
        "was; if it moved, keep it in place and branch on ctx.get_version(...)",
        message=f"`{location}` is in history, but the replay went past it to entries "
        "recorded after it: a restart fails (or replays it out of order) once the "
        "workflow goes on.",
    )


# ----------------------------------------------------------------------------- the host


class _NeverAborted:
    """The check never stops a replay from outside (its caller bounds it in time)."""

    @property
    def aborted(self) -> bool:
        return False

    async def wait(self) -> None:
        await asyncio.Event().wait()


class _StoredData:
    """The actor's state as stored, decoded only if something reads it."""

    def __init__(self, state: bytes | None) -> None:
        self._raw = state
        self.vars: Any = None

    @property
    def state(self) -> Any:
        return None if self._raw is None else decode_value(self._raw)

    @state.setter
    def state(self, value: Any) -> None:
        raise Frontier("would change the state")


class _CheckQueue:
    """The queue as a replay sees it: messages it recorded replay, anything that would
    take, wait for, complete or send one is the frontier."""

    def __init__(self, definition: ActorDefinition) -> None:
        self._definition = definition

    def available(self, names: frozenset[str] | None, count: int) -> list[QueueMessageRecord]:
        raise Frontier("would wait for or take a message")

    def check_receive(self, names: frozenset[str] | None, completable: bool, call: str) -> None:
        raise Frontier("would wait for or take a message")

    def consume(self, records: Sequence[QueueMessageRecord], *, completable: bool) -> None:
        raise Frontier("would take a message")

    def hold(self, message_id: int) -> None:
        """Replayed receives hold their uncompleted messages; nothing to hold here."""

    async def complete(self, message: QueueMessage, response: Any) -> None:
        raise Frontier("would complete a message")

    async def wait_for(self, names: frozenset[str] | None, timeout: float | None) -> bool:
        raise Frontier("would wait for a message")

    async def abandon(self, message_id: int, error: BaseException) -> None:
        raise Frontier("would answer a message's sender")

    def message_body(self, name: str, plain: Any) -> Any:
        return self._definition.message_body(name, plain)

    def check_send(self, name: str, body: Any) -> bytes:
        raise Frontier("would send a message")

    def enqueue_checked(
        self, name: str, data: bytes, *, delay: float | None = None, at: int | None = None
    ) -> object:
        raise Frontier("would send a message")

    def check_room(self, count: int) -> None:
        raise Frontier("would send a message")


class CheckHost:
    """A :class:`~perdure.workflows.port.WorkflowHost` that stores and runs nothing."""

    def __init__(
        self,
        definition: ActorDefinition,
        identity: tuple[str, Sequence[str]],
        raw_history: Mapping[str, bytes],
        state: bytes | None,
        create_input: bytes | None = None,
    ) -> None:
        self.actor_id, self.key = identity[0], tuple(identity[1])
        self._create_input = create_input
        self.name = definition.name
        self.label = f"{self.name}/{self.actor_id}"
        self.log = logging.LoggerAdapter(_log, {"actor": self.label})
        self.abort = _NeverAborted()
        self.observer: Observer = NO_OBSERVER
        self.run_timeout = 0.0  # a check replays stored history: no deadline lands
        self.code_version: str | None = None  # nothing is recorded
        self.actor = _StoredData(state)
        self._definition = definition
        self._raw_history = dict(raw_history)
        self._queue = None if definition.queues is None else _CheckQueue(definition)

    async def load_history(self) -> dict[str, bytes]:
        return self._raw_history

    def write_history(self, puts: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        """Staged entries of the replay are dropped: nothing is written."""

    def flush(self) -> Awaitable[None]:
        return _done()

    def queue(self) -> MessageQueue | None:
        return self._queue

    def require_queue(self) -> MessageQueue:
        self._definition.require_queues()
        assert self._queue is not None  # an actor with queues has one
        return self._queue

    def validate_event(self, name: str, args: list[Any]) -> list[Any]:
        raise Frontier("would broadcast an event")

    def send_event(self, name: str, args: list[Any]) -> None:
        raise Frontier("would broadcast an event")

    def create_input(self) -> Any:
        return None if self._create_input is None else decode_value(self._create_input)

    def input_value(self, plain: Any) -> Any:
        return self._definition.input_value(plain)

    def now_ms(self) -> int:
        """The wall clock: a sleep whose deadline has passed completes, as on a restart."""
        return int(time.time() * 1000)

    async def sleep(self, seconds: float) -> None:
        raise Frontier("would wait")

    def set_alarm(self, at: int | None) -> None:
        """No alarm is written."""

    def set_waiting(self, waiting: bool) -> None:
        """Nothing waits."""

    async def report_error(self, event: dict[str, Any]) -> None:
        """``on_error`` is user code: not called."""

    def workflow_ended(self, status: dict[str, Any]) -> None:
        """Nobody waits for a check's replay."""

    def client(self) -> ActorClient:
        raise Frontier("would call another actor")

    def keep_awake(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        _close(awaitable)
        raise Frontier("would run work in the background")

    def wait_until(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        _close(awaitable)
        raise Frontier("would run work in the background")

    def destroy(self) -> None:
        raise Frontier("would destroy the actor")

    def kv(self) -> RawKv:
        raise Frontier("would read or write the actor's KV space")


async def _done() -> None:
    return None


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited: no "never awaited" warning

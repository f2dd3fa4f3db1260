"""The runner's core: history, the commit path and waiting, shared by every primitive.

Recording goes through the host's commits, so a step's history entry, the actor state
and the queue messages it consumed or sent commit in one transaction (DESIGN §3.1,
§3.2). Bookkeeping that needs no immediate durability (a message taken from the queue, a
loop advancing) is *staged* and rides on the next commit: after a crash the uncommitted
part is simply done again. Events broadcast by a step are delivered only after the
step's commit (DESIGN §3.3).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any, cast

from perdure.errors import ActorAborted, Evicted, WorkflowNotRunning
from perdure.store.encoding import decode_value, encode_value
from perdure.workflows.context import Primitives, WorkflowContext
from perdure.workflows.control import FINISHED, RunControl, shown_status
from perdure.workflows.history import (
    RUN_ARCHIVE,
    Entry,
    History,
    child_location,
    validate_name,
)
from perdure.workflows.port import MessageQueue, WorkflowHost
from perdure.workflows.runner_support import RollbackRegistry

__all__ = [
    "META_LOCATION",
    "RunnerCore",
    "decode_history",
    "decode_runs",
    "encode_meta",
    "maybe_await",
    "message_names",
]

META_LOCATION = "~meta"
Events = list[tuple[str, tuple[Any, ...]]]


class RunnerCore:
    """The state of one actor's workflow run and the services its primitives share."""

    def __init__(self, host: WorkflowHost, fn: Callable[[WorkflowContext], Any]) -> None:
        self.host = host
        self.fn = fn
        self.history = History()
        self.meta: dict[str, Any] = {"status": "pending"}
        self.rollbacks = RollbackRegistry()
        self.control = RunControl()
        # The run's deadline (epoch ms; ``workflow(timeout=...)``), once started.
        self.deadline: int | None = None
        # The waits in progress, each with its end (epoch ms; None: a message, a resume
        # or a child ends it). A join or a race waits in several branches at once.
        self.waits: dict[object, int | None] = {}
        # The children whose end a wait is watching for, by id (workflows/children.py).
        self.child_signals: dict[str, asyncio.Event] = {}
        # How many join or race branch sets are running: a branch can be cancelled while
        # it waits for a commit, so commits are shielded then (see ``commit``).
        self.branching = 0
        # Set once the stored history and status are loaded: until then ``status()``
        # knows only "pending" (a client's ``$workflow`` waits for it).
        self.loaded = asyncio.Event()

    def context(self, scope: str) -> WorkflowContext:
        """The ``ctx`` of ``scope``, bound to this runner."""
        # The primitives are split over mixins of this class by concept; the one class
        # that runs workflows (and the only one a context ever sees) combines them all.
        return WorkflowContext(cast("Primitives", self), scope)

    # ----------------------------------------------------------------- loading

    async def load(self) -> None:
        """Read the stored history and status; hold the messages still to complete."""
        meta, entries = decode_history(await self.host.load_history())
        if meta is not None:
            self.meta = meta
        self.history = History(entries)
        self.control.load(self.meta)
        queue = self.host.queue()
        if queue is not None:
            for entry in self.history.entries.values():
                if entry.kind == "message":
                    for message in entry.data.get("m", []):
                        if message.get("c") is False:
                            queue.hold(message["id"])
        self.loaded.set()

    def run_input(self) -> Any:
        """The run's input (``ctx.input``): a fork's, kept in its status record, or else
        the actor's create input. Neither changes during a run, so replays agree."""
        meta = self.meta
        plain = meta["input"] if "input" in meta else self.host.create_input()
        return self.host.input_value(plain)

    def set_meta(self, **fields: Any) -> None:
        """Update the workflow's status record (staged with the next commit)."""
        self.meta.update(fields)
        self.host.write_history({META_LOCATION: encode_meta(self.meta)}, ())
        if "status" in fields:
            self.host.observer.workflow_status(self.host, fields["status"])

    def status(self) -> dict[str, Any]:
        """The workflow's status for clients: ``{status, error, output}`` (``paused``
        while a pause holds a run that has not ended)."""
        meta = self.meta
        return {
            "status": shown_status(meta),
            "error": meta.get("error"),
            "output": meta.get("output"),
        }

    # ---------------------------------------------------------------- controls

    async def request_cancel(self, reason: str | None) -> dict[str, Any]:
        """Record a cancel (durably), then land it in the live run; the status after."""
        self._require_live("cancel")
        if self.meta.get("cancel") is None:
            self.set_meta(cancel={"reason": reason, "requestedAt": self.host.now_ms()})
            await self.commit()
        self.control.request_cancel(self.meta["cancel"].get("reason"))
        return self.status()

    async def request_pause(self, paused: bool) -> dict[str, Any]:
        """Record a pause (``paused``) or a resume, durably; the status after."""
        self._require_live("pause" if paused else "resume")
        if not paused and not self.meta.get("paused"):
            raise WorkflowNotRunning("The workflow is not paused.", self.status()["status"])
        if bool(self.meta.get("paused")) != paused:
            self.set_meta(paused=paused)
            await self.commit()
        self.control.set_paused(paused)
        return self.status()

    def _require_live(self, what: str) -> None:
        status = self.meta.get("status", "pending")
        if status in FINISHED:
            raise WorkflowNotRunning(
                f"The workflow has ended ({status}): there is nothing to {what}.", status
            )

    # ---------------------------------------------------------------- deadline

    def start_clock(self) -> None:
        """The run starts, or goes on after a wake: its start is recorded once (in the
        status record, so a restart does not reset it), and its deadline is that start
        plus the definition's timeout (none without one)."""
        started = self.meta.get("startedAt")
        if started is None:
            started = self.host.now_ms()
        timeout = self.host.run_timeout
        self.deadline = None if timeout <= 0 else int(started) + round(timeout * 1000)
        self.set_meta(startedAt=started, deadlineAt=self.deadline)

    async def watch_deadline(self) -> None:
        """Record the deadline's cancel when it comes, interrupting a wait in progress
        (runs beside the run while it is live; the actor's abort ends it)."""
        deadline = self.deadline
        if deadline is None:
            return
        # The sleep runs on the event loop's timer, which may end before the wall clock
        # reaches the deadline (uvloop truncates delays to whole milliseconds and counts
        # from a loop time cached at the start of an iteration, the more stale the busier
        # the loop): sleep again for what is left. One early wake must not lose the
        # deadline: the run's wait would go on, and nothing else looks at it again.
        while (left := deadline - self.host.now_ms()) > 0:
            await self.host.sleep(left / 1000)
            if self.host.abort.aborted:
                return
        self.check_deadline()

    def check_deadline(self) -> None:
        """If the run is past its deadline, record a cancel for it (staged: it rides on
        the next commit; lost in a crash, the deadline, still past, records it again)
        and land it like any cancel."""
        deadline = self.deadline
        if (
            deadline is None
            or self.control.cancelling.is_set()
            or self.meta.get("status") in FINISHED
            or self.host.now_ms() < deadline
        ):
            return
        timeout = self.host.run_timeout
        cancel = {"reason": "deadline", "requestedAt": deadline}
        self.set_meta(cancel={**cancel, "deadline": {"timeout": timeout, "at": deadline}})
        self.control.request_cancel("deadline", (timeout, deadline))

    def wait_alarm(self, at: int | None) -> int | None:
        """The alarm of a wait that ends at ``at`` (None: when a message or a resume
        comes): the run's deadline if that is sooner, so a sleeping actor wakes for it."""
        deadline = self.deadline
        if deadline is None or self.control.cancelling.is_set():
            return at
        return deadline if at is None else min(at, deadline)

    async def gate(self) -> None:
        """A live durable point (a step about to run an attempt, a wait about to
        start): a requested cancel lands here (the deadline's too), and a paused run
        holds here."""
        self.check_deadline()
        control = self.control
        if control.cancel_pending:
            raise control.deliver()
        if control.paused:
            await self._hold()

    async def _hold(self) -> None:
        """Wait while paused: sleep-compatibly (no alarm: a resume wakes the actor)."""
        host = self.host
        wait = self.begin_wait(None)  # a resume wakes the actor; its deadline too
        await self.commit()
        host.set_waiting(True)
        try:
            while self.control.paused:
                self.check_evicted()
                if self.control.cancel_pending:
                    raise self.control.deliver()
                await self.control.changed(host.abort.wait())
            self.check_evicted()
        finally:
            self.end_wait(wait)

    def held_messages(self) -> list[int]:
        """The ids of the messages the run took as completable and has not completed."""
        return [
            int(message["id"])
            for entry in self.history.entries.values()
            if entry.kind == "message"
            for message in entry.data.get("m", [])
            if message.get("c") is False
        ]

    def mark_busy(self) -> None:
        """While the workflow executes (not waiting), its alarm is "now": if the process
        dies, the alarm scheduler of the next start wakes the actor and it resumes alone."""
        self.host.set_alarm(self.host.now_ms())

    # ------------------------------------------------------------- commit path

    def stage(self) -> None:
        """Move history changes into the host's next commit (no waiting)."""
        changed, deleted = self.history.take_changes()
        if not changed and not deleted:
            return
        owner = self.host.label
        puts: dict[str, bytes] = {}
        for location, entry in changed.items():
            puts[location] = encode_value(
                entry.to_record(), what=f"workflow entry `{location}`", owner=owner
            )
        self.host.write_history(puts, deleted)

    async def commit(self) -> None:
        """Stage history changes and wait until they (and the state) are durable."""
        self.stage()
        flushed = self.host.flush()
        if self.branching:
            # The commit is shared (with the other branches, and the store's own future
            # on the quick path). A branch cancelled while it waits (a race's loser) must
            # stop waiting, not cancel the commit for everyone: that read as a failed
            # write and dropped the actor. Outside branches nothing cancels a waiting
            # run, and the step's hot path keeps its one future.
            await asyncio.shield(flushed)
        else:
            await flushed

    def publish(self, events: Events) -> None:
        """Hand a finished step's events (validated when it broadcast them) to the host:
        logged with its next commit, sent to subscribers once that is durable."""
        for name, args in events:
            self.host.send_event(name, list(args))

    async def report_error(self, event: dict[str, Any]) -> None:
        """Call the ``on_error`` hook (observational; its failures are only logged)."""
        await self.host.report_error(event)

    def queue(self) -> MessageQueue:
        """The actor's queue (the workflow declares queues to use it)."""
        return self.host.require_queue()

    # ------------------------------------------------------------------ waiting

    def check_evicted(self) -> None:
        """Stop at this yield point if the actor is going to sleep."""
        if self.host.abort.aborted:
            raise Evicted()

    async def wait_until(
        self,
        deadline: int,
        *,
        for_messages: frozenset[str] | None = None,
        want_messages: bool = False,
    ) -> bool:
        """Wait until ``deadline`` (epoch ms), or a message arrives when ``want_messages``.

        The wait lets the actor hibernate: the deadline is written as the actor's alarm,
        and the host wakes it then. Returns True if a message arrived.
        """
        host = self.host
        wait = self.begin_wait(deadline)
        await self.commit()
        host.set_waiting(True)
        try:
            while True:
                self.check_evicted()
                now = host.now_ms()
                remaining = (deadline - now) / 1000
                if remaining <= 0:
                    host.observer.alarm_fired(host, "workflow", now - deadline)
                    return False
                if want_messages:
                    waiting = self.queue().wait_for(for_messages, remaining)
                    if await self.control.watching(waiting):
                        return True
                    continue
                await self.control.watching(host.sleep(remaining))
        except ActorAborted:
            raise Evicted() from None
        finally:
            self.end_wait(wait)

    async def wait_for_message(self, names: frozenset[str] | None) -> None:
        """Wait (sleep-compatibly) for a message, with no deadline."""
        wait = self.begin_wait(None)  # a send wakes the actor (or its deadline)
        self.host.set_waiting(True)
        try:
            await self.control.watching(self.queue().wait_for(names, None))
        except ActorAborted:
            raise Evicted() from None
        finally:
            self.end_wait(wait)

    def begin_wait(self, until: int | None) -> object:
        """A wait starts that ends at ``until`` (epoch ms; None: when a message, a resume
        or a child's end comes). The actor's alarm becomes the soonest end among all the
        waits in progress, or the run's deadline if sooner: a join or a race waits in
        several branches at once, and the first of them to end must wake a hibernated
        actor, whichever began waiting last. The token is for :meth:`end_wait`."""
        token = object()
        self.waits[token] = until
        ends = [at for at in self.waits.values() if at is not None]
        self.host.set_alarm(self.wait_alarm(min(ends) if ends else None))
        return token

    def end_wait(self, token: object) -> None:
        """The wait ``token`` ended: busy again, unless the actor is going to sleep. Then
        the alarm of the waits stays (their soonest end, or none for message waits, which
        a send wakes): an alarm of "now" would have the scheduler wake the actor as soon
        as it sleeps."""
        del self.waits[token]
        self.host.set_waiting(False)
        if not self.host.abort.aborted:
            self.mark_busy()

    # --------------------------------------------------------------- positions

    def expect(self, scope: str, name: str, kind: str) -> tuple[str, Entry | None]:
        """Validate ``name``, visit its location and return ``(location, entry)``."""
        self.check_evicted()
        validate_name(name)
        location = child_location(scope, name)
        return location, self.history.expect(location, kind)

    def check_complete(self, scope: str) -> None:
        """Every recorded entry of ``scope`` was visited (raises Divergence otherwise)."""
        self.history.check_complete(scope)


def decode_history(raw: dict[str, bytes]) -> tuple[dict[str, Any] | None, dict[str, Entry]]:
    """Stored history (encoded entries by location) as ``(status record, entries)`` of
    the current run (the runs a fork archived are left out: :func:`decode_runs`)."""
    encoded_meta = raw.get(META_LOCATION)
    meta = None if encoded_meta is None else decode_value(encoded_meta)
    entries = {
        location: Entry.from_record(decode_value(data))
        for location, data in raw.items()
        if location != META_LOCATION and not location.startswith(RUN_ARCHIVE)
    }
    return meta, entries


def decode_runs(raw: dict[str, bytes]) -> dict[int, tuple[dict[str, Any], dict[str, Entry]]]:
    """The runs a fork archived, by number: ``(status record, entries)`` each."""
    found: dict[int, dict[str, bytes]] = {}
    for location, data in raw.items():
        if location.startswith(RUN_ARCHIVE):
            number, _, inner = location[len(RUN_ARCHIVE) :].partition("/")
            found.setdefault(int(number), {})[inner] = data
    runs: dict[int, tuple[dict[str, Any], dict[str, Entry]]] = {}
    for run, stored in sorted(found.items()):
        meta, entries = decode_history(stored)
        runs[run] = (meta or {"status": "pending"}, entries)
    return runs


def encode_meta(meta: dict[str, Any]) -> bytes:
    """The stored form of a workflow's status record."""
    return encode_value(meta, what="workflow status")


def message_names(names: Iterable[str] | str | None) -> frozenset[str] | None:
    """The queue names a receive asks for (None: all)."""
    if names is None:
        return None
    if isinstance(names, str):
        return frozenset((names,))
    return frozenset(names) or None


async def maybe_await(value: Any) -> Any:
    """``value``, awaited if it is awaitable (user functions may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value

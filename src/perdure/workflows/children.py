"""Child workflows: a run starts another actor's workflow exactly once and waits for it.

**Starting** (``ctx.start_child``) gets or creates the child actor by name and key
through the actor's in-process client (so in a cluster it reaches the child's node),
records this run in the child's status record (``$workflow_parent``), then records the
child's id in history. The key is the caller's, or one derived from this actor's id and
the entry's location, so a replay after a crash anywhere in between gets the same actor:
the child is created, and its run started, once.

**Waiting** (``ctx.wait_child``) is pull, woken by push. The child's stored status is
the truth; the parent reads it when the wait starts, and again each time the child tells
it that it ended (``$workflow_child_ended``). Between the two the parent waits like a
queue receive: no alarm, so it may hibernate, and the child's message wakes it. The
child's end commit keeps its alarm "now" until the parent has acknowledged the message,
so a child killed before telling is woken after the restart and tells then; a parent
acknowledges only once it has itself durably become busy (its alarm "now"), so a parent
killed after the acknowledgement is woken too. Nothing polls: a wait costs one status
read per wake of the parent. The outcome is recorded in the parent's history, so a replay
returns it without asking again.

**Cancelling** a parent cancels its children that were not started ``detached``: when
its cancel interrupts a wait for a child, when a cleanup after the cancel waits for one,
and for every child still recorded as running before the run ends ``cancelled`` (a crash
before that replays the cancel and sends them again; a child that has ended answers
``workflow.not_running``, which is fine).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from perdure.errors import (
    ActorAborted,
    ActorNotFound,
    ActorStopping,
    ActorUnavailable,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    NotOwner,
    PeerUnreachable,
    PerdureError,
    RemoteError,
    StoreUnavailable,
    WorkflowCancelled,
    WorkflowError,
    WorkflowNotRunning,
)
from perdure.handles import (
    WORKFLOW_CHILD_ENDED_ACTION,
    WORKFLOW_PARENT_ACTION,
    WORKFLOW_STATUS_ACTION,
    Handle,
)
from perdure.keys import normalize_key
from perdure.workflows.context import ChildWorkflow
from perdure.workflows.control import FINISHED
from perdure.workflows.core import RunnerCore
from perdure.workflows.history import Entry
from perdure.workflows.runner_support import error_info

__all__ = ["ChildPrimitives", "default_child_key"]

T = TypeVar("T")

# What another actor answers while it cannot be reached for now (stopping, moving, its
# node or the store down): asked again after a backoff. Any other error is its answer.
_UNREACHABLE = (
    ActorAborted,
    ActorStopping,
    ActorUnavailable,
    NotOwner,
    PeerUnreachable,
    StoreUnavailable,
    TimeoutError,
    OSError,
)
# The same, answered by the node that holds the other actor: a call forwarded there gets
# its error back as a RemoteError (group, code and status as answered), so it is told by
# what it says, as the network clients do: a 503 (unavailable, stopping, its store down
# …) has not been served now; an abort is the other actor shutting down under the call.
_UNREACHABLE_REMOTE = frozenset({(ActorAborted.group, ActorAborted.default_code)})

# Backoff (seconds) when another actor cannot be reached: a node down, a move.
_FIRST_RETRY = 0.5
_LONGEST_RETRY = 60.0
# A location longer than this (bytes), or with a comma, is hashed into the default key.
_KEY_PART = 100


def default_child_key(parent_id: str, location: str) -> tuple[str, str]:
    """The key of a child started without one: the parent's id and the entry's location
    (hashed when it could not be a key part), the same at every replay."""
    if len(location.encode()) > _KEY_PART or "," in location:
        location = "~" + hashlib.sha256(location.encode()).hexdigest()[:40]
    return (parent_id, location)


class ChildPrimitives(RunnerCore):
    """``ctx.start_child`` and ``ctx.wait_child``; the child's side of the link."""

    # ----------------------------------------------------------- the parent

    async def start_child(
        self,
        scope: str,
        name: str,
        actor: str,
        key: str | Sequence[str] | None,
        input: Any,
        detached: bool,
    ) -> ChildWorkflow:
        """Start actor ``actor``'s workflow once (get or create it by key), link it to
        this run, and record it; a replay returns the recorded child."""
        location, entry = self.expect(scope, name, "child")
        if entry is not None and entry.status != "pending":
            return _child(location, entry)
        await self.gate()  # a live start: a cancel lands here, a pause holds here
        parts = normalize_key(key) if key is not None else None
        if parts is None:
            parts = default_child_key(self.host.actor_id, location)
        data = {"n": actor, "k": list(parts), "d": detached}
        if entry is None:
            entry = self.history.record(location, Entry("child", "pending", data=data))
        # Durable before the child exists: this run (its alarm "now") resumes after a
        # crash even if nothing of it had committed yet, and starts the same child.
        await self.commit()
        handle = self.host.client().actor(actor).get_or_create(list(parts), input=input)
        child_id = await self.reach(f"starting child {actor}", handle.resolve)
        if child_id == self.host.actor_id:
            raise WorkflowError(f"`{location}`: a workflow cannot be its own child.")
        parent = {
            "id": self.host.actor_id,
            "name": self.host.name,
            "key": list(self.host.key),
            "at": location,
            "detached": detached,
        }
        await self.reach(
            f"linking child {child_id}", lambda: handle.action(WORKFLOW_PARENT_ACTION, parent)
        )
        entry.status = "running"
        entry.data = {**data, "id": child_id}
        self.history.touch(location)
        await self.commit()
        return _child(location, entry)

    async def wait_child(self, scope: str, name: str, child: ChildWorkflow) -> Any:
        """Wait (durably: the actor may sleep) until ``child``'s run ends; its output,
        or :class:`ChildWorkflowFailed` / :class:`ChildWorkflowCancelled`."""
        if not isinstance(child, ChildWorkflow):
            raise TypeError(f"ctx.wait_child() takes a ctx.start_child() result, not {child!r}.")
        location, entry = self.expect(scope, name, "child_result")
        if entry is not None and entry.status == "completed":
            return _outcome(entry)
        if entry is None:
            entry = self.history.record(
                location, Entry("child_result", "pending", data={"id": child.id})
            )
        await self.gate()  # a live wait: a cancel lands here, a pause holds here
        try:
            if self.control.delivered:  # a cleanup after this run's cancel
                await self._cascade(child)
            status = await self._child_end(child)
        except WorkflowCancelled:  # this run's cancel interrupted the wait
            await self._cascade(child)
            raise
        entry.status = "completed"
        entry.data = {"id": child.id, "s": status["status"]}
        if status["status"] == "completed":
            entry.data["o"] = status.get("output")
        else:
            entry.data["e"] = status.get("error")
        self.history.touch(location)
        started = self.history.get(child.location)
        if started is not None and started.kind == "child":
            started.status = status["status"]
            started.data["end"] = status["status"]  # the cascade skips it
            self.history.touch(child.location)
        await self.commit()
        return _outcome(entry)

    async def _child_end(self, child: ChildWorkflow) -> dict[str, Any]:
        """The child's status once its run has ended: read, then read again at each of
        its messages (registered first, so no end slips between the read and the wait)."""
        signal = self.child_signals.setdefault(child.id, asyncio.Event())
        try:
            while True:
                signal.clear()
                status = await self.reach(f"child {child.id}", lambda: self._child_status(child))
                if status["status"] in FINISHED:
                    return status
                await self._wait_signal(signal)
        finally:
            self.child_signals.pop(child.id, None)

    async def _child_status(self, child: ChildWorkflow) -> dict[str, Any]:
        try:
            status: dict[str, Any] = await _handle(self, child.actor, child.id).action(
                WORKFLOW_STATUS_ACTION
            )
        except PerdureError as exc:
            if not _answered(exc, ActorNotFound):
                raise
            # Destroyed: it will never end otherwise.
            return {"status": "failed", "error": error_info(exc), "output": None}
        return status

    async def _wait_signal(self, signal: asyncio.Event) -> None:
        """Wait for a child's message, sleep-compatibly (no alarm of its own: the message
        wakes the actor, the run's deadline its alarm); this run's cancel interrupts it."""
        host = self.host
        wait = self.begin_wait(None)
        host.set_waiting(True)
        try:
            await self.control.watching(_first(signal.wait(), host.abort.wait()))
            self.check_evicted()
        finally:
            self.end_wait(wait)

    async def _cascade(self, child: ChildWorkflow) -> None:
        if not child.detached:
            await self._cancel_child(child.id, child.actor)

    async def cancel_children(self, reason: str | None) -> None:
        """Cancel every child started attached and not seen to end (the run's cancel)."""
        for entry in list(self.history.entries.values()):
            data = entry.data
            if entry.kind == "child" and "id" in data and not data.get("d") and "end" not in data:
                await self._cancel_child(str(data["id"]), str(data["n"]), reason)

    async def _cancel_child(self, child_id: str, actor: str, reason: str | None = None) -> None:
        if reason is None:
            reason = self.control.reason
        text = f"its parent {self.host.actor_id} was cancelled" + (f": {reason}" if reason else "")
        handle = _handle(self, actor, child_id)
        try:
            await self.reach(f"cancelling child {child_id}", lambda: handle.cancel_workflow(text))
        except PerdureError as exc:
            # Ended, or gone: nothing to cancel. A child on another node says so through
            # a RemoteError: let through, it would stop this run's cancel short of its end.
            if not (_answered(exc, WorkflowNotRunning) or _answered(exc, ActorNotFound)):
                raise

    async def child_ended(self, child_id: str) -> None:
        """A child says its run ended (``$workflow_child_ended``). Made busy durably
        before answering, so a parent killed after the answer still wakes and reads it."""
        if self.meta.get("status") in FINISHED:
            return
        self.mark_busy()
        await self.commit()
        signal = self.child_signals.get(child_id)
        if signal is not None:
            signal.set()

    # ------------------------------------------------------------ the child

    async def adopt(self, parent: dict[str, Any]) -> dict[str, Any]:
        """Record ``parent`` (``$workflow_parent``) in this run's status record; the
        status. The same parent again changes nothing; another is refused."""
        current = self.meta.get("parent")
        if current is not None and current.get("id") != parent["id"]:
            raise WorkflowError(
                f"This workflow is already the child of {current.get('id')}.",
                code="child_of_another",
            )
        if current is None:
            fields: dict[str, Any] = {"parent": parent}
            if self.meta.get("status") in FINISHED:
                fields["parentTold"] = True  # the parent reads the status when it waits
            self.set_meta(**fields)
            await self.commit()
        return self.status()

    def parent_untold(self) -> bool:
        """The run has ended with a parent that has not acknowledged it yet."""
        meta = self.meta
        return meta.get("parent") is not None and not meta.get("parentTold")

    def end_alarm(self) -> int | None:
        """The alarm of a run that ends: "now" while its parent is still to be told (a
        restart wakes the actor to tell it), else none."""
        return self.host.now_ms() if self.parent_untold() else None

    async def tell_parent(self) -> None:
        """Tell the parent, if any, that this run ended; retried (durably) until it
        answers, then recorded."""
        if not self.parent_untold() or self.meta.get("status") not in FINISHED:
            return
        parent = self.meta["parent"]
        handle = _handle(self, str(parent["name"]), str(parent["id"]))
        try:
            await self.reach(
                f"telling parent {parent['id']}",
                lambda: handle.action(WORKFLOW_CHILD_ENDED_ACTION, self.host.actor_id),
            )
        except Exception as exc:  # its answer (gone, say): nobody to tell
            self.host.log.warning("parent %s not told: %s", parent["id"], exc)
        self.set_meta(parentTold=True)
        self.host.set_alarm(None)
        await self.commit()

    async def reach(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` to another actor, asked again (after a backoff that survives a
        restart: the alarm holds it) while that actor cannot be reached."""
        delay = _FIRST_RETRY
        while True:
            try:
                return await call()
            except Exception as exc:
                if not _unreachable(exc):
                    raise
                self.host.log.warning("%s: %s; trying again in %g s", what, exc, delay)
            await self.wait_until(self.host.now_ms() + int(delay * 1000))
            delay = min(delay * 2, _LONGEST_RETRY)


def _unreachable(exc: Exception) -> bool:
    """Whether ``exc`` says the other actor could not be reached for now (here, or by
    the node that holds it): worth asking again."""
    if isinstance(exc, RemoteError):
        return exc.status == 503 or (exc.group, exc.code) in _UNREACHABLE_REMOTE
    return isinstance(exc, _UNREACHABLE)


def _answered(exc: PerdureError, kind: type[PerdureError]) -> bool:
    """Whether ``exc`` is a ``kind`` error: raised here, or answered by another node."""
    if isinstance(exc, kind):
        return True
    return isinstance(exc, RemoteError) and (exc.group, exc.code) == (kind.group, kind.default_code)


def _handle(runner: RunnerCore, actor: str, actor_id: str) -> Handle:
    return runner.host.client().actor(actor).get_for_id(actor_id)


def _child(location: str, entry: Entry) -> ChildWorkflow:
    data = entry.data
    return ChildWorkflow(
        str(data["id"]), str(data["n"]), tuple(data["k"]), location, bool(data.get("d"))
    )


def _outcome(entry: Entry) -> Any:
    data = entry.data
    status = data["s"]
    if status == "completed":
        return data.get("o")
    error = data.get("e") or {}
    if status == "cancelled":
        raise ChildWorkflowCancelled(data["id"], (error.get("metadata") or {}).get("reason"))
    raise ChildWorkflowFailed(data["id"], error)


async def _first(*waits: Awaitable[Any]) -> None:
    """Return when the first of ``waits`` returns (the others are cancelled)."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()

"""The inspector's live feed: what happens to one actor, as it happens.

:class:`ActorFeed` is an observer (see :mod:`perdure.telemetry`) that the runtime adds
while at least one feed is open, so an engine nobody inspects pays nothing for it. Each
open feed (:meth:`ActorFeed.watch`) gets, for its actor, the state after every commit
that changed it, the history entries each commit wrote, events as they are sent,
connections opening and closing, and the actor waking, sleeping or being destroyed.

A feed is bounded: a reader that falls more than :data:`BACKLOG` changes behind gets a
``resync`` change and is closed, and should read the actor again and reopen its feed.
The feed sees what happens on this process: in a cluster, an actor served by another
node is watched through that node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from perdure.runtime.admin.inspector import entry_view, shown
from perdure.telemetry import ActorFacts, Observer

if TYPE_CHECKING:
    from perdure.runtime.admin.view import RuntimeView

__all__ = ["BACKLOG", "ActorFeed", "Change", "FeedWatch"]

BACKLOG = 1000
_log = logging.getLogger("perdure.feed")

Change = tuple[str, dict[str, Any]]
"""``(kind, data)``: kind is ``state``, ``workflow``, ``event``, ``connection``,
``lifecycle``, ``resync`` or ``end``."""

_END: Change = ("end", {})


class FeedWatch:
    """One open feed: a bounded queue of changes.

    Read with :meth:`next`, which waits with a timeout on the queue itself: a wait that
    times out leaves the feed open (an async generator cancelled mid-wait would be
    finished for good).
    """

    __slots__ = ("closed", "finished", "queue")

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Change] = asyncio.Queue(BACKLOG + 1)
        self.closed = False  # nothing more is put
        self.finished = False  # the reader has seen the last change

    def put(self, change: Change) -> None:
        if self.closed:
            return
        if self.queue.qsize() >= BACKLOG:
            self.closed = True
            self.queue.put_nowait(("resync", {"reason": "the reader fell behind"}))
            return
        self.queue.put_nowait(change)

    def end(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(_END)

    async def next(self, timeout: float) -> Change | None:
        """The next change; ``None`` if none came within ``timeout`` seconds (the feed
        stays open); ``("end", {})`` once it is over (shut down, or after a resync)."""
        if self.finished:
            return _END
        try:
            change = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None
        if change[0] in ("end", "resync"):
            self.finished = True
        return change


class ActorFeed(Observer):
    """Live changes per actor for the admin API (see the module docstring)."""

    def __init__(self, runtime: RuntimeView) -> None:
        self._runtime = runtime
        self._watches: dict[str, set[FeedWatch]] = {}
        self._attached = False

    @asynccontextmanager
    async def watch(self, actor_id: str) -> AsyncIterator[FeedWatch]:
        """Open a feed of ``actor_id``'s changes for the ``async with`` block; read it
        with :meth:`FeedWatch.next`."""
        watch = FeedWatch()
        self._watches.setdefault(actor_id, set()).add(watch)
        if not self._attached:
            self._runtime.observers.add(self)
            self._attached = True
        try:
            yield watch
        finally:
            watch.closed = True
            watches = self._watches.get(actor_id)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del self._watches[actor_id]
            if not self._watches and self._attached:
                self._runtime.observers.remove(self)
                self._attached = False

    def close_all(self) -> None:
        """End every open feed (the server is shutting down)."""
        for watches in self._watches.values():
            for watch in watches:
                watch.end()

    def _send(self, actor_id: str, kind: str, data: dict[str, Any]) -> None:
        watches = self._watches.get(actor_id)
        if watches:
            for watch in list(watches):
                watch.put((kind, data))

    # ------------------------------------------------------------------ hooks

    def state_changed(self, actor: ActorFacts) -> None:
        if actor.actor_id in self._watches:
            instance = self._runtime.live_instance(actor.actor_id)
            if instance is not None:
                self._send(actor.actor_id, "state", {"state": shown(instance.state)})

    def history_changed(
        self, actor: ActorFacts, changed: Sequence[str], deleted: Sequence[str]
    ) -> None:
        if actor.actor_id not in self._watches:
            return
        instance = self._runtime.live_instance(actor.actor_id)
        runner = None if instance is None else instance.workflow
        if runner is None:
            return
        entries = []
        for location in changed:
            entry = runner.history.get(location)
            if entry is not None:
                entries.append(entry_view(location, entry))
        entries.sort(key=lambda view: view["seq"])
        status = runner.status()
        self._send(
            actor.actor_id,
            "workflow",
            {
                "status": status["status"],
                "error": shown(status["error"]),
                "output": shown(status["output"]),
                "history": entries,
                "deleted": list(deleted),
            },
        )

    def event_sent(self, actor: ActorFacts, name: str, args: list[Any], recipients: int) -> None:
        if actor.actor_id in self._watches:
            self._send(actor.actor_id, "event", {"name": name, "args": shown(args)})

    def connection_opened(self, actor: ActorFacts, conn_id: str) -> None:
        self._send(actor.actor_id, "connection", {"id": conn_id, "open": True})

    def connection_closed(self, actor: ActorFacts, conn_id: str) -> None:
        self._send(actor.actor_id, "connection", {"id": conn_id, "open": False})

    def actor_woke(self, actor: ActorFacts) -> None:
        self._send(actor.actor_id, "lifecycle", {"awake": True})

    def actor_slept(self, actor: ActorFacts, reason: str) -> None:
        if reason == "destroy":
            self._send(actor.actor_id, "lifecycle", {"awake": False, "destroyed": True})
        else:
            self._send(actor.actor_id, "lifecycle", {"awake": False, "reason": reason})

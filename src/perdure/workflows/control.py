"""Cancel and pause: requests from outside a run, and the points where they land.

A request is recorded in the run's status record first (durable), then signalled to the
live run. Where it lands is decided by the run's own progress, so that a replay after a
crash lands it at the same point:

- **Cancel** lands at the run's first *live* durable point after the request: a step
  about to run an attempt, a sleep, a queue receive or a retry's backoff about to wait
  (:meth:`RunControl.gate`), or a wait already in progress, which it interrupts. Points
  replayed from history are not live, so a replay reaches the same point. The workflow
  sees :class:`~perdure.errors.WorkflowCancelled` there; every wait in progress at that
  moment (parallel branches of a join or race) gets it too. After that the run may clean
  up: primitives work again (a cleanup step in ``finally`` runs and is recorded), and
  the engine ends the run ``cancelled`` once the exception leaves the workflow.
- **Deadline** (``workflow(timeout=...)``): when the run reaches it, a cancel is
  recorded for it (:meth:`RunControl.request_cancel` with ``timed_out``) and lands as
  above, as :class:`~perdure.errors.WorkflowTimedOut`; the engine then ends the run
  ``failed`` with ``workflow.timed_out``.
- **Pause** holds the run at its next live point until a resume (or a cancel). The run
  waits there like a queue wait: the actor may sleep meanwhile, and a wake replays up
  to the same point and holds again, because the pause is in the status record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from perdure.errors import WorkflowCancelled, WorkflowTimedOut
from perdure.handles import FINISHED

__all__ = ["FINISHED", "RunControl", "shown_status"]

T = TypeVar("T")


def shown_status(meta: dict[str, Any]) -> str:
    """The status a run's record shows: its own, ``paused`` while a pause holds a run
    that has not ended, or ``waiting_for_version`` while no node may run it (a cluster
    with no live node of its code version, on whose code its history does not replay)."""
    status = str(meta.get("status", "pending"))
    if status in FINISHED:
        return status
    if meta.get("paused"):
        return "paused"
    if meta.get("waitingForVersion"):
        return "waiting_for_version"
    return status


class RunControl:
    """The cancel and pause requests of one live run (see the module docstring)."""

    __slots__ = ("_changed", "cancelling", "deadline", "delivered", "paused", "reason")

    def __init__(self) -> None:
        self.cancelling = asyncio.Event()
        self.reason: str | None = None
        # ``(timeout seconds, deadline epoch ms)`` once the cancel is the run's deadline.
        self.deadline: tuple[float, int] | None = None
        self.delivered = False
        self.paused = False
        self._changed = asyncio.Event()

    def load(self, meta: dict[str, Any]) -> None:
        """Take the requests a stored status record holds (after a wake or a crash)."""
        cancel = meta.get("cancel")
        if cancel is not None:
            deadline = cancel.get("deadline")
            self.request_cancel(
                cancel.get("reason"),
                timed_out=None if deadline is None else (deadline["timeout"], deadline["at"]),
            )
        self.paused = bool(meta.get("paused"))

    # ----------------------------------------------------------------- requests

    def request_cancel(
        self, reason: str | None, timed_out: tuple[float, int] | None = None
    ) -> None:
        """A cancel is recorded: land it at the next live point. ``timed_out``
        (``(timeout, deadline ms)``): it is the run's deadline."""
        self.reason = reason
        self.deadline = timed_out
        self.cancelling.set()
        self._changed.set()

    def set_paused(self, paused: bool) -> None:
        """A pause or a resume is recorded."""
        self.paused = paused
        self._changed.set()

    # -------------------------------------------------------------- landing

    @property
    def cancel_pending(self) -> bool:
        """A cancel was requested and has not landed in this run yet."""
        return self.cancelling.is_set() and not self.delivered

    def deliver(self) -> WorkflowCancelled:
        """The cancel lands now: the error the workflow sees."""
        self.delivered = True
        if self.deadline is not None:
            return WorkflowTimedOut(*self.deadline)
        return WorkflowCancelled(self.reason)

    async def watching(self, waiting: Awaitable[T]) -> T:
        """Await ``waiting`` (a wait of the run); a cancel requested meanwhile
        interrupts it with :class:`WorkflowCancelled`. A wait that starts after the
        cancel landed (cleanup) is not interrupted."""
        if self.delivered:
            return await waiting
        work = asyncio.ensure_future(waiting)
        cancel = asyncio.ensure_future(self.cancelling.wait())
        try:
            await asyncio.wait({work, cancel}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
            if not work.done():
                work.cancel()
                await asyncio.wait({work})
        if work.done() and not work.cancelled():
            return work.result()  # it ended first (or as the cancel came): its outcome
        raise self.deliver()

    async def changed(self, also: Awaitable[Any]) -> None:
        """Wait until a request changes (pause, resume, cancel) or ``also`` finishes."""
        self._changed.clear()
        other = asyncio.ensure_future(also)
        change = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({other, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            other.cancel()
            change.cancel()

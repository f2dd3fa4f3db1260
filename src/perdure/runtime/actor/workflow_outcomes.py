"""Who waits for a workflow run to end: the waiters of ``workflow_result()``.

A waiter waits for an actor, not for one of its instances: the actor may sleep while
its workflow waits a day, and wake again to finish. So the waiters live in the runtime
(one :class:`WorkflowOutcomes` per runtime, reached through the actor's host) and a run
that ends, on whichever instance, answers them all at once. A waiter does not keep its
actor awake.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["WorkflowOutcomes"]


class WorkflowOutcomes:
    """Futures of the callers waiting for an actor's workflow to end, by actor id."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[dict[str, Any]]]] = {}

    def watch(self, actor_id: str) -> asyncio.Future[dict[str, Any]]:
        """A future that gets the status with which the actor's run ends; give it back
        with :meth:`forget` once done with it."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(actor_id, set()).add(future)
        return future

    def forget(self, actor_id: str, future: asyncio.Future[dict[str, Any]]) -> None:
        """Stop waiting (an answer or a timeout); the actor's entry goes with its last."""
        waiting = self._waiting.get(actor_id)
        if waiting is None:
            return
        waiting.discard(future)
        if not waiting:
            del self._waiting[actor_id]

    def ended(self, actor_id: str, status: dict[str, Any]) -> None:
        """The actor's run ended with ``status`` (durably): answer every waiter."""
        for future in self._waiting.pop(actor_id, ()):
            if not future.done():
                future.set_result(status)

    def __len__(self) -> int:
        return sum(len(waiting) for waiting in self._waiting.values())

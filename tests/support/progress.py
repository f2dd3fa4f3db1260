"""Waiting for the progress workload (the seed's progressActor, or a copy) to drain."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from perdure.client import AsyncActorHandle, TransportError

__all__ = ["drained"]


async def drained(
    handles: Sequence[AsyncActorHandle],
    *,
    timeout: float,
    retry_on: tuple[type[Exception], ...] = (TransportError,),
) -> dict[str, Any]:
    """The state once the queue is empty and every job received is completed, asked of
    each of ``handles`` in turn (the nodes of a cluster, or one server); errors of
    ``retry_on`` (a server being killed or taken over) are retried.

    A message the workflow has just taken is in neither count until its first step
    runs, so the queue is read before the state, and the answer must hold on two looks
    0.2 s apart: one look, state first, could see the state from before a message taken
    between the two reads (a job re-sent just before the wait, most often).
    """
    seen: dict[str, Any] | None = None
    async with asyncio.timeout(timeout):
        turn = 0
        while True:
            handle = handles[turn % len(handles)]
            turn += 1
            try:
                empty = await handle.queueSize() == 0
                state: dict[str, Any] = await handle.getState()
            except retry_on:
                seen = None
            else:
                progress = state["progress"]
                if empty and progress["completed"] == progress["total"]:
                    if state == seen:
                        return state
                    seen = state
                    await asyncio.sleep(0.2)
                    continue
                seen = None
            await asyncio.sleep(0.05)

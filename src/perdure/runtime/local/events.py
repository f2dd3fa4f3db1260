"""``handle.events()`` of the in-process client (docs/events.md): a connection that
follows the actor's event log, as an async iterator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from perdure.errors import InvalidRequest
from perdure.handles import ActorEvent, CloseEvent, EventGap
from perdure.protocol.resume import check_since
from perdure.runtime.dispatch.refs import ActorRef, ConnectionRef
from perdure.runtime.events.log import LoggedEvent, Since

__all__ = ["follow_events"]

_Item = ActorEvent | EventGap | CloseEvent


class _QueueSink:
    """The connection's transport and its follower sink: everything into one queue."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[_Item] = asyncio.Queue()

    def event(self, event: LoggedEvent) -> None:
        self.items.put_nowait(ActorEvent(event.seq, event.name, list(event.args)))

    def resumed(self, start: int) -> None:
        """Nothing to tell: the iterator yields what follows."""

    def gap(self, after: int, resumed_at: int) -> None:
        self.items.put_nowait(EventGap(after, resumed_at))

    def send_event(self, name: str, args: list[Any]) -> None:
        """A follower's events come through :meth:`event`; ``conn.send`` is ignored."""

    def close(self, code: int, reason: str) -> None:
        self.items.put_nowait(CloseEvent(code, reason))


async def follow_events(
    ref: ActorRef, params: Any, since: int | None
) -> AsyncIterator[ActorEvent | EventGap]:
    """The actor's events after ``since`` (``None``: from now), then live, until the
    actor closes the connection (it is destroyed) or the caller stops iterating."""
    start = check_since(since)
    sink = _QueueSink()
    conn = await ref.connect(params, sink)
    try:
        if not isinstance(conn, ConnectionRef):
            raise InvalidRequest(
                "handle.events() in process needs the actor on this node; use the "
                "network client in a cluster.",
                code="not_local",
                group="events",
            )
        await conn.follow(Since(seq=start) if start is not None else Since(age_ms=0), sink)
        while True:
            item = await sink.items.get()
            if isinstance(item, CloseEvent):
                return
            yield item
    finally:
        await conn.close()

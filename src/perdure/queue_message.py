"""The queue message a receiver gets, shared by the runtime and the workflow engine.

It sits outside both layers so that ``perdure.workflows`` hands out the same type as
``c.queue`` without importing ``perdure.runtime``. What ``complete()`` does depends on who
received the message, so the receiver gives it a :class:`Completer`: the actor's queue
for a plain receive, or the workflow engine (which also records the completion in
history) for ``ctx.queue.next``.

It reads like the rest of the API: snake_case attributes (``created_at`` is epoch
milliseconds, ``created_time`` the same instant as an aware UTC ``datetime``), and a
camelCase attribute (``message.createdAt``) fails naming the snake_case one.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Protocol

from perdure._names import SnakeCaseAttributes
from perdure._time import utc_datetime
from perdure.errors import QueueError

__all__ = ["Completer", "QueueMessage"]


class Completer(Protocol):
    """What completes a received message: removes it durably, answers a waiting sender."""

    async def complete(self, message: QueueMessage, response: Any) -> None:
        """Complete ``message`` with ``response``."""
        ...


@dataclass(slots=True)
class QueueMessage(SnakeCaseAttributes):
    """A received message. ``complete(response)`` exists for completable receives.

    ``completer`` is set by the receiver of a completable message; ``replayed`` marks a
    message a workflow received in an earlier run (its history says so).
    """

    id: int
    name: str
    body: Any
    created_at: int
    completable: bool = False
    completed: bool = False
    completer: Completer | None = field(default=None, repr=False, compare=False, kw_only=True)
    replayed: bool = field(default=False, repr=False, compare=False, kw_only=True)

    @property
    def created_time(self) -> _dt.datetime:
        """When the message was sent (``created_at``) as an aware UTC datetime."""
        return utc_datetime(self.created_at)

    async def complete(self, response: Any = None) -> None:
        """Acknowledge a completable message: remove it and answer a waiting sender."""
        if not self.completable or self.completer is None:
            raise QueueError(
                "Only messages received with completable=True can be completed.",
                code="not_completable",
            )
        if self.completed:
            if self.replayed:
                return  # completed in an earlier run of the workflow: nothing to do again
            raise QueueError(  # rivetkit 2.3.19's text
                "Queue message was already completed", code="already_completed"
            )
        self.completed = True
        await self.completer.complete(self, response)

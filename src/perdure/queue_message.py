"""The queue message a receiver gets, shared by the runtime and the workflow engine.

It sits outside both layers so that ``perdure.workflows`` hands out the same type as
``c.queue`` without importing ``perdure.runtime``. What ``complete()`` does depends on who
received the message, so the receiver gives it a :class:`Completer`: the actor's queue
for a plain receive, or the workflow engine (which also records the completion in
history) for ``ctx.queue.next``.

A completable message received outside a workflow is *leased* (docs/queues.md): its
receiver gives it a :class:`Releaser` too, so that ``nack()`` can give it back, and
``attempts`` says how many times it has been delivered so.

It reads like the rest of the API: snake_case attributes (``created_at`` is epoch
milliseconds, ``created_time`` the same instant as an aware UTC ``datetime``), and a
camelCase attribute (``message.createdAt``) fails naming the snake_case one.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Protocol

from perdure._names import SnakeCaseAttributes, keywords_checked
from perdure._time import duration_seconds, utc_datetime
from perdure.errors import ArgumentError, QueueError

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_VISIBILITY_TIMEOUT",
    "Completer",
    "QueueMessage",
    "Releaser",
    "check_max_attempts",
]

# The lease of a completable message received outside a workflow, unless its queue or
# the receive says otherwise (docs/queues.md): hidden for 30 s (SQS's default), a dead
# letter after 5 deliveries that were not completed.
DEFAULT_VISIBILITY_TIMEOUT = 30.0
DEFAULT_MAX_ATTEMPTS = 5


def check_max_attempts(value: object, what: str) -> int:
    """``value`` if it is an int >= 1; ``what`` names it in the error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(
            f"{what} must be an integer of at least 1, not {value!r}.", code="invalid_max_attempts"
        )
    return value


class Completer(Protocol):
    """What completes a received message: removes it durably, answers a waiting sender."""

    async def complete(self, message: QueueMessage, response: Any) -> None:
        """Complete ``message`` with ``response``."""
        ...


class Releaser(Protocol):
    """What gives a leased message back to its queue (``nack``)."""

    async def release(self, message: QueueMessage, delay: float, error: str | None) -> None:
        """Make ``message`` visible again after ``delay`` seconds, or a dead letter."""
        ...


@dataclass(slots=True)
class QueueMessage(SnakeCaseAttributes):
    """A received message. ``complete(response)`` exists for completable receives.

    ``completer`` is set by the receiver of a completable message; ``replayed`` marks a
    message a workflow received in an earlier run (its history says so). ``attempts``
    counts the deliveries of a leased message (this one included); ``releaser`` is set
    for those only.
    """

    id: int
    name: str
    body: Any
    created_at: int
    completable: bool = False
    completed: bool = False
    completer: Completer | None = field(default=None, repr=False, compare=False, kw_only=True)
    replayed: bool = field(default=False, repr=False, compare=False, kw_only=True)
    attempts: int = field(default=0, kw_only=True)
    releaser: Releaser | None = field(default=None, repr=False, compare=False, kw_only=True)

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

    @keywords_checked("message.nack()")
    async def nack(self, *, delay: float | _dt.timedelta = 0.0, error: str | None = None) -> None:
        """Give a leased message back: deliver it again after ``delay`` (seconds or
        ``timedelta``; at once by default), or make it a dead letter if it has had its
        ``max_attempts``. ``error`` is kept with it (shown with a dead letter)."""
        if self.releaser is None:
            raise QueueError(
                "Only messages received with completable=True outside a workflow can be "
                "given back with nack().",
                code="not_leased",
            )
        seconds = duration_seconds(delay, "message.nack() delay")
        if error is not None and not isinstance(error, str):
            raise ArgumentError(
                f"message.nack() error must be a string, not {error!r}.", code="invalid_error"
            )
        if self.completed:
            raise QueueError(
                "Queue message was already completed or given back", code="already_completed"
            )
        self.completed = True
        await self.releaser.release(self, seconds, error)

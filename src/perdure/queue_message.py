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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from perdure._names import SnakeCaseAttributes, keywords_checked
from perdure._time import duration_seconds, utc_datetime
from perdure.errors import ArgumentError, QueueError

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_VISIBILITY_TIMEOUT",
    "MAX_LIMIT_KEY_BYTES",
    "Completer",
    "QueueLimits",
    "QueueMessage",
    "Releaser",
    "check_max_attempts",
    "queue_limits",
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


# A limit key (a tenant id …) and the name of the body field it is read from are at
# most this many bytes of UTF-8: keys are shown by the admin API and stored with the
# rate windows (docs/queues.md, "Concurrency and rate limits").
MAX_LIMIT_KEY_BYTES = 256

LimitKey = str | Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """How many messages of a queue may be in progress at once (``concurrency``) and
    start per period (``rate``: ``(starts, seconds)``), per limit key: the value of the
    body's ``key`` field, or what ``key(body)`` returns; one key for the whole queue
    when ``key`` is ``None``. See docs/queues.md, "Concurrency and rate limits"."""

    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    key: LimitKey | None = None

    def key_of(self, body: Any) -> str:
        """The limit key of a (plain) message body; ``queue.invalid_limit_key`` if the
        body has none or it is not a string or integer of at most 256 bytes."""
        if self.key is None:
            return ""
        if isinstance(self.key, str):
            if not isinstance(body, Mapping) or self.key not in body:
                raise QueueError(
                    f"The queue's limits are per `{self.key}`, and this message has no "
                    f"`{self.key}` field.",
                    code="invalid_limit_key",
                    metadata={"field": self.key},
                )
            value = body[self.key]
        else:
            value = self.key(body)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise QueueError(
                f"A limit key is a string or an integer, not {value!r}.", code="invalid_limit_key"
            )
        key = str(value)
        if len(key.encode("utf-8")) > MAX_LIMIT_KEY_BYTES:
            raise QueueError(
                f"A limit key is at most {MAX_LIMIT_KEY_BYTES} bytes.",
                code="invalid_limit_key",
                metadata={"max": MAX_LIMIT_KEY_BYTES},
            )
        return key


def queue_limits(
    concurrency: object, rate: object, key: object, call: str = "queue()"
) -> QueueLimits | None:
    """Check a queue's limits (``None`` when it has none); coded ``ArgumentError``s
    name the option: ``invalid_concurrency``, ``invalid_rate``, ``invalid_limit_key``,
    ``limit_key_without_limit``."""
    if concurrency is None and rate is None:
        if key is not None:
            raise ArgumentError(
                f"{call} key= says what the limits are per; give concurrency= or rate= too.",
                code="limit_key_without_limit",
            )
        return None
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ArgumentError(
            f"{call} concurrency must be an integer of at least 1, not {concurrency!r}.",
            code="invalid_concurrency",
        )
    return QueueLimits(concurrency, _checked_rate(rate, call), _checked_key(key, call))


def _checked_rate(rate: object, call: str) -> tuple[int, float] | None:
    if rate is None:
        return None
    problem = (
        f"{call} rate is (starts, period): an integer of at least 1 and a positive "
        f"duration (seconds or timedelta), not {rate!r}."
    )
    if not isinstance(rate, tuple) or len(rate) != 2:
        raise ArgumentError(problem, code="invalid_rate")
    starts, period = rate
    if isinstance(starts, bool) or not isinstance(starts, int) or starts < 1:
        raise ArgumentError(problem, code="invalid_rate")
    try:
        seconds = duration_seconds(period, f"{call} rate period")
    except ArgumentError:
        raise ArgumentError(problem, code="invalid_rate") from None
    if seconds <= 0:
        raise ArgumentError(problem, code="invalid_rate")
    return starts, seconds


def _checked_key(key: object, call: str) -> LimitKey | None:
    if key is None or callable(key):
        return key
    if not isinstance(key, str) or not key or len(key.encode("utf-8")) > MAX_LIMIT_KEY_BYTES:
        raise ArgumentError(
            f"{call} key is the name of a body field (1 to {MAX_LIMIT_KEY_BYTES} bytes) or "
            f"a function of the body, not {key!r}.",
            code="invalid_limit_key",
        )
    return key


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

"""Leases and dead letters of an actor's queue (docs/queues.md).

A completable message received outside a workflow (an action, a hook, a plain actor's
``run``) is *leased*: its ``attempts`` count goes up by one and it is hidden from every
receiver until ``visible_at`` (now + the visibility timeout). Completing it removes it;
``nack(delay=...)`` makes it visible again after the delay; a lease that runs out makes
it visible again by itself. A message delivered ``max_attempts`` times without being
completed is not delivered again: it becomes a *dead letter* (kept in the store with
``dead_at`` and the reason in ``error``), which an operator lists, requeues or drops.

The lease is durable: ``attempts`` and ``visible_at`` are written with the actor's next
flush, which an awaited receive waits for before handing the message out, so a message
whose consumer kills the process still counts its attempts and stays hidden until its
timeout after a restart. The actor's alarm (source ``"queue"``) is the earliest future
``visible_at``, so a sleeping actor wakes when a lease runs out or a nack's delay ends;
while it is awake, a timer wakes the receivers waiting for those messages.

Workflows do not lease: their receive is exactly-once through history (DESIGN §8) and
they only skip messages that are leased or delayed at the time.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perdure._time import optional_duration
from perdure.definition import QueueSpec
from perdure.errors import (
    ArgumentError,
    DeadLetterNotFound,
    InvalidRequest,
    MessageNotDead,
    QueueError,
)
from perdure.queue_message import QueueMessage, check_max_attempts
from perdure.runtime.kernel.clock import TimerHandle, call_later
from perdure.store.base import QueueMessageRecord

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore
    from perdure.runtime.queues.actor_queue import ActorQueue

__all__ = ["ALARM_SOURCE", "LeaseOptions", "QueueLeases", "administer_dead_letter", "lease_options"]

# The queue's source among the actor's alarms (see ActorCore.set_alarm).
ALARM_SOURCE = "queue"
_DEFAULT_SPEC = QueueSpec()


@dataclass(frozen=True, slots=True)
class LeaseOptions:
    """A receive's overrides of its queues' lease (``None``: the queue's own)."""

    visibility_timeout: float | None = None
    max_attempts: int | None = None


def lease_options(
    call: str,
    completable: bool,
    visibility_timeout: float | _dt.timedelta | None,
    max_attempts: int | None,
) -> LeaseOptions:
    """Check a receive's lease options; they only mean something for a completable one."""
    if not completable and (visibility_timeout is not None or max_attempts is not None):
        raise ArgumentError(
            f"{call}: visibility_timeout and max_attempts are the lease of a completable "
            "message; pass completable=True.",
            code="lease_needs_completable",
        )
    return LeaseOptions(
        optional_duration(visibility_timeout, f"{call} visibility_timeout"),
        None if max_attempts is None else check_max_attempts(max_attempts, f"{call} max_attempts"),
    )


@dataclass(frozen=True, slots=True)
class _Lease:
    """The lease of one delivered message: completes or releases it (the message's
    ``completer`` and ``releaser``), with the receive's ``max_attempts``."""

    leases: QueueLeases
    max_attempts: int

    async def complete(self, message: QueueMessage, response: Any) -> None:
        await self.leases.complete(message, response)

    async def release(self, message: QueueMessage, delay: float, error: str | None) -> None:
        await self.leases.release(message, delay, error, self.max_attempts)


class QueueLeases:
    """The leases and dead letters of one awake actor's queue (``queue.leases``)."""

    def __init__(self, queue: ActorQueue, core: ActorCore) -> None:
        self._queue = queue
        self._core = core
        self._clock = core.clock
        self._timer: TimerHandle | None = None
        self._timer_at: int | None = None

    def start(self) -> None:
        """Arm the alarm and timer for the leases loaded with the queue."""
        self.rearm()

    # ------------------------------------------------------------------ leasing

    def take(
        self, records: Sequence[QueueMessageRecord], options: LeaseOptions
    ) -> list[QueueMessage]:
        """Lease ``records`` (available ones, oldest first) to a completable receive.

        A message already delivered ``max_attempts`` times becomes a dead letter instead
        and is left out of the answer. Durable with the actor's next flush.
        """
        queue = self._queue
        now = self._clock.now_ms()
        delivered: list[QueueMessage] = []
        for record in records:
            # A message of a queue the code no longer declares gets the defaults.
            spec = (self._core.definition.queues or {}).get(record.name, _DEFAULT_SPEC)
            limit = options.max_attempts or spec.max_attempts
            if record.attempts >= limit:
                self._kill(record, _exhausted(record.attempts, limit, record.error), now)
                continue
            timeout = options.visibility_timeout
            timeout_ms = math.ceil((spec.visibility_timeout if timeout is None else timeout) * 1000)
            leased = dataclasses.replace(
                record, attempts=record.attempts + 1, visible_at=now + timeout_ms
            )
            self._put(leased)
            lease = _Lease(self, limit)
            message = queue.to_message(leased, completable=True)
            message.completer = lease
            message.releaser = lease
            message.attempts = leased.attempts
            delivered.append(message)
        if delivered:
            queue.observe_consumed(delivered)
        self.rearm()
        return delivered

    async def complete(self, message: QueueMessage, response: Any) -> None:
        """Remove a leased message durably, then answer its waiting sender."""
        record = self._current(message)
        if record is not None:
            self._queue.remove(record.id)
            self.rearm()
        await self._core.request_flush()
        if record is not None:
            self._queue.resolve_completion(message.id, response)

    async def release(
        self, message: QueueMessage, delay: float, error: str | None, max_attempts: int
    ) -> None:
        """``nack``: visible again after ``delay`` seconds, or a dead letter once it has
        had ``max_attempts`` deliveries."""
        record = self._current(message)
        if record is None:
            return
        now = self._clock.now_ms()
        if record.attempts >= max_attempts:
            self._kill(record, _exhausted(record.attempts, max_attempts, error), now)
        else:
            visible_at = now + math.ceil(delay * 1000) if delay > 0 else None
            self._put(dataclasses.replace(record, visible_at=visible_at, error=error))
            if visible_at is None:
                self._queue.wake_waiters(record.name)
        self.rearm()
        await self._core.request_flush()

    def _current(self, message: QueueMessage) -> QueueMessageRecord | None:
        """The message's record while ``message`` still holds its lease, ``None`` if it is
        gone (completed, dropped); ``queue.lease_lost`` if it was delivered again since."""
        record = self._queue.live(message.id)
        if record is None:
            return None
        if record.attempts != message.attempts or self._queue.is_held(record.id):
            raise QueueError(
                f"The lease of message {message.id} ran out and it was delivered again "
                f"(attempt {record.attempts}); this receiver no longer holds it.",
                code="lease_lost",
                metadata={"id": message.id, "attempts": record.attempts},
            )
        return record

    # ------------------------------------------------------------- dead letters

    def dead_letters(self, name: str | None = None) -> list[QueueMessageRecord]:
        """The dead letters (of queue ``name``, if given), oldest message first."""
        dead = self._queue.dead
        return [dead[i] for i in sorted(dead) if name is None or dead[i].name == name]

    async def requeue(self, message_id: int) -> QueueMessageRecord:
        """Put a dead letter back in its live queue, attempts reset; durable on return."""
        record = self._dead_letter(message_id)
        fresh = dataclasses.replace(record, attempts=0, visible_at=None, dead_at=None, error=None)
        del self._queue.dead[message_id]
        self._put(fresh)
        self._queue.wake_waiters(fresh.name)
        await self._core.request_flush()
        return fresh

    async def drop(self, message_id: int) -> None:
        """Delete a dead letter for good; durable on return."""
        self._dead_letter(message_id)
        del self._queue.dead[message_id]
        self._core.commits.delete_message(message_id)
        await self._core.request_flush()

    def _dead_letter(self, message_id: int) -> QueueMessageRecord:
        record = self._queue.dead.get(message_id)
        if record is not None:
            return record
        meta = {"id": message_id}
        if self._queue.live(message_id) is not None:
            raise MessageNotDead(
                f"Message {message_id} is in the live queue, not a dead letter.", metadata=meta
            )
        raise DeadLetterNotFound(f"The actor has no dead letter {message_id}.", metadata=meta)

    def _kill(self, record: QueueMessageRecord, reason: str, now: int) -> None:
        dead = dataclasses.replace(record, visible_at=None, dead_at=now, error=reason)
        self._queue.remove(record.id, keep_row=True)
        self._queue.dead[record.id] = dead
        self._core.commits.update_message(dead)
        self._core.log.warning(
            "queue message %s (`%s`) is a dead letter: %s", record.id, record.name, reason
        )

    def _put(self, record: QueueMessageRecord) -> None:
        self._queue.replace(record)
        self._core.commits.update_message(record)

    # ------------------------------------------------------------------- timing

    def rearm(self, now: int | None = None) -> None:
        """Make the earliest future ``visible_at`` the actor's queue alarm, and wake the
        waiting receivers then (a timer, while the actor is awake). ``now``: the reading
        of the clock the caller has just acted on."""
        if now is None:
            now = self._clock.now_ms()
        if self._timer_at is not None and self._timer_at <= now:
            # The timer's time has come and it has not run yet (a receive, a send or a
            # nack got in first): the timer is replaced below, so its receivers are
            # woken here, or a message now visible would wake nobody.
            self._wake_visible(now)
        earliest = self._queue.next_visible(now)
        self._core.set_alarm(ALARM_SOURCE, earliest)
        if earliest == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None
        if earliest is not None:
            self._timer_at = earliest
            self._timer = call_later(self._clock, (earliest - now) / 1000, self._visible_again)

    def _visible_again(self) -> None:
        self._timer = self._timer_at = None
        if self._core.abort.aborted:
            return
        # The loop's timer runs on the monotonic clock, so this may run a little before
        # the wall clock's due time. One reading for the wake and the next timer: with
        # two, a message due in the millisecond between them was neither woken nor
        # timed, and its receiver waited for ever (seen on a cluster's survivor).
        now = self._clock.now_ms()
        self._wake_visible(now)
        self.rearm(now)

    def _wake_visible(self, now: int) -> None:
        """Wake the receivers of every queue with a message visible at ``now``."""
        for name in self._queue.visible_names(now):
            self._queue.wake_waiters(name)


def _exhausted(attempts: int, limit: int, error: str | None) -> str:
    reason = f"delivered {attempts} times without completion (max_attempts {limit})"
    return reason if error is None else f"{reason}; last error: {error}"


async def administer_dead_letter(
    queue: ActorQueue, kind: str, argument: str | None
) -> dict[str, Any] | None:
    """An operator's ``requeue`` (the message, back in its queue) or ``drop`` (``None``)
    of the dead letter whose id is ``argument``, on the live actor's ``queue``."""
    try:
        message_id = int(argument or "")
    except ValueError:
        raise InvalidRequest(
            f"A dead letter is named by its message id (an integer), not {argument!r}.",
            code="invalid_message_id",
        ) from None
    if kind == "drop":
        await queue.leases.drop(message_id)
        return None
    record = await queue.leases.requeue(message_id)
    return {"id": record.id, "queue": record.name, "attempts": record.attempts}

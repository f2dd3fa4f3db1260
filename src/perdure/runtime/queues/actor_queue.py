"""Durable queues of one live actor.

Messages live in the store and, while the actor is awake, in memory (bounded by
``max_queue_size``). A send is durable before it returns: the message joins the actor's
next flush. Receivers take messages in id order among the names they ask for.

Receiving outside a workflow removes the message with the next flush (at most once);
``completable=True`` leases it until ``complete()`` (at least once: redelivered when the
lease runs out, a dead letter after ``max_attempts``; :mod:`perdure.runtime.queues.leases`).
Inside a workflow the engine removes the message in the same transaction that records it
in history, so a message is never lost and never applied twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from perdure._time import send_delay, send_due_at
from perdure.errors import ActorAborted, QueueError
from perdure.queue_message import QueueMessage
from perdure.runtime.kernel.clock import wait_first
from perdure.runtime.kernel.core import AbortSignal
from perdure.runtime.queues.leases import QueueLeases
from perdure.runtime.queues.limits import QueueLimiter
from perdure.schemas import to_plain
from perdure.store.base import QueueMessageRecord
from perdure.store.encoding import decode_value, encode_value

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore

__all__ = ["ActorQueue", "QueueMessage", "QueueSendResult", "StopSignal", "stop_signal_fired"]

# What a receive's ``signal=`` may be (rivetkit's AbortSignal): an ``asyncio.Event``, whose
# ``set()`` stops the wait, or the actor's own ``c.abort_signal``.
StopSignal = asyncio.Event | AbortSignal


def stop_signal_fired(signal: StopSignal) -> bool:
    """True once ``signal`` has fired."""
    return signal.is_set() if isinstance(signal, asyncio.Event) else signal.aborted


@dataclass(frozen=True, slots=True)
class QueueSendResult:
    """What a waiting sender gets: ``completed`` with the receiver's response, or
    ``timedOut``; a send that does not wait gets ``completed`` (enqueued), or ``queued``
    when it is delayed (hidden until due)."""

    status: Literal["completed", "timedOut", "queued"]
    response: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The wire shape ``{status, response}``."""
        return {"status": self.status, "response": self.response}


class _SenderReleased(Exception):
    """Ends a sender's wait for a completion early (the server is shutting down)."""


class _Waiter:
    __slots__ = ("future", "names")

    def __init__(self, names: frozenset[str] | None, future: asyncio.Future[None]) -> None:
        self.names = names
        self.future = future


class ActorQueue:
    """The queue of one awake actor (``c.queue``)."""

    def __init__(
        self, core: ActorCore, records: Iterable[QueueMessageRecord], *, next_id: int
    ) -> None:
        """``next_id``: the id the next message gets (stored with the actor)."""
        self._core = core
        # Live messages in id order, which receives walk without sorting (a deep queue
        # of 1,000 messages cost a sort on every receive). A new message has the highest
        # id yet; one put back under an older id (restore, a requeued dead letter)
        # marks the order broken, and the next receive sorts once.
        self._messages: dict[int, QueueMessageRecord] = {}
        self._in_order = True
        self.dead: dict[int, QueueMessageRecord] = {}  # dead letters, by id
        for record in sorted(records, key=_by_id):
            (self._messages if record.dead_at is None else self.dead)[record.id] = record
        # Completable messages a workflow received, not yet completed (a leased message
        # is hidden by its visible_at instead).
        self._held: set[int] = set()
        self._next_id = next_id
        self._waiters: list[_Waiter] = []
        self._completions: dict[int, asyncio.Future[Any]] = {}
        self.leases = QueueLeases(self, core)
        limited = {
            name: spec.limits
            for name, spec in (core.definition.queues or {}).items()
            if spec.limits is not None
        }
        # Only an actor with a limited queue has one: the others' receives read one
        # attribute more (docs/queues.md, "Concurrency and rate limits").
        self.limiter = QueueLimiter(core, limited, self.wake_waiters) if limited else None
        if self.limiter is not None:
            for record in self._messages.values():
                self.limiter.track(record)

    @classmethod
    async def load(cls, core: ActorCore, *, next_id: int) -> ActorQueue:
        """The queue of an actor waking up, read from the store: its messages and the
        rate windows of its limited queues."""
        queue = cls(core, await core.store.load_queue(core.actor_id), next_id=next_id)
        if queue.limiter is not None:
            await queue.limiter.load()
        return queue

    @property
    def core(self) -> ActorCore:
        """The core of the actor this queue belongs to."""
        return self._core

    # ------------------------------------------------------------------ sending

    def enqueue(
        self,
        name: str,
        body: Any,
        *,
        validated: bool = False,
        delay: float | None = None,
        at: int | None = None,
    ) -> QueueMessageRecord:
        """Add a message; it is durable with the actor's next flush. ``validated``: the
        caller has already checked it with ``definition.validate_message``. ``delay``
        (seconds) or ``at`` (epoch ms), checked by ``send_delay``: the message stays
        hidden until then (its ``visible_at``; the queue's alarm wakes the actor)."""
        due = None if delay is None and at is None else self._due(delay, at)
        if not validated:
            body = self._core.definition.validate_message(name, body)
        self.check_room(1)
        return self._stage(name, self._encoded(name, body), due)

    def enqueue_checked(
        self, name: str, data: bytes, *, delay: float | None = None, at: int | None = None
    ) -> QueueMessageRecord:
        """Add a message :meth:`check_send` has checked and encoded (a workflow step's,
        once the step has succeeded); otherwise as :meth:`enqueue`."""
        due = None if delay is None and at is None else self._due(delay, at)
        self.check_room(1)
        return self._stage(name, data, due)

    def _stage(self, name: str, data: bytes, due: int | None) -> QueueMessageRecord:
        observer = self._core.observer
        # The sender's trace context goes with the message, so that its consumer is
        # traced in the sender's trace, after a restart too (docs/tracing.md).
        trace = observer.trace_carrier() if observer.traces else None
        now = self._core.clock.now_ms()
        record = QueueMessageRecord(self._next_id, name, data, now, trace, visible_at=due)
        self._next_id += 1
        self._messages[record.id] = record
        if self.limiter is not None:
            self.limiter.track(record)
        self._core.commits.put_message(record, self._next_id)
        if due is None:
            self.wake_waiters(name)
        else:
            self.leases.rearm()  # the alarm (and timer) of the earliest hidden message
        return record

    def check_send(self, name: str, body: Any) -> bytes:
        """Check a message now (its queue, schema and size) without staging it, and
        return it encoded for :meth:`enqueue_checked`: a workflow step's send is staged
        only once the step succeeds (docs/queues.md)."""
        return self._encoded(name, self._core.definition.validate_message(name, body))

    def check_room(self, count: int) -> None:
        """Fail with ``queue.full`` unless ``count`` more messages fit."""
        limit = self._core.options.max_queue_size
        if len(self._messages) + count > limit:
            # rivetkit 2.3.19's texts and metadata (rivetkit-core's QueueFull and
            # QueueMessageTooLarge), byte for byte.
            raise QueueError(
                f"Queue is full. Limit is {limit} messages.", code="full", metadata={"limit": limit}
            )

    def _encoded(self, name: str, body: Any) -> bytes:
        limiter = self.limiter
        if limiter is not None and (limits := limiter.limits(name)) is not None:
            limits.key_of(to_plain(body))  # refused now, not passed over at each receive
        data = encode_value(body, what=f"message for queue `{name}`")
        limit = self._core.options.max_queue_message_size
        if len(data) > limit:
            raise QueueError(
                f"Queue message too large ({len(data)} bytes). Limit is {limit} bytes.",
                code="message_too_large",
                metadata={"size": len(data), "limit": limit},
            )
        return data

    def _due(self, delay: float | None, at: int | None) -> int | None:
        """When a delayed send becomes visible (``None``: at once)."""
        delay, at = send_delay(delay, at, wait=False)
        return send_due_at(delay, at, self._core.clock.now_ms())

    async def send(
        self,
        name: str,
        body: Any,
        *,
        wait: bool = False,
        timeout: float | None = None,
        validated: bool = False,
        delay: float | None = None,
        at: int | None = None,
    ) -> QueueSendResult:
        """Enqueue durably; with ``wait`` also wait (up to ``timeout``) for ``complete()``.
        ``delay``/``at``: a delayed send (``queued``), which cannot wait."""
        if delay is not None or at is not None:
            delay, at = send_delay(delay, at, wait=wait)
        span = self._core.observer.queue_send(self._core, name)
        if span is None:
            return await self._send(name, body, wait, timeout, validated, delay, at)
        try:
            result = await self._send(name, body, wait, timeout, validated, delay, at)
        except BaseException as exc:
            span.end(exc)
            raise
        span.end(None)
        return result

    async def _send(
        self,
        name: str,
        body: Any,
        wait: bool,
        timeout: float | None,
        validated: bool,
        delay: float | None,
        at: int | None,
    ) -> QueueSendResult:
        record = self.enqueue(name, body, validated=validated, delay=delay, at=at)
        completion: asyncio.Future[Any] | None = None
        if wait:
            completion = asyncio.get_running_loop().create_future()
            self._completions[record.id] = completion
        await self._core.request_flush()
        if completion is None:
            return QueueSendResult("completed" if record.visible_at is None else "queued")
        try:
            async with asyncio.timeout(timeout):
                response = await asyncio.shield(completion)
            return QueueSendResult("completed", response)
        except (TimeoutError, _SenderReleased):
            return QueueSendResult("timedOut")
        finally:
            self._completions.pop(record.id, None)

    def release_waiting_senders(self) -> None:
        """Answer every sender still waiting for a completion with ``timedOut`` now.

        The server calls this when it starts to shut down: a sender's wait may be long,
        and its open request would otherwise hold the shutdown for the whole graceful
        period. The messages stay queued; only the waiting ends.
        """
        for completion in self._completions.values():
            if not completion.done():
                completion.set_exception(_SenderReleased())

    # ---------------------------------------------------------------- receiving

    def available(self, names: frozenset[str] | None, count: int) -> list[QueueMessageRecord]:
        """Up to ``count`` messages matching ``names`` (all if None), in id order."""
        found: list[QueueMessageRecord] = []
        now = self._core.clock.now_ms()
        if not self._in_order:
            self._messages = dict(sorted(self._messages.items()))
            self._in_order = True
        held = self._held
        if self.limiter is not None:
            return self.limiter.available(self._messages, held, names, count, now)
        for message_id, record in self._messages.items():
            if message_id in held:
                continue
            if record.visible_at is not None and record.visible_at > now:
                continue  # leased, or given back with a delay
            if names is None or record.name in names:
                found.append(record)
                if len(found) == count:
                    break
        return found

    def take(self, records: list[QueueMessageRecord], *, completable: bool) -> list[QueueMessage]:
        """Claim messages (see :meth:`consume`) and return them to the receiver."""
        self.consume(records, completable=completable)
        return [self.to_message(record, completable=completable) for record in records]

    def consume(self, records: Sequence[QueueMessageRecord], *, completable: bool) -> None:
        """Claim messages: remove them (with the next flush) or hold them until completed."""
        commits = self._core.commits
        for record in records:
            if completable:
                self._held.add(record.id)
            else:
                del self._messages[record.id]
                commits.delete_message(record.id)
                if self.limiter is not None:
                    self.limiter.untrack(record.id)
        self.observe_consumed(records)

    def observe_consumed(self, messages: Sequence[QueueMessageRecord | QueueMessage]) -> None:
        """Tell the observer how many messages of each queue were received."""
        counts: dict[str, int] = {}
        for message in messages:
            counts[message.name] = counts.get(message.name, 0) + 1
        observer = self._core.observer
        for queue_name, count in counts.items():
            observer.message_consumed(self._core, queue_name, count)
        if self.limiter is not None:
            self.limiter.started(messages)
            self.limiter.forget(self._messages)

    def check_receive(self, names: frozenset[str] | None, completable: bool, call: str) -> None:
        """Refuse a receive its queues' limits do not allow (``queue.*``): one that is
        not completable, of a queue with a concurrency limit."""
        if self.limiter is not None:
            self.limiter.check_receive(names, completable, call)

    # ------------------------------------------------------------ lease support

    def live(self, message_id: int) -> QueueMessageRecord | None:
        """The live (not dead) message with this id, if it is still queued."""
        return self._messages.get(message_id)

    def is_held(self, message_id: int) -> bool:
        """True while a workflow holds the message (received completable, not completed)."""
        return message_id in self._held

    def replace(self, record: QueueMessageRecord) -> None:
        """Put a live message's new version in memory (the caller stages its write)."""
        self._put_back(record)

    def remove(self, message_id: int, *, keep_row: bool = False) -> None:
        """Take a message out of the live queue; its row is deleted unless ``keep_row``."""
        self._held.discard(message_id)
        record = self._messages.pop(message_id, None)
        if record is not None:
            if not keep_row:
                self._core.commits.delete_message(message_id)
            limiter = self.limiter
            if limiter is not None:
                limiter.untrack(message_id)
                if limiter.limits(record.name) is not None:
                    # It may have been in progress: a receiver its limit held back can go on.
                    self.wake_waiters(record.name)

    def next_visible(self, now: int) -> int | None:
        """The earliest ``visible_at`` after ``now`` (a lease or a nack delay), if any."""
        return min(
            (r.visible_at for r in self._messages.values() if r.visible_at and r.visible_at > now),
            default=None,
        )

    def visible_names(self, now: int) -> set[str]:
        """The queues of messages whose ``visible_at`` has come (leases run out)."""
        return {r.name for r in self._messages.values() if r.visible_at and r.visible_at <= now}

    def hold(self, message_id: int) -> None:
        """Mark a message as received-but-not-completed (replayed from workflow history)."""
        if message_id in self._messages:
            self._held.add(message_id)

    def restore(self, record: QueueMessageRecord) -> None:
        """Put a message taken earlier back in the queue under its own id (a workflow
        replayed from before the receive that took it); durable with the next flush."""
        if record.id in self._messages:
            # Still here: a completable message the deleted receive held, not completed.
            self._held.discard(record.id)
            self.wake_waiters(record.name)
            return
        self._put_back(record)
        self._core.commits.put_message(record, self._next_id)
        self.wake_waiters(record.name)

    def _put_back(self, record: QueueMessageRecord) -> None:
        """Set a message that may be older than the newest one queued (see __init__)."""
        messages = self._messages
        if self._in_order and record.id not in messages and messages:
            self._in_order = record.id > next(reversed(messages))
        messages[record.id] = record
        if self.limiter is not None:
            self.limiter.track(record)

    def forget(self, message_id: int) -> None:
        """Drop a message from memory (it was consumed by a committed history entry)."""
        self._messages.pop(message_id, None)
        if self.limiter is not None:
            self.limiter.untrack(message_id)

    def to_message(self, record: QueueMessageRecord, *, completable: bool) -> QueueMessage:
        """The user-facing message for a stored record."""
        return QueueMessage(
            record.id,
            record.name,
            self.message_body(record.name, decode_value(record.body)),
            record.created_at,
            completable,
            completer=self if completable else None,
        )

    def message_body(self, name: str, plain: Any) -> Any:
        """A stored (plain) body as receivers get it: the queue's schema type, if any."""
        return self._core.definition.message_body(name, plain)

    async def complete(self, message: QueueMessage, response: Any) -> None:
        """Remove a completable message durably, then answer its waiting sender."""
        self.remove(message.id)
        await self._core.request_flush()
        self.resolve_completion(message.id, response)

    @property
    def next_id(self) -> int:
        """The id the next message sent will get."""
        return self._next_id

    async def attach(self, message_id: int, timeout: float | None) -> QueueSendResult:
        """Wait (up to ``timeout``) again for message ``message_id`` to be completed: a
        retried keyed send (docs/idempotency.md). A message no longer queued was
        completed or consumed: ``completed``, with no response (none is kept)."""
        if message_id not in self._messages:
            return QueueSendResult("completed")
        completion = self._completions.get(message_id)
        if completion is None:
            completion = asyncio.get_running_loop().create_future()
            self._completions[message_id] = completion
        try:
            async with asyncio.timeout(timeout):
                return QueueSendResult("completed", await asyncio.shield(completion))
        except (TimeoutError, _SenderReleased):
            return QueueSendResult("timedOut")
        finally:
            if self._completions.get(message_id) is completion and completion.done():
                del self._completions[message_id]

    async def abandon(self, message_id: int, error: BaseException) -> None:
        """Remove a held message durably, then answer its waiting sender with ``error``
        (the workflow run that took it ended without completing it)."""
        self.remove(message_id)
        await self._core.request_flush()
        completion = self._completions.get(message_id)
        if completion is not None and not completion.done():
            completion.set_exception(error)

    def resolve_completion(self, message_id: int, response: Any) -> None:
        """Answer a sender waiting on ``message_id`` (if any)."""
        completion = self._completions.get(message_id)
        if completion is not None and not completion.done():
            completion.set_result(to_plain(response))  # as every transport sends it

    async def wait_for(
        self,
        names: frozenset[str] | None,
        timeout: float | None,
        signal: StopSignal | None = None,
    ) -> bool:
        """Wait until a matching message is available; False on timeout. ``ActorAborted``
        when the actor shuts down or ``signal`` fires first (a message already there is
        returned all the same, and a zero timeout returns False at once, as rivetkit
        does)."""
        if self.available(names, 1):
            return True
        if timeout is not None and timeout <= 0:
            return False  # nothing to wait for, so nothing to stop (rivetkit's order too)
        if signal is not None and stop_signal_fired(signal):
            raise ActorAborted()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(names, future)
        self._waiters.append(waiter)
        stops: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._core.abort.wait())}
        if signal is not None:
            stops.add(asyncio.ensure_future(signal.wait()))
        try:
            # The timeout is durable time: the runtime's clock counts it.
            done = await wait_first(self._core.clock, {future, *stops}, timeout)
            if future not in done and done & stops:
                raise ActorAborted()
            return future in done
        finally:
            for stop in stops:
                stop.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def wake_waiters(self, name: str) -> None:
        """Wake the receivers waiting for messages of queue ``name``."""
        for waiter in self._waiters:
            if (waiter.names is None or name in waiter.names) and not waiter.future.done():
                waiter.future.set_result(None)

    def __len__(self) -> int:
        return len(self._messages)

    def limit_counts(self) -> dict[str, tuple[int, int]]:
        """``{queue: (in progress, waiting for a slot)}`` of the limited queues."""
        if self.limiter is None:
            return {}
        return self.limiter.summary(self._messages, self._held, self._core.clock.now_ms())


def _by_id(record: QueueMessageRecord) -> int:
    return record.id

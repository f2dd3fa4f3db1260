"""Concurrency and rate limits of an actor's queues, per limit key (docs/queues.md,
"Concurrency and rate limits").

A queue declared with ``concurrency=`` lets at most that many of its messages of one
key be *in progress* at once: received with ``completable=True`` and not completed,
given back or dead, which is what the queue already stores (a lease: ``attempts > 0``
and ``visible_at`` still to come) or rebuilds from workflow history (a workflow's held
message). So the counts are derived, at each receive, from durable records: nothing
to lose in a ``kill -9``. A queue declared with ``rate=(starts, period)`` lets at most
``starts`` messages of one key be received per ``period``: each receive's start time
is kept in a window per key, written with the receive's commit as a record of the
actor's KV space under a prefix no user key can have, and loaded at wake.

A receive walks the queue in id order and passes over messages whose key is at its
limit, so one busy tenant does not hold back the others. A receiver left waiting is
woken when a slot frees (a completion, a dead letter, a lease running out: the queue's
own timer) or when a rate window reopens (this module's timer, and the actor's alarm
should it sleep meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from perdure.errors import QueueError
from perdure.queue_message import QueueLimits, QueueMessage
from perdure.runtime.kernel.clock import TimerHandle, call_later
from perdure.store.base import QueueMessageRecord
from perdure.store.encoding import decode_value, encode_value
from perdure.store.kv import INTERNAL_TAG, prefix_end

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore

__all__ = [
    "RATE_ALARM_SOURCE",
    "RATE_PREFIX",
    "QueueLimiter",
    "Slot",
    "in_progress",
    "limit_key",
    "limits_view",
]

# The rate windows' records in the actor's KV space: user keys start with b"b" or b"s".
RATE_PREFIX = INTERNAL_TAG + b"queue-rate\x00"
RATE_ALARM_SOURCE = "queue_rate"  # among the actor's alarms (ActorCore.set_alarm)
Slot = tuple[str, str]  # (queue, limit key)


class QueueLimiter:
    """The limits of one awake actor's limited queues (``queue.limiter``)."""

    def __init__(
        self, core: ActorCore, limits: Mapping[str, QueueLimits], wake: Callable[[str], None]
    ) -> None:
        """``limits``: the limited queues' declarations; ``wake(name)`` wakes the
        receivers waiting on queue ``name``."""
        self._core = core
        self._clock = core.clock
        self._limits = dict(limits)
        self._wake = wake
        self._keys: dict[int, str] = {}  # message id -> its limit key (decoded once)
        # The limited queues' messages with a visible_at (leased, given back with a
        # delay, or delayed sends): where leases are, so that counting what is in
        # progress walks those and the held ones, not the whole queue.
        self._hidden: dict[int, QueueMessageRecord] = {}
        # Start times (epoch ms, oldest first) of each slot whose queue has a rate, in
        # the order of their latest start, so expired windows are found at the front.
        self._windows: dict[Slot, list[int]] = {}
        self._timer: TimerHandle | None = None
        self._timer_at: int | None = None
        self._reopening: set[str] = set()  # queues whose receivers the timer wakes

    def limits(self, name: str) -> QueueLimits | None:
        """The limits of queue ``name`` (``None``: it has none)."""
        return self._limits.get(name)

    def check_receive(self, names: frozenset[str] | None, completable: bool, call: str) -> None:
        """Refuse a receive that is not completable from a queue with a concurrency
        limit: a message received so has no end, so it could never free its slot."""
        if completable:
            return
        for name, limits in self._limits.items():
            if limits.concurrency is not None and (names is None or name in names):
                raise QueueError(
                    f"{call}: queue `{name}` limits how many messages are in progress, "
                    "which needs a receive that ends: pass completable=True (and complete "
                    "each message), or name only other queues.",
                    code="concurrency_needs_completable",
                    metadata={"queue": name},
                )

    # ---------------------------------------------------------------- receiving

    def available(
        self,
        messages: Mapping[int, QueueMessageRecord],
        held: set[int],
        names: frozenset[str] | None,
        count: int,
        now: int,
        *,
        arm: bool = True,
    ) -> list[QueueMessageRecord]:
        """Up to ``count`` visible messages matching ``names``, in id order, passing
        over those whose key is at its limit (counting the ones picked before them).
        ``arm``: when a rate limit held some back, wake the receivers when it reopens."""
        busy = self.in_progress(messages, held, now)
        picked: dict[Slot, int] = {}
        found: list[QueueMessageRecord] = []
        reopen: int | None = None
        for message_id, record in messages.items():
            if message_id in held or (record.visible_at is not None and record.visible_at > now):
                continue
            if names is not None and record.name not in names:
                continue
            limits = self._limits.get(record.name)
            if limits is not None:
                slot = (record.name, self.key(record))
                taken = picked.get(slot, 0)
                if (
                    limits.concurrency is not None
                    and busy.get(slot, 0) + taken >= limits.concurrency
                ):
                    continue
                if limits.rate is not None:
                    window = self._window(slot, limits.rate, now)
                    if len(window) + taken >= limits.rate[0]:
                        opens = window[0] + _ms(limits.rate[1]) if window else now
                        reopen = opens if reopen is None else min(reopen, opens)
                        self._reopening.add(record.name)
                        continue
                picked[slot] = taken + 1
            found.append(record)
            if len(found) == count:
                break
        if arm and reopen is not None and len(found) < count:
            self._arm(reopen)
        return found

    def in_progress(
        self, messages: Mapping[int, QueueMessageRecord], held: set[int], now: int
    ) -> dict[Slot, int]:
        """How many messages of each slot are in progress (:func:`in_progress`)."""
        hidden = self._hidden
        candidates = chain(
            (messages[i] for i in held if i in messages and i not in hidden), hidden.values()
        )
        return in_progress(self._limits, candidates, held, now, self.key)

    def track(self, record: QueueMessageRecord) -> None:
        """Note a message's new version (the queue calls this for every put)."""
        if record.visible_at is not None and record.name in self._limits:
            self._hidden[record.id] = record
        else:
            self._hidden.pop(record.id, None)

    def untrack(self, message_id: int) -> None:
        """Forget a message that left the live queue."""
        self._hidden.pop(message_id, None)

    def key(self, record: QueueMessageRecord) -> str:
        """A message's limit key (:func:`limit_key`), decoded from its body once."""
        key = self._keys.get(record.id)
        if key is None:
            key = self._keys[record.id] = limit_key(self._limits, record)
        return key

    def started(self, messages: Sequence[QueueMessageRecord | QueueMessage]) -> None:
        """Note that ``messages`` were received now: each one's start enters its key's
        rate window, written with the actor's next commit."""
        now = self._clock.now_ms()
        for message in messages:
            limits = self._limits.get(message.name)
            if limits is None or limits.rate is None:
                continue
            key = self._keys.get(message.id)
            if key is None:
                continue  # not picked through available(): not limited by it either
            slot = (message.name, key)
            window = self._window(slot, limits.rate, now)
            window.append(now)
            self._windows.pop(slot, None)
            self._windows[slot] = window  # now the latest started
            self._core.commits.put_kv(_record_key(slot), encode_value(window))
        self._sweep(now)

    def forget(self, live: Mapping[int, object]) -> None:
        """Drop the cached keys of messages no longer queued (``live``: those that are,
        by id), once the cache has grown past twice their number: amortized, a receive
        does not walk the queue for it."""
        if len(self._keys) > 2 * len(live) + 64:
            self._keys = {i: k for i, k in self._keys.items() if i in live}

    # -------------------------------------------------------------- rate windows

    async def load(self) -> None:
        """Read the rate windows stored by earlier runs (at wake), dropping those that
        have run out."""
        if not any(limits.rate is not None for limits in self._limits.values()):
            return
        core = self._core
        rows = await core.store.kv_list(
            core.actor_id, start=RATE_PREFIX, end=prefix_end(RATE_PREFIX)
        )
        now = self._clock.now_ms()
        loaded: list[tuple[int, Slot, list[int]]] = []
        for stored_key, value in rows:
            slot = _slot_of(stored_key)
            limits = None if slot is None else self._limits.get(slot[0])
            starts = decode_value(value)
            if slot is None or limits is None or limits.rate is None or not starts:
                core.commits.delete_kv(stored_key)  # a queue no longer limited by rate
                continue
            period = _ms(limits.rate[1])
            window = [int(t) for t in starts if int(t) + period > now]
            if window:
                loaded.append((window[-1], slot, window))
            else:
                core.commits.delete_kv(stored_key)
        for _, slot, window in sorted(loaded):
            self._windows[slot] = window

    def _window(self, slot: Slot, rate: tuple[int, float], now: int) -> list[int]:
        """``slot``'s starts within the period before ``now`` (pruned in place)."""
        window = self._windows.get(slot)
        if window is None:
            return []
        cutoff = now - _ms(rate[1])
        if window and window[0] <= cutoff:
            window[:] = [t for t in window if t > cutoff]
        return window

    def _sweep(self, now: int) -> None:
        """Forget the windows that have run out (the oldest-started first), with their
        records: the windows kept are those of keys started within one period."""
        windows = self._windows
        while windows:
            slot, window = next(iter(windows.items()))
            limits = self._limits[slot[0]]
            assert limits.rate is not None  # only rate-limited queues have windows
            if window and window[-1] + _ms(limits.rate[1]) > now:
                return
            del windows[slot]
            self._core.commits.delete_kv(_record_key(slot))

    # ------------------------------------------------------------------- timing

    def _arm(self, at: int) -> None:
        """Wake the receivers of the held-back queues at ``at`` (and the actor, should
        it sleep first), unless an earlier timer will."""
        if self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        now = self._clock.now_ms()
        self._timer = call_later(self._clock, max(at - now, 0) / 1000, self._reopened)
        self._core.set_alarm(RATE_ALARM_SOURCE, at)

    def _reopened(self) -> None:
        at = self._timer_at
        self._timer = self._timer_at = None
        if self._core.abort.aborted or at is None:
            return
        # The loop's timer may end a little before the wall clock's due time (uvloop
        # rounds to whole milliseconds from a cached loop time): a window checked then
        # is still closed, and a waiting receiver would sleep on. Wait out the rest.
        if self._clock.now_ms() < at:
            self._arm(at)
            return
        self._core.set_alarm(RATE_ALARM_SOURCE, None)
        names, self._reopening = self._reopening, set()
        for name in names:
            self._wake(name)  # each re-checks; one still held back arms the timer again

    # -------------------------------------------------------------------- views

    def summary(
        self, messages: Mapping[int, QueueMessageRecord], held: set[int], now: int
    ) -> dict[str, tuple[int, int]]:
        """``{queue: (in progress, waiting for a slot)}`` for each limited queue:
        waiting are the visible messages a receive would pass over now."""
        busy = self.in_progress(messages, held, now)
        result: dict[str, tuple[int, int]] = {}
        for name in self._limits:
            visible = sum(
                1
                for i, r in messages.items()
                if r.name == name
                and i not in held
                and (r.visible_at is None or r.visible_at <= now)
            )
            eligible = self.available(
                messages, held, frozenset((name,)), visible or 1, now, arm=False
            )
            in_progress = sum(n for (queue, _), n in busy.items() if queue == name)
            result[name] = (in_progress, visible - len(eligible))
        return result


def limit_key(limits: Mapping[str, QueueLimits], record: QueueMessageRecord) -> str:
    """A stored message's limit key. A body the key no longer reads (the code changed)
    falls under the empty key: a receive never fails on an old message."""
    spec = limits.get(record.name)
    try:
        return "" if spec is None else spec.key_of(decode_value(record.body))
    except QueueError:
        return ""


def in_progress(
    limits: Mapping[str, QueueLimits],
    records: Iterable[QueueMessageRecord],
    held: set[int],
    now: int,
    key: Callable[[QueueMessageRecord], str],
) -> dict[Slot, int]:
    """How many messages of each slot of a queue with a concurrency limit are in
    progress: leased (delivered, hidden until their lease ends, or until a nack's delay
    ends) or held by a workflow (received completable, not completed)."""
    counts: dict[Slot, int] = {}
    for record in records:
        spec = limits.get(record.name)
        if spec is None or spec.concurrency is None:
            continue
        if record.id in held or (
            record.attempts > 0 and record.visible_at is not None and record.visible_at > now
        ):
            slot = (record.name, key(record))
            counts[slot] = counts.get(slot, 0) + 1
    return counts


def limits_view(
    limits: Mapping[str, QueueLimits],
    records: Sequence[QueueMessageRecord],
    held: set[int],
    windows: Iterable[tuple[bytes, bytes]],
    now: int,
    max_keys: int,
) -> dict[str, Any]:
    """The admin API's view of an actor's limited queues, from what is stored: its
    live ``records``, the ``held`` ids its workflow history names, and its rate
    windows' KV rows. Per queue: the declaration, the totals, and the ``max_keys``
    keys with the most in progress (then the most starts in the window)."""
    busy = in_progress(limits, records, held, now, lambda record: limit_key(limits, record))
    started: dict[Slot, int] = {}
    for stored_key, value in windows:
        slot = _slot_of(stored_key)
        spec = None if slot is None else limits.get(slot[0])
        if slot is not None and spec is not None and spec.rate is not None:
            period = _ms(spec.rate[1])
            started[slot] = sum(1 for t in decode_value(value) if int(t) + period > now)
    view: dict[str, Any] = {}
    for name, spec in limits.items():
        slots = {slot for slot in (*busy, *started) if slot[0] == name}
        ranked = sorted(slots, key=lambda s: (-busy.get(s, 0), -started.get(s, 0), s[1]))
        view[name] = {
            "concurrency": spec.concurrency,
            "rate": None if spec.rate is None else {"limit": spec.rate[0], "period": spec.rate[1]},
            "key": spec.key if isinstance(spec.key, str) or spec.key is None else "(function)",
            "in_progress": sum(busy.get(slot, 0) for slot in slots),
            "keys_total": len(slots),
            "keys": [
                {"key": s[1], "in_progress": busy.get(s, 0), "started": started.get(s, 0)}
                for s in ranked[:max_keys]
            ],
        }
    return view


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _record_key(slot: Slot) -> bytes:
    queue, key = slot
    return RATE_PREFIX + queue.encode("utf-8") + b"\x00" + key.encode("utf-8")


def _slot_of(stored: bytes) -> Slot | None:
    queue, sep, key = stored[len(RATE_PREFIX) :].partition(b"\x00")
    if not sep:
        return None
    return queue.decode("utf-8", "replace"), key.decode("utf-8", "replace")

"""An in-process store built on dicts: for tests, development and ``memory://``.

It keeps the exact semantics of the SQL backends (same errors, same ordering, the same
all-or-nothing commit) but nothing survives the process. Stored values are immutable
(``bytes``, frozen records, tuples) and every mapping or list handed out is a fresh copy,
so a caller cannot change stored data by mutating what it passed in or got back.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Callable, Sequence

from perdure.errors import (
    ActorAlreadyExists,
    ActorNotFound,
    ActorOwnedElsewhere,
    StoreClosed,
)
from perdure.keys import Key
from perdure.store._shared import (
    actor_id_taken,
    actor_missing,
    check_ttl,
    lease_is_live,
    new_node,
    normalize_record,
    wall_clock_ms,
)
from perdure.store.base import (
    ActorCommit,
    ActorRecord,
    ClusterSecret,
    EventRecord,
    IdempotencyRecord,
    Lease,
    NodeRecord,
    QueueMessageRecord,
    ScheduleFireRecord,
    ScheduleRecord,
    Store,
    WakeupCallback,
)

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A :class:`~perdure.store.base.Store` that lives in this process's memory.

    Data outlives ``close()`` (a closed store can be opened again and finds it), but not
    the object. Writes are applied synchronously, so per-actor order is call order, and
    two claims can never interleave. Leases use the wall clock; ``watch_wakeups``
    reports nothing.
    """

    def __init__(self) -> None:
        self._open = False
        self._actors: dict[str, ActorRecord] = {}
        self._by_key: dict[tuple[str, Key], str] = {}
        self._queues: dict[str, dict[int, QueueMessageRecord]] = {}
        self._history: dict[str, dict[str, bytes]] = {}
        self._schedules: dict[str, dict[str, ScheduleRecord]] = {}
        # actor id -> job name -> seq -> fire
        self._fires: dict[str, dict[str, dict[int, ScheduleFireRecord]]] = {}
        # actor id -> (owner node, expires_at): the actor row's lease columns
        self._leases: dict[str, tuple[str, int]] = {}
        # node id -> its registration (``actors`` is counted when listed)
        self._nodes: dict[str, NodeRecord] = {}
        self._cluster_secret: ClusterSecret | None = None
        # actor id -> seq -> event (inserted in seq order, so iteration is ordered)
        self._events: dict[str, dict[int, EventRecord]] = {}
        # actor id -> idempotency key -> its record
        self._keys: dict[str, dict[str, IdempotencyRecord]] = {}
        # actor id -> its KV records: key -> value, and the keys kept sorted (bisect)
        self._kv: dict[str, tuple[dict[bytes, bytes], list[bytes]]] = {}

    async def open(self) -> None:
        """Mark the store usable. Idempotent."""
        self._open = True

    async def close(self) -> None:
        """Mark the store closed; its data stays for a later ``open()``. Idempotent."""
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise StoreClosed("memory")

    async def create_actor(self, record: ActorRecord) -> None:
        """Insert a new actor (see :meth:`Store.create_actor`)."""
        self._check_open()
        record = normalize_record(record)
        if (record.name, record.key) in self._by_key:
            raise ActorAlreadyExists(record.name, record.key)
        if record.actor_id in self._actors:
            raise actor_id_taken(record.actor_id)
        self._actors[record.actor_id] = record
        self._by_key[(record.name, record.key)] = record.actor_id

    async def get_actor(self, actor_id: str) -> ActorRecord | None:
        """The actor with this id, or ``None``."""
        self._check_open()
        return self._actors.get(actor_id)

    async def claim_actor(self, actor_id: str) -> ActorRecord | None:
        """Add one to the actor's generation and clear its lease; its record, or ``None``.

        Refused while a node holds an unexpired lease (see :meth:`Store.claim_actor`)."""
        self._check_open()
        record = self._actors.get(actor_id)
        if record is None:
            return None
        self._refuse_if_owned(actor_id, None, wall_clock_ms())
        self._leases.pop(actor_id, None)
        return self._next_generation(record)

    # --- ownership -------------------------------------------------------------------

    def _refuse_if_owned(self, actor_id: str, node_id: str | None, now: int) -> None:
        lease = self._leases.get(actor_id)
        if lease is not None and lease[0] != node_id and self._lease_live(lease, now):
            raise ActorOwnedElsewhere(actor_id, lease[0], self._held_until(lease))

    def _held_until(self, lease: tuple[str, int]) -> int:
        """Until when a lease keeps others out: its node's heartbeat, if later."""
        node = self._nodes.get(lease[0])
        return lease[1] if node is None else max(lease[1], node.expires_at)

    def _lease_live(self, lease: tuple[str, int], now: int) -> bool:
        node = self._nodes.get(lease[0])
        return lease_is_live(*lease, now, node_expires_at=None if node is None else node.expires_at)

    def _next_generation(self, record: ActorRecord) -> ActorRecord:
        claimed = dataclasses.replace(record, generation=record.generation + 1)
        self._actors[record.actor_id] = claimed
        return claimed

    def _take(
        self, record: ActorRecord, node_id: str, expires_at: int
    ) -> tuple[ActorRecord, Lease]:
        claimed = self._next_generation(record)
        self._leases[record.actor_id] = (node_id, expires_at)
        return claimed, Lease(record.actor_id, node_id, claimed.generation, expires_at)

    async def acquire_lease(
        self, actor_id: str, node_id: str, ttl_ms: int, *, now: int | None = None
    ) -> tuple[ActorRecord, Lease]:
        """Take the actor for ``node_id`` (see :meth:`Store.acquire_lease`)."""
        self._check_open()
        check_ttl(ttl_ms)
        now = wall_clock_ms() if now is None else now
        record = self._actors.get(actor_id)
        if record is None:
            raise ActorNotFound(f"Actor `{actor_id}` does not exist or was destroyed.")
        self._refuse_if_owned(actor_id, node_id, now)
        return self._take(record, node_id, now + ttl_ms)

    def _is_current(self, lease: Lease) -> bool:
        record = self._actors.get(lease.actor_id)
        stored = self._leases.get(lease.actor_id)
        return (
            record is not None
            and record.generation == lease.generation
            and stored is not None
            and stored[0] == lease.node_id
        )

    async def release_lease(self, lease: Lease) -> None:
        """Clear the owner if ``lease`` is still the current one."""
        self._check_open()
        if self._is_current(lease):
            del self._leases[lease.actor_id]

    async def get_lease(self, actor_id: str) -> Lease | None:
        """The lease recorded on the actor, or ``None``."""
        self._check_open()
        stored = self._leases.get(actor_id)
        record = self._actors.get(actor_id)
        if stored is None or record is None:
            return None
        return Lease(actor_id, stored[0], record.generation, stored[1])

    # --- membership ------------------------------------------------------------------

    async def register_node(
        self,
        node_id: str,
        address: str,
        ttl_ms: int,
        *,
        now: int | None = None,
        code_version: str | None = None,
    ) -> NodeRecord:
        """Record the node, replacing an earlier registration of the same id."""
        self._check_open()
        now = wall_clock_ms() if now is None else now
        node = new_node(node_id, address, ttl_ms, now, code_version)
        self._nodes[node_id] = node
        return node

    async def heartbeat_node(
        self, node_id: str, ttl_ms: int, *, draining: bool = False, now: int | None = None
    ) -> NodeRecord | None:
        """Keep the node alive until ``now + ttl_ms``; ``None`` if it is not registered."""
        self._check_open()
        check_ttl(ttl_ms)
        now = wall_clock_ms() if now is None else now
        node = self._nodes.get(node_id)
        if node is None:
            return None
        node = dataclasses.replace(
            node, heartbeat_at=now, expires_at=now + ttl_ms, draining=draining
        )
        self._nodes[node_id] = node
        return node

    async def deregister_node(self, node_id: str) -> None:
        """Forget the node, if it is registered."""
        self._check_open()
        self._nodes.pop(node_id, None)

    async def list_nodes(
        self, *, include_dead: bool = False, count_actors: bool = True, now: int | None = None
    ) -> list[NodeRecord]:
        """The live nodes (all with ``include_dead``) by id, with the actors each owns."""
        self._check_open()
        now = wall_clock_ms() if now is None else now
        counts = collections.Counter(
            owner for owner, _ in (self._leases.values() if count_actors else ())
        )
        return [
            dataclasses.replace(node, actors=counts[node_id])
            for node_id, node in sorted(self._nodes.items())
            if include_dead or node.expires_at > now
        ]

    async def keep_cluster_secret(self, proposed: ClusterSecret) -> ClusterSecret:
        """Keep ``proposed`` unless a secret is kept already; the one kept (runtimes that
        share this store in one process, as nodes of one cluster, agree on it)."""
        self._check_open()
        if self._cluster_secret is None:
            self._cluster_secret = proposed
        return self._cluster_secret

    async def forget_cluster_secret(self) -> bool:
        """Forget the kept secret; ``True`` if there was one."""
        self._check_open()
        kept, self._cluster_secret = self._cluster_secret, None
        return kept is not None

    async def watch_wakeups(self, callback: WakeupCallback) -> Callable[[], None]:
        """Report nothing (see :meth:`Store.watch_wakeups`): only this process writes
        here, and its runtime tells its own scheduler of every alarm it writes."""
        self._check_open()
        return _unwatch

    async def find_actor(self, name: str, key: Key) -> ActorRecord | None:
        """The actor with this name and key, or ``None``."""
        self._check_open()
        actor_id = self._by_key.get((name, tuple(key)))
        return None if actor_id is None else self._actors[actor_id]

    async def commit(self, commit: ActorCommit) -> None:
        """Apply ``commit`` atomically: every check happens before the first change."""
        span = self.observer.commit(1)
        if span is None:
            self._apply(commit)
            return
        try:
            self._apply(commit)
        except Exception as exc:
            span.end(exc)
            raise
        span.end(None)

    def _apply(self, commit: ActorCommit) -> None:
        self._check_open()
        record = self._actors.get(commit.actor_id)
        if record is None or (commit.fence is not None and record.generation != commit.fence):
            raise actor_missing(commit.actor_id)
        self._actors[commit.actor_id] = _updated(record, commit)
        if commit.queue_put or commit.queue_delete:
            queue = self._queues.setdefault(commit.actor_id, {})
            for message in commit.queue_put:
                queue[message.id] = dataclasses.replace(message, body=bytes(message.body))
            for message_id in commit.queue_delete:
                queue.pop(message_id, None)
        if commit.history_put or commit.history_delete:
            history = self._history.setdefault(commit.actor_id, {})
            for location, entry in commit.history_put.items():
                history[location] = bytes(entry)
            for location in commit.history_delete:
                history.pop(location, None)
        if commit.schedule_put or commit.schedule_delete:
            schedules = self._schedules.setdefault(commit.actor_id, {})
            for schedule_id in commit.schedule_delete:
                schedules.pop(schedule_id, None)
            for schedule_id, schedule in commit.schedule_put.items():
                schedules[schedule_id] = dataclasses.replace(schedule, args=bytes(schedule.args))
        if commit.fire_put or commit.fire_prune:
            self._apply_fires(commit)
        if commit.event_put or commit.event_prune is not None:
            self._apply_events(commit)
        if commit.key_put or commit.key_prune is not None:
            self._apply_keys(commit)
        if commit.kv_put or commit.kv_delete or commit.kv_delete_range:
            self._apply_kv(commit)

    def _apply_kv(self, commit: ActorCommit) -> None:
        values, order = self._kv.setdefault(commit.actor_id, ({}, []))
        for start, end in commit.kv_delete_range:
            low = bisect.bisect_left(order, start)
            high = len(order) if end is None else bisect.bisect_left(order, end)
            for key in order[low:high]:
                del values[key]
            del order[low:high]
        for key in commit.kv_delete:
            if values.pop(key, None) is not None:
                del order[bisect.bisect_left(order, key)]
        for key, value in commit.kv_put.items():
            key = bytes(key)
            if key not in values:
                bisect.insort(order, key)
            values[key] = bytes(value)

    def _apply_keys(self, commit: ActorCommit) -> None:
        keys = self._keys.setdefault(commit.actor_id, {})
        if commit.key_prune is not None:
            bound = commit.key_prune
            for key in [k for k, record in keys.items() if record.created_at < bound]:
                del keys[key]
        for record in commit.key_put:
            keys[record.key] = dataclasses.replace(record, answer=bytes(record.answer))

    def _apply_events(self, commit: ActorCommit) -> None:
        log = self._events.setdefault(commit.actor_id, {})
        if commit.event_prune is not None:
            up_to, before = commit.event_prune
            for seq in [s for s, e in log.items() if s <= up_to or e.emitted_at < before]:
                del log[seq]
        for event in commit.event_put:
            log[event.seq] = dataclasses.replace(event, args=bytes(event.args))

    def _apply_fires(self, commit: ActorCommit) -> None:
        jobs = self._fires.setdefault(commit.actor_id, {})
        for name, up_to in commit.fire_prune:
            fires = jobs.get(name, {})
            for seq in [seq for seq in fires if seq <= up_to]:
                del fires[seq]
            if not fires:
                jobs.pop(name, None)
        for fire in commit.fire_put:
            error = None if fire.error is None else bytes(fire.error)
            jobs.setdefault(fire.name, {})[fire.seq] = dataclasses.replace(fire, error=error)

    async def delete_actor(self, actor_id: str) -> bool:
        """Delete the actor with all its data; ``False`` if it did not exist."""
        self._check_open()
        record = self._actors.pop(actor_id, None)
        if record is None:
            return False
        del self._by_key[(record.name, record.key)]
        self._queues.pop(actor_id, None)
        self._history.pop(actor_id, None)
        self._schedules.pop(actor_id, None)
        self._fires.pop(actor_id, None)
        self._leases.pop(actor_id, None)
        self._events.pop(actor_id, None)
        self._keys.pop(actor_id, None)
        self._kv.pop(actor_id, None)
        return True

    async def list_actors(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorRecord]:
        """Actors ordered by id, optionally of one name, after a given id."""
        self._check_open()
        if limit <= 0:
            return []
        chosen = [
            record
            for actor_id, record in self._actors.items()
            if (name is None or record.name == name) and (after is None or actor_id > after)
        ]
        chosen.sort(key=lambda record: record.actor_id)
        return chosen[:limit]

    async def count_actors(self, *, name: str | None = None) -> int:
        """How many actors exist (of one name, if given)."""
        self._check_open()
        if name is None:
            return len(self._actors)
        return sum(1 for record in self._actors.values() if record.name == name)

    async def load_queue(self, actor_id: str) -> list[QueueMessageRecord]:
        """All queued messages of an actor, ordered by id."""
        self._check_open()
        queue = self._queues.get(actor_id, {})
        return [queue[message_id] for message_id in sorted(queue)]

    async def load_history(self, actor_id: str) -> dict[str, bytes]:
        """A copy of the actor's workflow history, by location."""
        self._check_open()
        return dict(self._history.get(actor_id, {}))

    async def load_schedules(self, actor_id: str) -> list[ScheduleRecord]:
        """All scheduled jobs of an actor, ordered by id."""
        self._check_open()
        schedules = self._schedules.get(actor_id, {})
        return [schedules[schedule_id] for schedule_id in sorted(schedules)]

    async def load_events(self, actor_id: str, after_seq: int, limit: int) -> list[EventRecord]:
        """Logged events with ``seq > after_seq``, oldest first, at most ``limit``."""
        self._check_open()
        if limit <= 0:
            return []
        log = self._events.get(actor_id, {})
        return [log[seq] for seq in sorted(log) if seq > after_seq][:limit]

    async def load_fire_history(
        self, actor_id: str, name: str, limit: int
    ) -> list[ScheduleFireRecord]:
        """The newest ``limit`` fires of job ``name``, newest first."""
        self._check_open()
        if limit <= 0:
            return []
        fires = self._fires.get(actor_id, {}).get(name, {})
        return [fires[seq] for seq in sorted(fires, reverse=True)[:limit]]

    async def load_idempotency(self, actor_id: str, key: str) -> IdempotencyRecord | None:
        """The record of the actor's idempotency key ``key``, or ``None``."""
        self._check_open()
        return self._keys.get(actor_id, {}).get(key)

    async def load_idempotency_keys(
        self, actor_id: str, since: int, limit: int
    ) -> list[tuple[str, int]]:
        """The newest ``limit`` keys created at or after ``since``, newest first."""
        self._check_open()
        if limit <= 0:
            return []
        keys = self._keys.get(actor_id, {}).values()
        found = [(k.key, k.created_at) for k in keys if k.created_at >= since]
        found.sort(key=lambda pair: pair[1], reverse=True)
        return found[:limit]

    reads_inline = True

    async def kv_get(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of the actor's KV ``keys`` (``None``: no record)."""
        return self.kv_get_inline(actor_id, keys)

    def kv_get_inline(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """:meth:`kv_get`, at once."""
        self._check_open()
        found = self._kv.get(actor_id)
        if found is None:
            return [None] * len(keys)
        values = found[0]
        return [values.get(bytes(key)) for key in keys]

    async def kv_list(
        self,
        actor_id: str,
        *,
        start: bytes = b"",
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[bytes, bytes]]:
        """The actor's KV records in ``[start, end)``, by key (see :meth:`Store.kv_list`)."""
        self._check_open()
        found = self._kv.get(actor_id)
        if found is None or (limit is not None and limit <= 0):
            return []
        values, order = found
        low = bisect.bisect_left(order, start)
        high = len(order) if end is None else bisect.bisect_left(order, end)
        if high <= low:
            return []
        if reverse:
            first = low if limit is None else max(low, high - limit)
            keys = order[first:high][::-1]
        else:
            keys = order[low:high] if limit is None else order[low : min(high, low + limit)]
        return [(key, values[key]) for key in keys]

    async def due_actors(self, until: int, limit: int) -> list[tuple[str, int]]:
        """Actors whose alarm is at or before ``until``, earliest first (ties by id).

        A linear scan: fine for the sizes a memory store holds.
        """
        self._check_open()
        if limit <= 0:
            return []
        due = [
            (record.wake_at, actor_id)
            for actor_id, record in self._actors.items()
            if record.wake_at is not None and record.wake_at <= until
        ]
        due.sort()
        return [(actor_id, wake_at) for wake_at, actor_id in due[:limit]]

    async def next_wake_at(self) -> int | None:
        """The earliest alarm over all actors, or ``None``."""
        self._check_open()
        alarms = [r.wake_at for r in self._actors.values() if r.wake_at is not None]
        return min(alarms, default=None)


def _unwatch() -> None:
    """What ``watch_wakeups`` returns: there is nothing to stop."""


def _updated(record: ActorRecord, commit: ActorCommit) -> ActorRecord:
    """``record`` with the actor-row fields of ``commit`` applied."""
    changes: dict[str, object] = {}
    if commit.state is not None:
        changes["state"] = bytes(commit.state)
    if commit.initialized is not None:
        changes["initialized"] = commit.initialized
    if commit.generation is not None:
        changes["generation"] = commit.generation
    if commit.set_wake_at:
        changes["wake_at"] = commit.wake_at
    if commit.queue_next_id is not None:
        changes["queue_next_id"] = commit.queue_next_id
    if commit.event_seq is not None:
        changes["event_seq"] = commit.event_seq
    return dataclasses.replace(record, **changes) if changes else record  # type: ignore[arg-type]

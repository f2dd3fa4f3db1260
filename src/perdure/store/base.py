"""The store contract: what every storage backend (memory, SQLite, PostgreSQL) guarantees.

The store only persists. It makes no decisions: replay or run, sleep or wake, retry or
fail are decided in ``perdure.runtime`` and ``perdure.workflows``. Values arrive already
encoded (``bytes``, see :mod:`perdure.store.encoding`); the store never decodes them.

Unit of atomicity: one :class:`ActorCommit`. Every field of a commit (state, queue
messages added and removed, workflow history entries written and deleted, schedules and
their fire history written and deleted, events, idempotency keys, KV records written
and deleted, the alarm ``wake_at``) is applied all together or
not at all. A backend may put the commits of many actors into one database transaction
(group commit) but must isolate their failures: a commit that fails (for instance because
its actor was deleted) fails alone.

Durability: when an awaited write method returns, its effect survives a crash of the
process (``kill -9``). Surviving power loss as well is the ``durability="power"`` mode of a
backend (it fsyncs every group commit); see each backend's docstring.

Ordering: commits for one actor are applied in the order their ``commit`` calls were made.
Times are integers in milliseconds since the Unix epoch.

Ownership (DESIGN §5, §8 "Waking claims, commits are fenced"). Each actor has one fencing
counter, ``generation``, and at most one :class:`Lease`: ``(actor_id, node_id,
generation, expires_at)``, stored on the actor row (``owner_node``,
``lease_expires_at``). Every way of taking an actor for a new instance counts one more
generation, and every commit of that instance is fenced with it
(:attr:`ActorCommit.fence`), so whoever took the actor last is the only one who can
write to it:

- :meth:`Store.acquire_lease` takes it for a node until ``now + ttl_ms``, and refuses
  (:class:`~perdure.errors.ActorOwnedElsewhere`) while another node's lease is
  unexpired;
- :meth:`Store.claim_actor` is the one-node form (a single server, SQLite): it takes the
  actor without recording an owner, and refuses as acquiring does while a node's lease
  is unexpired;
- :meth:`Store.release_lease` gives the actor back (clears the owner, keeps the
  generation).

A lease is live while ``now < expires_at``, or while its node is registered and its
heartbeat has not expired (:meth:`Store.register_node`, ``nodes.expires_at``). Leases
are not renewed one by one: a node keeps every lease it holds by heartbeating
(:meth:`Store.heartbeat_node`), so a cluster node's upkeep is one statement per heartbeat
whatever the number of its actors. ``now`` is the store's clock: PostgreSQL's
(``clock_timestamp()``, the one clock every node shares), wall-clock milliseconds for
memory and SQLite (one process owns those). Each lease method takes an explicit ``now``
for tests. An expired lease still fences: it only stops refusing other nodes.

Membership. The server processes of a cluster register themselves as nodes
(:class:`NodeRecord`: id, address, expiry) and heartbeat to stay alive; a node whose
``expires_at`` has passed (on the same store clock) is dead to the others. Membership
does not fence anything: only leases and generations do.

The cluster's secret. The nodes authenticate each other with one secret; the store keeps
it (:class:`ClusterSecret`: the secret itself when the nodes agreed on one, only a digest
when it was configured) so that every node that starts on it is held to the same one
(:meth:`Store.keep_cluster_secret`; :mod:`perdure.runtime.cluster.secret` decides).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from perdure.keys import Key
from perdure.store.idempotency import IdempotencyRecord
from perdure.store.records import ClusterSecret, NodeRecord, ScheduleFireRecord, ScheduleRecord
from perdure.telemetry import NO_OBSERVER, Observer

__all__ = [
    "ActorCommit",
    "ActorRecord",
    "ClusterSecret",
    "Durability",
    "EventRecord",
    "IdempotencyRecord",
    "Lease",
    "NodeRecord",
    "QueueMessageRecord",
    "ScheduleFireRecord",
    "ScheduleRecord",
    "Store",
    "WakeupCallback",
]

Durability = Literal["process", "power"]
WakeupCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ActorRecord:
    """One actor as stored. ``state`` is ``None`` until the actor has been initialised."""

    actor_id: str
    name: str
    key: Key
    created_at: int
    generation: int = 0
    initialized: bool = False
    input: bytes | None = None
    state: bytes | None = None
    wake_at: int | None = None
    queue_next_id: int = 1
    event_seq: int = 0
    """The last sequence number given to an event of the actor (0: none yet)."""


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event an actor broadcast, as kept in its event log (docs/events.md).

    ``seq`` grows by one per event of the actor, from 1; ``args`` is the encoded list of
    the event's arguments; ``emitted_at`` is epoch ms (the age bound of retention).
    """

    seq: int
    name: str
    args: bytes
    emitted_at: int


@dataclass(frozen=True, slots=True)
class Lease:
    """Node ``node_id`` owns actor ``actor_id`` until ``expires_at`` (epoch ms, on the
    store's clock; see the module docstring), as instance ``generation``.

    The generation is the actor's fencing counter as the lease was acquired: commits
    fenced with it apply until someone takes the actor again.
    """

    actor_id: str
    node_id: str
    generation: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class QueueMessageRecord:
    """A durable queue message. Ids grow monotonically per actor; FIFO is by id.

    ``trace`` is the W3C ``traceparent`` of the span that sent it, when the sender was
    traced: stored with the message so that the workflow consuming it, even after a
    restart, is traced as that span's child (see docs/tracing.md).

    Leases (docs/queues.md): ``attempts`` counts the deliveries to a completable receive
    outside a workflow; such a message is hidden from every receiver until
    ``visible_at`` (epoch ms; ``None``: visible). A dead letter has ``dead_at`` set and
    is no longer delivered; ``error`` is the last error a consumer gave back (``nack``)
    or why the message died. These change by putting the record again (a put of an
    existing id overwrites its row, see :meth:`ActorCommit.update_message`).
    """

    id: int
    name: str
    body: bytes
    created_at: int
    trace: str | None = None
    attempts: int = 0
    visible_at: int | None = None
    dead_at: int | None = None
    error: str | None = None


@dataclass(slots=True)
class ActorCommit:
    """Everything one actor wants written atomically. ``None`` fields are left unchanged.

    ``set_wake_at`` says whether ``wake_at`` is written (``wake_at=None`` then clears the
    alarm). ``history_put`` maps a workflow location (``"loop/~3/step"``) to its encoded
    entry; ``history_delete`` lists locations to remove.

    ``schedule_put`` maps a schedule id to its record (insert or replace);
    ``schedule_delete`` lists schedule ids to remove. ``fire_put`` inserts or replaces
    fire records by ``(name, seq)``, in list order (the last of equal keys wins);
    ``fire_prune`` lists ``(name, up_to_seq)``: remove that job's fires with
    ``seq <= up_to_seq``. Deletes and prunes apply before puts, so a commit that deletes a
    job and creates one of the same name keeps the new one.

    ``fence``: apply only if the stored ``generation`` still equals it; otherwise write
    nothing and raise ``ActorNotFound``, as for a missing actor. An instance fences its
    commits with the generation it claimed (:meth:`Store.claim_actor`), so a process that
    lost the actor (killed, while its last transaction was still on the way to the
    database) cannot write over what a newer instance loaded.
    """

    actor_id: str
    fence: int | None = None
    state: bytes | None = None
    initialized: bool | None = None
    generation: int | None = None
    set_wake_at: bool = False
    wake_at: int | None = None
    queue_next_id: int | None = None
    queue_put: list[QueueMessageRecord] = field(default_factory=list)
    queue_delete: list[int] = field(default_factory=list)
    history_put: dict[str, bytes] = field(default_factory=dict)
    history_delete: list[str] = field(default_factory=list)
    schedule_put: dict[str, ScheduleRecord] = field(default_factory=dict)
    schedule_delete: list[str] = field(default_factory=list)
    fire_put: list[ScheduleFireRecord] = field(default_factory=list)
    fire_prune: list[tuple[str, int]] = field(default_factory=list)
    event_put: list[EventRecord] = field(default_factory=list)
    event_seq: int | None = None
    event_prune: tuple[int, int] | None = None
    # Idempotency keys (store/idempotency.py): records to put, and a bound in epoch ms:
    # remove the actor's records created before it (applied before the puts).
    key_put: list[IdempotencyRecord] = field(default_factory=list)
    key_prune: int | None = None
    # The actor's KV space (store/kv.py): ranges ``[start, end)`` to delete (``end=None``:
    # to the last key), then keys to delete, then records to put (key -> encoded value),
    # in that order, so a key put by this commit survives a delete of it or of its range.
    kv_delete_range: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    kv_delete: set[bytes] = field(default_factory=set)
    kv_put: dict[bytes, bytes] = field(default_factory=dict)

    def delete_message(self, message_id: int) -> None:
        """Remove queue message ``message_id``.

        A message put by this same commit is simply dropped from it: sent and consumed
        before the commit was written, it never needs a row (the consuming history
        entry, in this commit too, records its body).
        """
        for index, record in enumerate(self.queue_put):
            if record.id == message_id:
                del self.queue_put[index]
                return
        self.queue_delete.append(message_id)

    def update_message(self, record: QueueMessageRecord) -> None:
        """Write a message's new lease, attempts or dead-letter state (the whole record:
        a put overwrites the row). A put of the same id still staged in this commit is
        replaced where it stands, so the commit holds one put per message and a later
        :meth:`delete_message` removes it entirely."""
        for index, staged in enumerate(self.queue_put):
            if staged.id == record.id:
                self.queue_put[index] = record
                return
        self.queue_put.append(record)

    def is_empty(self) -> bool:
        """True when the commit would write nothing."""
        return (
            self.state is None
            and self.initialized is None
            and self.generation is None
            and not self.set_wake_at
            and self.queue_next_id is None
            and not self.queue_put
            and not self.queue_delete
            and not self.history_put
            and not self.history_delete
            and not self.schedule_put
            and not self.schedule_delete
            and not self.fire_put
            and not self.fire_prune
            and self.event_seq is None
            and not self.event_put
            and self.event_prune is None
            and not self.key_put
            and self.key_prune is None
            and not self.kv_put
            and not self.kv_delete
            and not self.kv_delete_range
        )


class Store(ABC):
    """Abstract base of every backend. All methods are coroutines unless noted."""

    durability: Durability = "process"
    # Told about every write batch (``commit``) and failed write (``store_error``),
    # possibly from a writer thread; the runtime sets it before ``open``.
    observer: Observer = NO_OBSERVER

    @abstractmethod
    async def open(self) -> None:
        """Connect, apply pending migrations, start background writers. Idempotent."""

    @abstractmethod
    async def close(self) -> None:
        """Finish every accepted write, then release resources. Idempotent.

        Writes accepted before ``close`` is called are durable when it returns.
        """

    @abstractmethod
    async def create_actor(self, record: ActorRecord) -> None:
        """Insert a new actor.

        Raises ``ActorAlreadyExists`` if an actor with the same ``(name, key)`` exists and
        ``InvalidRequest`` if ``actor_id`` is taken. Durable when it returns.
        """

    @abstractmethod
    async def get_actor(self, actor_id: str) -> ActorRecord | None:
        """The actor with this id, or ``None`` if there is none (or it was deleted)."""

    @abstractmethod
    async def claim_actor(self, actor_id: str) -> ActorRecord | None:
        """Take the actor for a new instance: add one to its ``generation`` and return its
        record as it is then, or ``None`` if there is none.

        Every commit that reached the database before the claim is in the returned record
        and in what is loaded after it (queue, history, schedules); a backend that other
        processes write to waits for their transactions on this actor to end. Commits
        fenced with an older generation are refused from then on.

        This is the one-node way to take an actor (one statement, on the wake path): no
        owner is recorded and any expired lease is cleared, so a node may acquire the
        actor later. Raises :class:`~perdure.errors.ActorOwnedElsewhere` (and
        changes nothing) while a node holds an unexpired lease on it: a lone server
        pointed at a cluster's database must not take actors from under their owners.
        A recorded owner with no expiry is why this is not "acquire for a default
        node": such a lease would keep every other node out for good.
        """

    # --- ownership (see the module docstring) -----------------------------------------

    @abstractmethod
    async def acquire_lease(
        self, actor_id: str, node_id: str, ttl_ms: int, *, now: int | None = None
    ) -> tuple[ActorRecord, Lease]:
        """Take the actor for a new instance on ``node_id`` until ``now + ttl_ms``.

        Adds one to its ``generation`` and records the owner, exactly as
        :meth:`claim_actor` does for the record (the same guarantee about earlier
        commits); returns the record as it is then and the lease. The node that already
        holds the lease may acquire it again (a new instance: a new generation).

        Raises :class:`~perdure.errors.ActorOwnedElsewhere` (and changes nothing)
        while another node's lease is unexpired, ``ActorNotFound`` if there is no such
        actor, ``ValueError`` unless ``ttl_ms > 0``.
        """

    @abstractmethod
    async def release_lease(self, lease: Lease) -> None:
        """Give the actor back: clear its owner if the lease is still the current one.

        The generation is kept (commits fenced with it still apply, so an instance may
        release first and write its last commit after). A lease that is no longer the
        current one is not an error: there is nothing to give back. Applied after every
        commit submitted before it.
        """

    @abstractmethod
    async def get_lease(self, actor_id: str) -> Lease | None:
        """The lease recorded on the actor, or ``None`` (no owner, or no actor).

        An expired lease is returned as it is stored: whether it still keeps other
        nodes out is for :meth:`acquire_lease` to decide, on the store's clock.
        """

    # --- membership (see the module docstring) -----------------------------------------

    @abstractmethod
    async def register_node(
        self,
        node_id: str,
        address: str,
        ttl_ms: int,
        *,
        now: int | None = None,
        code_version: str | None = None,
    ) -> NodeRecord:
        """Record node ``node_id`` at ``address``, alive until ``now + ttl_ms``, running
        code ``code_version``.

        An upsert: registering an id again replaces its address and version and starts it
        afresh (``started_at = heartbeat_at = now``, not draining). ``ValueError`` unless
        ``ttl_ms > 0``.
        """

    @abstractmethod
    async def heartbeat_node(
        self, node_id: str, ttl_ms: int, *, draining: bool = False, now: int | None = None
    ) -> NodeRecord | None:
        """Keep the node alive until ``now + ttl_ms`` (``heartbeat_at = now``) and set
        its ``draining`` flag; return its record.

        ``None`` when the node has no row (never registered, or deregistered, or
        removed by an operator): the caller registers again. ``ValueError`` unless
        ``ttl_ms > 0``.
        """

    @abstractmethod
    async def deregister_node(self, node_id: str) -> None:
        """Remove the node's row; not an error if there is none. Its leases then hold
        only until their own expiry (the node releases them first when it drains)."""

    @abstractmethod
    async def list_nodes(
        self, *, include_dead: bool = False, count_actors: bool = True, now: int | None = None
    ) -> list[NodeRecord]:
        """The live nodes (``expires_at > now``), ordered by ``node_id``; with
        ``include_dead`` the expired ones too.

        Each record's ``actors`` counts the actors whose ``owner_node`` is that node
        (their leases are live while it heartbeats; a dead node's count is the actors
        nobody has taken over yet), served by an index on ``owner_node``. Without
        ``count_actors`` it is 0 and nothing is counted (a node's directory read, every
        heartbeat, needs no counts).
        """

    @abstractmethod
    async def keep_cluster_secret(self, proposed: ClusterSecret) -> ClusterSecret:
        """Keep ``proposed`` as the cluster's secret unless the store holds one already;
        return the one it holds (``proposed`` if it was the first).

        Race-free: of several calls at once, from any number of processes, one is kept
        and every call returns that one. A kept secret stays until
        :meth:`forget_cluster_secret`.
        """

    @abstractmethod
    async def forget_cluster_secret(self) -> bool:
        """Remove the cluster's secret, so that the next :meth:`keep_cluster_secret` keeps
        what it proposes; ``True`` if there was one."""

    @abstractmethod
    async def watch_wakeups(self, callback: WakeupCallback) -> Callable[[], None]:
        """Call ``callback(wake_at)`` after each committed write, by another process,
        that sets an actor's alarm earlier than it was (or sets one where there was
        none, creates included); return a function that stops the callback.

        It tells a node of alarms it did not write itself: PostgreSQL reports the
        commits of every node on the same schema (``LISTEN/NOTIFY``; this node's own
        too). Memory and SQLite report nothing: only one process writes to them (the
        data-directory lock), and the runtime that writes an alarm tells its own
        scheduler, which would otherwise be poked twice for each alarm and wake an
        actor that has just gone to sleep. ``callback`` runs on the event loop and must
        not block. Delivery is a hint, not a log: a watcher must poll as well
        (PostgreSQL loses notifications while its listening connection reconnects).
        """

    @abstractmethod
    async def find_actor(self, name: str, key: Key) -> ActorRecord | None:
        """The actor with this name and key, or ``None``."""

    @abstractmethod
    async def commit(self, commit: ActorCommit) -> None:
        """Apply ``commit`` atomically (see the module docstring).

        Raises ``ActorNotFound`` (and writes nothing) if the actor does not exist. Adding a
        queue message whose id exists, or deleting one that does not, is not an error:
        puts overwrite and deletes of missing rows are no-ops. Durable when it returns.
        """

    def submit(self, commit: ActorCommit) -> asyncio.Future[None]:
        """Start :meth:`commit` now; return a future of its outcome (called on the loop).

        Same guarantees as :meth:`commit`. Several commits of one actor may be in flight at
        once: they are applied in the order they were submitted. Backends override this
        when they can queue a commit without starting a task.
        """
        return asyncio.ensure_future(self.commit(commit))

    @abstractmethod
    async def delete_actor(self, actor_id: str) -> bool:
        """Delete the actor and all its data (queue, workflow history, schedules and their
        fire history, event log, idempotency keys, KV records). False if it did not
        exist."""

    @abstractmethod
    async def list_actors(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorRecord]:
        """Actors ordered by ``actor_id``, optionally of one name, after a given id."""

    @abstractmethod
    async def count_actors(self, *, name: str | None = None) -> int:
        """How many actors exist (of one name, if given)."""

    @abstractmethod
    async def load_queue(self, actor_id: str) -> list[QueueMessageRecord]:
        """All queued messages of an actor, ordered by id."""

    @abstractmethod
    async def load_history(self, actor_id: str) -> dict[str, bytes]:
        """All workflow history entries of an actor, by location."""

    @abstractmethod
    async def load_schedules(self, actor_id: str) -> list[ScheduleRecord]:
        """All scheduled jobs (one-shot and recurring) of an actor, ordered by id."""

    @abstractmethod
    async def load_events(self, actor_id: str, after_seq: int, limit: int) -> list[EventRecord]:
        """The logged events of an actor with ``seq > after_seq``, oldest first, at most
        ``limit`` (``[]`` when ``limit <= 0``). What retention removed is not returned:
        the caller compares the first ``seq`` with ``after_seq + 1`` to see a gap."""

    @abstractmethod
    async def load_fire_history(
        self, actor_id: str, name: str, limit: int
    ) -> list[ScheduleFireRecord]:
        """The newest ``limit`` fires of the actor's recurring job ``name``, newest first
        (by ``seq``). ``[]`` when ``limit <= 0`` or the job has none."""

    @abstractmethod
    async def load_idempotency(self, actor_id: str, key: str) -> IdempotencyRecord | None:
        """The record of the actor's idempotency key ``key``, or ``None``: however old
        (the runtime ignores one past its retention until a commit prunes it)."""

    @abstractmethod
    async def load_idempotency_keys(
        self, actor_id: str, since: int, limit: int
    ) -> list[tuple[str, int]]:
        """``(key, created_at)`` of the actor's newest ``limit`` idempotency keys created
        at or after ``since`` (epoch ms), newest first (``[]`` when ``limit <= 0``). One
        range of the index on ``(actor_id, created_at)``: what a live actor keeps in
        memory so that a fresh key costs no read (docs/idempotency.md)."""

    @abstractmethod
    async def kv_get(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """The stored values of the actor's KV ``keys``, in the order asked, ``None``
        for a key that has no record (store/kv.py). One round trip for the batch."""

    # True for a store whose reads never wait (memory; SQLite, which reads its own file
    # on the calling thread): it answers kv_get_inline, which c.db's page reads use
    # from inside SQLite's synchronous callbacks (runtime/kernel/db.py).
    reads_inline: bool = False

    def kv_get_inline(self, actor_id: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """:meth:`kv_get` on the calling thread, not a coroutine (only where
        ``reads_inline``)."""
        raise NotImplementedError(f"{type(self).__name__} does not read inline")

    @abstractmethod
    async def kv_list(
        self,
        actor_id: str,
        *,
        start: bytes = b"",
        end: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[bytes, bytes]]:
        """The actor's KV records with ``start <= key < end`` (``end=None``: no upper
        bound), ``(key, value)`` in ascending key order (bytewise), or descending with
        ``reverse``; at most ``limit`` of them (``None``: all; ``[]`` when ``limit <= 0``).
        A reverse list with a limit gives the greatest keys of the range. Served by the
        primary key: the cost grows with the records returned, not the actor's total."""

    @abstractmethod
    async def due_actors(self, until: int, limit: int) -> list[tuple[str, int]]:
        """``(actor_id, wake_at)`` of actors whose ``wake_at <= until``, earliest first.

        Served by an index on ``wake_at``: the cost does not grow with the number of
        actors that have no alarm or a later one.
        """

    @abstractmethod
    async def next_wake_at(self) -> int | None:
        """The earliest ``wake_at`` over all actors, or ``None``."""

    async def ping(self, timeout: float) -> None:
        """Check, within about ``timeout`` seconds, that the store answers (``/ready``).

        Raises :class:`~perdure.errors.StoreUnavailable` when it does not. A store that
        lives in this process answers by being open; backends over a network override
        this with a cheap query.
        """
        await self.next_wake_at()

"""The actor runtime: (name, key) → actor id → live instance, waking actors as needed.

It holds the live instances of this process and builds every other room on itself: the
dispatch (``runtime.dispatch``, the one way into an actor, which calls back into the
runtime through :class:`~perdure.runtime.dispatch.port.DispatchHost`), the in-process
client (``runtime.client()``), the alarm scheduler, the inspector's feed and, on a
cluster node, membership and placement. Requests go through the dispatch, never
through the runtime's own methods: those are the dispatch's port and the instances'
host (:class:`~perdure.runtime.actor.hosting.ActorHost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from perdure.definition import ActorDefinition
from perdure.errors import (
    ActorAlreadyExists,
    ActorNotFound,
    ActorOwnedElsewhere,
    ActorStopping,
    InternalError,
    InvalidRequest,
    PerdureError,
    UserError,
)
from perdure.keys import Key, normalize_key
from perdure.registry import Registry
from perdure.runtime.actor.instance import ActorInstance
from perdure.runtime.actor.operations import CallAction, ResolveMethod
from perdure.runtime.actor.workflow_outcomes import WorkflowOutcomes
from perdure.runtime.admin.feed import ActorFeed
from perdure.runtime.cluster.member import ClusterMember, NodeConfig
from perdure.runtime.dispatch.dispatcher import ActorDispatch
from perdure.runtime.dispatch.placement import Placement
from perdure.runtime.host.alarms import AlarmScheduler
from perdure.runtime.host.known_ids import KnownIds
from perdure.runtime.host.readiness import Readiness
from perdure.runtime.host.versions import PlacedByVersion, VersionPlacement, with_code_version
from perdure.runtime.kernel.clock import Clock, SystemClock
from perdure.runtime.kernel.core import StopReason
from perdure.runtime.kernel.tasks import TaskOwner
from perdure.runtime.local.client import LocalClient
from perdure.store.base import ActorRecord, Store
from perdure.store.encoding import encode_value
from perdure.telemetry import Observers

__all__ = ["ActorRuntime", "ResolveMethod"]

T = TypeVar("T")
# How many turns of the event loop a stop gives the callers of a start to come in.
_START_WAITER_TURNS = 100
_log = logging.getLogger("perdure.runtime")
_DROP_GRACE = 1.0  # seconds the calls of a dropped instance have to answer
_STOPPED: dict[str, str] = {"sleep": "slept", "destroy": "destroyed", "shutdown": "stopped"}


def new_actor_id(now_ms: int) -> str:
    """A 30-character id: creation time (so listings sort by age) plus 76 random bits."""
    return f"{now_ms:011x}{secrets.token_hex(10)[:19]}"


class ActorRuntime:
    """Hosts the actors of a registry on a store. Use as ``async with ActorRuntime(...)``."""

    def __init__(
        self,
        registry: Registry,
        store: Store,
        *,
        clock: Clock | None = None,
        node: NodeConfig | None = None,
    ) -> None:
        """``node``: run as one node of a cluster sharing ``store`` (PostgreSQL); see
        :mod:`perdure.runtime.cluster.member`. Without it the runtime is alone on its store."""
        self.registry = registry
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self._live: dict[str, ActorInstance] = {}
        # The awake actors by name and key: a request naming one by key needs no store
        # read (keys never change, and a destroyed actor stops being "running" first).
        self._live_by_key: dict[tuple[str, Key], ActorInstance] = {}
        # The ids of actors found or created by key, awake or not (known_ids.py).
        self._ids_by_key = KnownIds()
        # Store lookups by key in flight: concurrent requests for one key share one.
        self._finding: dict[tuple[str, Key], asyncio.Future[str | None]] = {}
        self._waking: dict[str, asyncio.Future[ActorInstance]] = {}
        # How many callers wait for each actor's start: a stop asked for as the start
        # ends lets them in first (rivetkit serves the calls queued during a start).
        self._start_waiters: dict[str, int] = {}
        self._creating: dict[tuple[str, Key], asyncio.Future[str]] = {}
        self._tasks = TaskOwner("runtime")
        self.alarms = AlarmScheduler(self)
        # The callers waiting for a workflow's result (they outlive instances).
        self.outcomes = WorkflowOutcomes()
        # The one way into an actor for every request (see perdure.runtime.dispatch).
        self.dispatch = ActorDispatch(self)
        # What the engine reports (metrics, traces, the inspector's feed): see
        # perdure.telemetry. Empty until someone watches.
        self.observers = Observers()
        store.observer = self.observers
        # The inspector's live feed; it observes only while a feed is open.
        self.feed = ActorFeed(self)
        self.cluster: ClusterMember | None = None
        self.placement: Placement | None = None
        self.versions: VersionPlacement | None = None  # a node's check of its runs' code
        if node is not None:
            node, version = with_code_version(node, registry)
            self.cluster = ClusterMember(store, node, self._give_up)
            self.placement = Placement(self, self.cluster)
            self.versions = VersionPlacement(self, self.cluster, self.placement, version)
        # /ready: whether the store answers (a cached, cheap query).
        self.readiness = Readiness(store)
        self._started = False
        self._closing = False

    # ------------------------------------------------------------------ control

    async def start(self) -> None:
        """Open the store and, on a cluster node, join the cluster (which a node given
        another secret than its cluster's refuses: ``ClusterSecretMismatch``). Idempotent."""
        if not self._started:
            await self.store.open()
            if self.cluster is not None:
                try:
                    # The cluster's secret first: a node given another refuses to join.
                    await self.cluster.start()
                except BaseException:
                    await self.store.close()
                    raise
            self._started = True
            self.spawn(self.alarms.run(), name="alarm scheduler")

    async def stop(self) -> None:
        """Put every live actor to sleep (on_sleep runs, state flushed), then close the store."""
        if self._closing:
            return
        self._closing = True
        if self.cluster is not None:
            await self.cluster.drain()
        # Let actors that are waking finish starting, so that they are stopped properly.
        waking = [future for future in self._waking.values() if not future.done()]
        if waking:
            await asyncio.wait(waking, timeout=10)
        await asyncio.gather(
            *(self._stop_instance(inst, "shutdown") for inst in list(self._live.values())),
            return_exceptions=True,
        )
        await self._tasks.close(timeout=5)
        if self.cluster is not None:
            await self.cluster.leave()
        await self.store.close()

    async def drain(self) -> None:
        """A cluster node's first step of shutting down, while it still serves: take no
        new actor, put every awake one to sleep (releasing its lease, so that the node
        its next request reaches takes it at once), then give the peers one heartbeat
        to see that this node is draining. ``stop()`` follows. Nothing for a lone
        runtime."""
        cluster = self.cluster
        if cluster is None:
            return
        await cluster.drain()
        _log.info("draining: putting %d live actor(s) to sleep", len(self._live))
        await asyncio.gather(
            *(self._stop_instance(inst, "shutdown") for inst in list(self._live.values())),
            return_exceptions=True,
        )
        await asyncio.sleep(cluster.config.heartbeat_ms / 1000)

    def release_waiting_senders(self) -> None:
        """Shutdown has begun: senders waiting for a completion get ``timedOut`` at once
        (their messages stay queued), so that their requests do not hold the shutdown."""
        for instance in list(self._live.values()):
            if instance.queue is not None:
                instance.queue.release_waiting_senders()

    async def __aenter__(self) -> ActorRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def live_count(self) -> int:
        """How many actors are awake (in memory) right now."""
        return len(self._live)

    def live_instances(self) -> list[ActorInstance]:
        """The actors awake in this process (a copy: safe to iterate across awaits)."""
        return list(self._live.values())

    def is_live(self, actor_id: str) -> bool:
        """True when the actor is awake."""
        return actor_id in self._live

    def live_instance(self, actor_id: str) -> ActorInstance | None:
        """The running instance of an actor awake here, or ``None``."""
        instance = self._live.get(actor_id)
        if instance is None or instance.status != "running":
            return None
        if self.cluster is not None and not self.cluster.trusts(actor_id):
            return None
        return instance

    @property
    def started(self) -> bool:
        """True once ``start()`` has opened the store (and still after ``stop()``): the
        server refuses requests before it (``server.not_started``)."""
        return self._started

    @property
    def closing(self) -> bool:
        """True once ``stop()`` has begun: no actor is woken any more."""
        return self._closing

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Start a background task owned by the runtime."""
        return self._tasks.spawn(coro, name=name)

    def client(self) -> LocalClient:
        """An in-process client (no network) for tests and actor-to-actor calls."""
        return LocalClient(self.dispatch)

    async def fire_scheduled(self, instance: ActorInstance, action: str, args: list[Any]) -> Any:
        """A live actor's due schedule (its ActorHost): the action runs through the
        dispatch, pinned to that instance."""
        return await self.dispatch.perform_in(instance, CallAction(action, args))

    # --------------------------------------------------------------- resolution

    def definition(self, name: str) -> ActorDefinition:
        """The definition of actor ``name``; ``actor.unknown_name`` if not registered."""
        definition = self.registry.get(name)
        if definition is None:
            raise InvalidRequest(f"No actor named `{name}` is registered.", code="unknown_name")
        return definition

    async def resolve(
        self,
        name: str,
        key: str | Sequence[str] | None,
        method: ResolveMethod = "getOrCreate",
        input: Any = None,
        *,
        fresh: bool = False,
    ) -> str:
        """The actor id for ``(name, key)`` by ``get``, ``getOrCreate`` or ``create``.
        ``fresh``: look the key up in the store even if its id is known (the actor that
        id names was not found: destroyed since)."""
        if method == "get":
            return await self._existing_actor_id(name, key, fresh=fresh)
        if method == "create":
            return await self.create_actor(name, key, input)
        if method == "getOrCreate":
            actor_id, _ = await self.get_or_create_actor(name, key, input, fresh=fresh)
            return actor_id
        raise InvalidRequest(f"Unknown resolve method `{method}`.")

    def remembers(self, name: str, key: str | Sequence[str] | None) -> bool:
        """True when the id of actor ``(name, key)`` is remembered from an earlier lookup
        or creation (its actor may have been destroyed since, by another node)."""
        return (name, normalize_key(key)) in self._ids_by_key

    async def _existing_actor_id(
        self, name: str, key: str | Sequence[str] | None, *, fresh: bool = False
    ) -> str:
        """The id of an existing actor; ``actor.not_found`` otherwise."""
        self.definition(name)
        actor_id = await self._find_actor_id(name, normalize_key(key), fresh=fresh)
        if actor_id is None:
            raise ActorNotFound()
        return actor_id

    async def get_or_create_actor(
        self,
        name: str,
        key: str | Sequence[str] | None,
        input: Any = None,
        *,
        fresh: bool = False,
    ) -> tuple[str, bool]:
        """``(actor_id, created)``; creates (and starts) the actor if the key is new."""
        self.definition(name)
        parts = normalize_key(key)
        actor_id = await self._find_actor_id(name, parts, fresh=fresh)
        if actor_id is not None:
            return actor_id, False
        pending = self._creating.get((name, parts))
        try:
            if pending is not None:
                return await asyncio.shield(pending), False
            return await self._create(name, parts, input), True
        except ActorAlreadyExists:
            # Created meanwhile by a creation that had already finished when this one, or
            # the one it waited for, looked: the actor exists, so this is a get.
            found = await self._find_actor_id(name, parts)
            if found is None:
                raise
            return found, False

    async def _find_actor_id(self, name: str, key: Key, *, fresh: bool = False) -> str | None:
        """The id of actor ``(name, key)``, ``None`` if there is none: an awake one's, or
        one found or created before, without a store read (unless ``fresh``), else one
        read shared by every concurrent lookup of the key (run as a task of its own, so
        that a caller cancelled midway cancels no one else's)."""
        live = self._live_by_key.get((name, key))
        if live is not None and live.status == "running":
            return live.actor_id
        if fresh:
            self._ids_by_key.drop(name, key)
        elif (known := self._ids_by_key.get(name, key)) is not None:
            return known
        finding = self._finding.get((name, key))
        if finding is None:
            finding = asyncio.ensure_future(self._look_up(name, key))
            self._finding[(name, key)] = finding
            finding.add_done_callback(lambda _: self._finding.pop((name, key), None))
        return await asyncio.shield(finding)

    async def _look_up(self, name: str, key: Key) -> str | None:
        record = await self.store.find_actor(name, key)
        if record is None:
            return None
        self._ids_by_key.remember(name, key, record.actor_id)
        return record.actor_id

    async def create_actor(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> str:
        """Create (and start) a new actor; ``actor.duplicate_key`` if the key exists."""
        self.definition(name)
        parts = normalize_key(key)
        if (name, parts) in self._creating or await self.store.find_actor(name, parts):
            raise ActorAlreadyExists(name, parts)
        return await self._create(name, parts, input)

    async def _create(self, name: str, key: Key, input: Any) -> str:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        self._creating[(name, key)] = future
        try:
            # Checked against the actor's `input=` schema before anything is created.
            plain_input = self.definition(name).check_input(input)
            encoded_input = None if plain_input is None else encode_value(plain_input, what="input")
            now = self.clock.now_ms()
            record = ActorRecord(new_actor_id(now), name, key, now, input=encoded_input)
            await self.store.create_actor(record)
            self._ids_by_key.remember(name, key, record.actor_id)
            future.set_result(record.actor_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it
            raise
        finally:
            del self._creating[(name, key)]
        # Hand over the record just written, so that starting need not read it back. A
        # cluster node acquires the new actor's lease instead, as for any wake.
        # (Another node may take the new actor at once, or this one may be draining:
        # requests then go to the node that has it.)
        with contextlib.suppress(ActorOwnedElsewhere, ActorStopping):
            try:
                await self.instance(record.actor_id, None if self.cluster else record)
            except (InvalidRequest, UserError) as exc:
                if isinstance(exc, UserError) or exc.code == "invalid_input":
                    # create_state or on_create refused the input: an actor that can
                    # never start must not stay behind (a retry with a good input
                    # creates it afresh).
                    await self.store.delete_actor(record.actor_id)
                    self._ids_by_key.forget(name, key, record.actor_id)
                raise
        return record.actor_id

    # ------------------------------------------------------------------ waking

    async def instance(self, actor_id: str, record: ActorRecord | None = None) -> ActorInstance:
        """The live instance of an actor, waking it if it sleeps (from ``record`` if given)."""
        while True:
            live = self._live.get(actor_id)
            if live is not None:
                if live.status == "running":
                    return live
                await asyncio.shield(live.stopped)
                continue
            waking = self._waking.get(actor_id)
            if waking is not None:
                return await self._wait_for_start(actor_id, waking)
            return await self._wake(actor_id, record)

    async def _wait_for_start(
        self, actor_id: str, waking: asyncio.Future[ActorInstance]
    ) -> ActorInstance:
        """Wait for a start under way, counted (see :meth:`_let_start_waiters_in`)."""
        waiters = self._start_waiters
        waiters[actor_id] = waiters.get(actor_id, 0) + 1
        try:
            return await asyncio.shield(waking)
        finally:
            # Counted down as the caller resumes: it then enters the actor (an action,
            # a connect) before it next yields to the loop.
            left = waiters[actor_id] - 1
            if left:
                waiters[actor_id] = left
            else:
                del waiters[actor_id]

    async def _let_start_waiters_in(self, actor_id: str) -> None:
        """Before a stop is claimed: let the callers that waited for the actor's start
        resume and enter it (they came before the stop; the stop then waits for their
        work). They resume within a few turns of the loop once the start is done."""
        for _ in range(_START_WAITER_TURNS):
            if not self._start_waiters.get(actor_id):
                return
            await asyncio.sleep(0)

    async def _wake(self, actor_id: str, record: ActorRecord | None = None) -> ActorInstance:
        if self._closing or (self.cluster is not None and self.cluster.draining):
            raise ActorStopping()  # the server is shutting down
        future: asyncio.Future[ActorInstance] = asyncio.get_running_loop().create_future()
        self._waking[actor_id] = future
        try:
            instance = await self._start_instance(actor_id, record)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            del self._waking[actor_id]
        future.set_result(instance)
        return instance

    async def _start_instance(
        self, actor_id: str, record: ActorRecord | None = None
    ) -> ActorInstance:
        claimed = record is None
        if record is None and self.cluster is not None:
            # A cluster node takes the actor's lease (refused while another node's is
            # live); like a claim, it waits for a previous owner's last writes.
            record, lease = await self.cluster.acquire(actor_id)
            if self.versions is not None:  # is its run's code this node's?
                await self.versions.check_wake(record, lease, self.registry.get(record.name))
        elif record is None:
            # Waking a stored actor: claim it, which also waits for any write a previous
            # process still had on its way to the database.
            record = await self.store.claim_actor(actor_id)
            if record is None:
                raise ActorNotFound()
        definition = self.registry.get(record.name)
        if definition is None:
            raise ActorNotFound(f"Actor `{record.name}` is no longer registered on this server.")
        instance = ActorInstance(self, definition, record, claimed=claimed)
        try:
            await instance.start()
        except BaseException as exc:
            if self.versions is not None:
                self.versions.take_admission(actor_id)  # not taken if start failed early
            instance.abort.fire()
            await instance.tasks.close(timeout=1)
            await instance.core.close_db()
            await self._release(instance)
            if isinstance(exc, Exception) and not isinstance(exc, PerdureError):
                # A failing hook (create_state, on_wake …) is an internal error for the
                # caller, as in an action: details go to the log, not over the wire.
                instance.log.exception("starting the actor failed")
                raise InternalError() from exc
            raise
        self._live[actor_id] = instance
        self._live_by_key[(instance.name, instance.key)] = instance
        self.observers.actor_woke(instance)
        _log.debug("woke %s/%s (generation %d)", record.name, actor_id, instance.generation)
        return instance

    def schedule_stop(self, instance: ActorInstance, reason: StopReason) -> None:
        """Stop an instance in the background (sleep or destroy). It takes no new work
        from this moment on (once the callers that waited for its start are in): later
        calls wait for the stop and wake the actor again."""
        if self._start_waiters.get(instance.actor_id):
            name = f"stop {instance.actor_id}"
            self.spawn(self._stop_instance(instance, reason), name=name)
        elif instance.claim_stop(reason):
            self.spawn(self._finish_stop(instance), name=f"stop {instance.actor_id}")

    async def _stop_instance(self, instance: ActorInstance, reason: StopReason) -> None:
        await self._let_start_waiters_in(instance.actor_id)
        if reason == "destroy" and instance.status == "stopping":
            # Asked for (c.destroy()) while the start's callers came in, and a sleep
            # began meanwhile: it becomes a destroy, as ActorInstance.request_stop does.
            instance.stop_reason = "destroy"
        if instance.claim_stop(reason):
            await self._finish_stop(instance)
        else:
            await asyncio.shield(instance.stopped)

    async def _finish_stop(self, instance: ActorInstance) -> None:
        reason = instance.stop_reason
        try:
            await instance.run_stop_sequence()
        finally:
            self._forget(instance)
            self.observers.actor_slept(instance, reason or "sleep")
            if reason != "destroy":  # a destroyed actor's row (and lease) is gone
                await self._release(instance)
            label = _STOPPED.get(reason or "", reason)
            _log.debug("%s %s/%s", label, instance.name, instance.actor_id)

    async def drop_instance(self, instance: ActorInstance) -> None:
        """Forget an instance whose writes failed (see ``ActorInstance.crash``)."""
        try:
            # The calls that waited for the failed write answer first (with its error,
            # store.unavailable in an outage) before their connections are closed.
            loop = asyncio.get_running_loop()
            await instance.activity.wait_idle(loop.time() + _DROP_GRACE)
            await asyncio.sleep(0)
            await instance.crash()
        finally:
            self._forget(instance)
            self.observers.actor_slept(instance, "lost")
            # Released only if still current (the store checks the generation): a lease
            # taken over meanwhile stays with its new owner.
            await self._release(instance)
            _log.debug("dropped %s/%s after a failed write", instance.name, instance.actor_id)

    def _forget(self, instance: ActorInstance) -> None:
        """``instance`` is no longer the live one of its actor."""
        if self._live.get(instance.actor_id) is instance:
            del self._live[instance.actor_id]
        if self._live_by_key.get((instance.name, instance.key)) is instance:
            del self._live_by_key[(instance.name, instance.key)]

    async def _release(self, instance: ActorInstance) -> None:
        if self.cluster is not None:
            await self.cluster.release(instance.actor_id, instance.generation)

    def _give_up(self, actor_id: str, generation: int) -> None:
        """The cluster lost (or can no longer trust) this node's lease on an actor: drop
        its instance at once, without hooks or writes."""
        instance = self._live.get(actor_id)
        if instance is None or instance.generation != generation:
            return
        self._forget(instance)
        self.observers.actor_slept(instance, "lost")
        self.spawn(instance.crash(), name=f"give up {actor_id}")

    async def sleep_actor(self, actor_id: str) -> None:
        """Put an awake actor to sleep now and wait until it is asleep."""
        instance = self._live.get(actor_id)
        if instance is not None:
            await self._stop_instance(instance, "sleep")

    async def destroy_actor(self, actor_id: str) -> None:
        """Destroy an actor (waking it first so ``on_destroy`` runs) and wait until done."""
        instance = await self.instance(actor_id)
        await self._stop_instance(instance, "destroy")
        self._ids_by_key.forget(instance.name, instance.key, actor_id)

    # --------------------------------------------------------------- operations
    # Shorthands for in-process callers; each goes through the dispatch seam.

    async def running_instance(self, actor_id: str) -> ActorInstance:
        """The running instance of an actor, waking it if needed (the dispatch seam's way
        to its actors; nothing outside the runtime should hold one)."""
        instance = self._live.get(actor_id)
        if instance is None or instance.status != "running":
            instance = await self.instance(actor_id)
        return instance

    async def wake_for_alarm(self, actor_id: str) -> int | None:
        """Wake an actor because its alarm is due (the workflow/schedules take over).

        Returns ``None``, or, when another node holds the actor (its timers are that
        node's), when to look again (epoch ms): no point trying before then.

        In a cluster the lease is read first (a plain read): an actor held by another
        live node is left to it without trying to take it. Taking it is a write in this
        node's writer that locks the actor's row, so it waits for the owner's commit in
        progress on that row, and every commit of this node queued behind it waits too:
        with every node trying each awake actor's due alarm once per TTL, that stalled
        sends for 1-2 s at p99 (bench/README.md, "The p99 stall").
        """
        cluster = self.cluster
        if cluster is not None:
            lease = await self.store.get_lease(actor_id)
            held_by = None if lease is None else lease.node_id
            if held_by is not None and held_by != cluster.node_id and cluster.listed(held_by):
                return self.clock.now_ms() + cluster.config.heartbeat_ms
        try:
            await self.instance(actor_id)
        except (ActorNotFound, ActorStopping):
            return None  # destroyed, or this runtime is stopping: the alarm waits in the store
        except PlacedByVersion as exc:  # its run belongs on a node of its version
            return await exc.hand_over()
        except ActorOwnedElsewhere as exc:
            return exc.expires_at
        return None

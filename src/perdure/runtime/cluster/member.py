"""One node of a cluster: membership, the leases it holds, and the way to its peers.

Several ``perdure serve`` processes on one PostgreSQL act as one server (DESIGN §5). The
database is the only source of truth; there is no consensus protocol of our own:

- **Membership.** A node registers (``nodes`` table: id, the address peers reach it at,
  heartbeat) when its runtime starts, heartbeats every third of the lease TTL (at least
  every second), and deregisters when it stops. A node whose heartbeat has expired is
  dead to the others.
- **Leases.** Waking an actor acquires its lease (one statement that also counts a new
  generation, the fence of every commit) and the node releases it when the actor
  sleeps. A lease stays live while its node heartbeats, so the upkeep of a node is one
  statement per heartbeat however many actors it holds; when a node stops heartbeating
  (killed, paused, cut off), its leases expire with its heartbeat, after the TTL, and
  any node may take its actors.
- **Stop writing before anyone may take over.** A node trusts its leases only until
  ``(when its last heartbeat, or the acquire, was sent) + TTL - margin`` on this
  process's monotonic clock. The database set the expiry after that moment, so the node
  gives its actors up (drops the instances, no more writes) before anyone else may take
  them. A write already on its way when the node was paused is refused by the fence if
  another node has taken the actor since.

- **Authentication.** Before it registers, a node agrees with the store on the secret
  nodes present to each other (:mod:`perdure.runtime.cluster.secret`): the configured
  one, or one the first node made; a node given another secret refuses to join.

The transport to peers is a port (:class:`PeerLink`): the server layer implements it
over HTTP and hands it to the runtime, which never imports a network library for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from perdure.runtime.cluster.secret import agree_cluster_secret

if TYPE_CHECKING:
    from perdure.runtime.actor.connections import Transport
    from perdure.runtime.actor.operations import Forwardable
    from perdure.runtime.kernel.core import ActorIdentity
    from perdure.store.base import ActorRecord, Lease, Store

__all__ = [
    "ClusterMember",
    "NodeConfig",
    "PeerLink",
    "PeerNode",
    "RemoteConnection",
]

_log = logging.getLogger("perdure.cluster")


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Who this node is to its peers, and how long its leases last.

    ``address`` is the base URL peers forward requests to (``http://10.0.0.5:6420``).
    ``lease_ttl_ms``: how long a node's heartbeat (and so its leases) lasts, so how
    long a killed node's actors stay unreachable before another node takes them over.
    ``secret``: the cluster's secret, which nodes present to each other, when it is
    configured: every node must be given the same one. ``None``: the nodes agree on one
    through their store (:mod:`perdure.runtime.cluster.secret`). Either way a node's
    peers must present it (:attr:`ClusterMember.secret`). ``code_version``: the version
    of the code the node runs, announced to its peers (the runtime fills in a digest of
    its registry when it is ``None``: :func:`perdure.registry.registry_digest`).
    """

    node_id: str
    address: str
    lease_ttl_ms: int = 5000
    secret: str | None = None
    code_version: str | None = None

    def __post_init__(self) -> None:
        if not self.node_id or len(self.node_id) > 128:
            raise ValueError("a node id is 1 to 128 characters")
        if self.lease_ttl_ms < 300:
            raise ValueError("the lease TTL must be at least 300 ms")
        secret = self.secret
        if secret is not None and (
            not secret or secret != secret.strip() or not all(" " <= c <= "~" for c in secret)
        ):
            # It travels in a header between the nodes.
            raise ValueError(
                "a cluster secret is printable ASCII characters (no leading or trailing space)"
            )

    @property
    def heartbeat_ms(self) -> int:
        """How often the node heartbeats (which keeps its leases) and reads the directory:
        three times per TTL, so that two lost renewals in a row still leave time for a
        third, and at least every second, so that peers soon see a node join or drain."""
        return max(100, min(self.lease_ttl_ms // 3, 1000))

    @property
    def margin_ms(self) -> int:
        """How long before a lease can expire the node stops trusting it."""
        return max(100, self.lease_ttl_ms // 10)


@dataclass(frozen=True, slots=True)
class PeerNode:
    """Another live node, as the directory knows it."""

    node_id: str
    address: str


class PeerLink(Protocol):
    """How the runtime reaches other nodes (implemented by the server layer)."""

    async def perform(
        self, node: PeerNode, actor_id: str, operation: Forwardable, params: Any
    ) -> tuple[Any, ActorIdentity]:
        """Perform ``operation`` on the actor at ``node``; the result and who answered.

        ``operation`` is an :data:`Operation`, or one of ``"$status"``, ``"$destroy"``,
        ``"$sleep"``. Raises :class:`PeerUnreachable` when the request could not be
        delivered (safe to retry), :class:`NotOwner` when the node does not own the
        actor, or the error the actor answered with.
        """
        ...

    async def connect(
        self, node: PeerNode, actor_id: str, params: Any, transport: Transport
    ) -> RemoteConnection:
        """Open a connection to the actor at ``node`` for an in-process caller (an actor
        connecting to another through ``c.client()``); events go to ``transport``."""
        ...

    async def close(self) -> None:
        """Close kept-alive connections."""
        ...


class RemoteConnection(Protocol):
    """A connection to an actor on another node, with the surface of a local
    :class:`~perdure.runtime.dispatch.refs.ConnectionRef`."""

    @property
    def id(self) -> str: ...

    @property
    def actor_id(self) -> str: ...

    @property
    def params(self) -> Any: ...

    @property
    def state(self) -> Any: ...

    @property
    def subscriptions(self) -> frozenset[str]: ...

    @property
    def subscription_count(self) -> int: ...

    def subscribe(self, event: str) -> None: ...

    def unsubscribe(self, event: str) -> None: ...

    def is_subscribed(self, event: str) -> bool: ...

    async def call(self, action: str, args: list[Any]) -> Any: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Held:
    lease: Lease
    trusted_until: float  # monotonic: the lease's own expiry, as acquired, holds until then


class ClusterMember:
    """This node's membership and leases. Owned by the runtime (``runtime.cluster``)."""

    def __init__(
        self, store: Store, config: NodeConfig, give_up: Callable[[str, int], None]
    ) -> None:
        """``give_up(actor_id, generation)`` drops an instance whose lease is lost or no
        longer trusted (the runtime crashes it: no hooks, no more writes)."""
        self.store = store
        self.config = config
        self.node_id = config.node_id
        self.peers: PeerLink | None = None
        self.draining = False
        self._give_up = give_up
        self._held: dict[str, _Held] = {}
        self._node_trusted_until = 0.0  # monotonic: the node's heartbeat holds until then
        self._nodes: dict[str, PeerNode] = {}  # live nodes that take work (not draining)
        self._versions: dict[str, str | None] = {}  # the code version each of them runs
        self._listed: set[str] = set()  # every node with a live heartbeat
        self._suspects: dict[str, float] = {}  # node id -> avoided until (monotonic)
        self._refreshed = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        self._ttl_s = config.lease_ttl_ms / 1000
        self._secret: str | None = None

    @property
    def secret(self) -> str | None:
        """The secret this node and its peers present to each other, once :meth:`start`
        has agreed on it with the store; ``None`` before (a node trusts no peer then)."""
        return self._secret

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Agree on the cluster's secret, register, learn the peers, and start
        heartbeating. :class:`~perdure.errors.ClusterSecretMismatch` (nothing registered,
        no actor taken) when the node was given another secret than its cluster's."""
        config = self.config
        self._secret = await agree_cluster_secret(self.store, config.secret)
        sent = time.monotonic()
        await self._register()
        self._node_trusted_until = self._trust_from(sent)
        await self.refresh()
        peers = len(self._nodes) - 1
        _log.info("node %s joined at %s (%d other node(s))", self.node_id, config.address, peers)
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="cluster heartbeat"),
            asyncio.create_task(self._watchdog_loop(), name="cluster lease watchdog"),
        ]

    async def drain(self) -> None:
        """Stop taking actors: peers see the node as draining and get no new work."""
        self.draining = True
        try:
            await self.store.heartbeat_node(self.node_id, self.config.lease_ttl_ms, draining=True)
            await self.refresh()
        except Exception:
            _log.warning("could not mark node %s as draining", self.node_id, exc_info=True)

    async def leave(self) -> None:
        """Stop heartbeating and deregister (after every actor has been released)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        try:
            await self.store.deregister_node(self.node_id)
        except Exception:
            _log.warning("could not deregister node %s", self.node_id, exc_info=True)
        if self.peers is not None:
            await self.peers.close()
        _log.info("node %s left", self.node_id)

    # --------------------------------------------------------------------- leases

    async def acquire(self, actor_id: str) -> tuple[ActorRecord, Lease]:
        """Take the actor's lease for this node (``ActorOwnedElsewhere`` if another
        node's lease is live) and trust it for one TTL from now."""
        sent = time.monotonic()
        record, lease = await self.store.acquire_lease(
            actor_id, self.node_id, self.config.lease_ttl_ms
        )
        self._held[actor_id] = _Held(lease, self._trust_from(sent))
        return record, lease

    async def release(self, actor_id: str, generation: int) -> None:
        """Give the actor back once its instance has stopped (its last commit is queued
        before the release in the store's writer)."""
        held = self._held.get(actor_id)
        if held is None or held.lease.generation != generation:
            return
        del self._held[actor_id]
        try:
            await self.store.release_lease(held.lease)
        except Exception:
            # The lease then expires by itself after the TTL.
            _log.warning("releasing actor %s failed", actor_id, exc_info=True)

    def forget(self, actor_id: str, generation: int) -> None:
        """Stop renewing a lease without releasing it (the instance was dropped)."""
        held = self._held.get(actor_id)
        if held is not None and held.lease.generation == generation:
            del self._held[actor_id]

    def trusts(self, actor_id: str) -> bool:
        """False when the lease on an awake actor can no longer be trusted (the node was
        paused past it, say): the actor is given up at once, before it serves anything."""
        held = self._held.get(actor_id)
        if held is None or self._trusted(held) > time.monotonic():
            return True
        _log.warning(
            "node %s could not heartbeat in time: dropping actor %s", self.node_id, actor_id
        )
        del self._held[actor_id]
        self._give_up(actor_id, held.lease.generation)
        return False

    def _trust_from(self, sent: float) -> float:
        return sent + self._ttl_s - self.config.margin_ms / 1000

    def _trusted(self, held: _Held) -> float:
        """Until when a lease holds for sure: its own expiry as acquired, or the node's
        heartbeat, whichever is later (a lease is live while its node heartbeats)."""
        return max(held.trusted_until, self._node_trusted_until)

    async def renew(self) -> None:
        """Heartbeat: one statement keeps every lease of this node live (see the store
        contract). If the node's row was removed meanwhile (an operator, a clean-up),
        its leases may have been taken: give every actor up, then join again."""
        ttl = self.config.lease_ttl_ms
        sent = time.monotonic()
        record = await self.store.heartbeat_node(self.node_id, ttl, draining=self.draining)
        if record is None:
            _log.warning("node %s was removed from the cluster: dropping its actors", self.node_id)
            self._give_up_all()
            await self._register()
        self._node_trusted_until = self._trust_from(sent)

    async def _register(self) -> None:
        config = self.config
        await self.store.register_node(
            config.node_id, config.address, config.lease_ttl_ms, code_version=config.code_version
        )

    def _give_up_all(self) -> None:
        held, self._held = self._held, {}
        for actor_id, entry in held.items():
            self._give_up(actor_id, entry.lease.generation)

    def _expire_untrusted(self) -> float:
        """Give up every actor whose lease can no longer be trusted; returns when the
        next one would be (monotonic seconds)."""
        now = time.monotonic()
        soonest = now + self._ttl_s
        for actor_id, entry in list(self._held.items()):
            until = self._trusted(entry)
            if until <= now:
                _log.warning(
                    "node %s could not heartbeat in time: dropping actor %s",
                    self.node_id,
                    actor_id,
                )
                del self._held[actor_id]
                self._give_up(actor_id, entry.lease.generation)
            else:
                soonest = min(soonest, until)
        return soonest

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                # A slow heartbeat (a busy connection pool) still counts while the node's
                # leases hold: bounded by that, not by the interval, so that it is not
                # given up just before it would have succeeded.
                left = self._node_trusted_until - time.monotonic()
                await asyncio.wait_for(self.renew(), timeout=max(interval, left))
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.warning("node %s: heartbeat failed; retrying", self.node_id, exc_info=True)

    async def _watchdog_loop(self) -> None:
        while True:
            soonest = self._expire_untrusted()
            await asyncio.sleep(max(0.01, min(soonest - time.monotonic(), 0.25)))

    # ------------------------------------------------------------------ directory

    async def refresh(self) -> None:
        """Read the live nodes again."""
        records = await self.store.list_nodes(count_actors=False)
        self._listed = {r.node_id for r in records}
        self._nodes = {r.node_id: PeerNode(r.node_id, r.address) for r in records if not r.draining}
        self._versions = {r.node_id: r.code_version for r in records if not r.draining}
        self._refreshed = time.monotonic()

    def peer(self, node_id: str) -> PeerNode | None:
        """The live peer ``node_id``, or ``None`` (dead, draining, suspect, or self)."""
        if node_id == self.node_id:
            return None
        until = self._suspects.get(node_id)
        if until is not None:
            if time.monotonic() < until:
                return None
            del self._suspects[node_id]
        return self._nodes.get(node_id)

    async def find_peer(self, node_id: str) -> PeerNode | None:
        """:meth:`peer`, reading the directory again first if the node is unknown (a
        node that joined since the last heartbeat)."""
        node = self.peer(node_id)
        if node is None and node_id not in self._nodes and time.monotonic() - self._refreshed > 0.2:
            await self.refresh()
            node = self.peer(node_id)
        return node

    def listed(self, node_id: str) -> bool:
        """True while ``node_id`` heartbeats (as of the last refresh), draining or not."""
        return node_id in self._listed

    def suspect(self, node_id: str) -> None:
        """``node_id`` could not be reached: avoid it for one heartbeat interval (a dead
        node leaves the directory when its heartbeat expires; a live one is tried again)."""
        self._suspects[node_id] = time.monotonic() + self.config.heartbeat_ms / 1000

    async def other_node(self, actor_id: str) -> PeerNode | None:
        """A live peer to hand an actor to while this node drains (spread by id)."""
        candidates = sorted(n for n in self._nodes if self.peer(n) is not None)
        if not candidates and time.monotonic() - self._refreshed > 0.2:
            await self.refresh()  # a node that joined since the last heartbeat
            candidates = sorted(n for n in self._nodes if self.peer(n) is not None)
        if not candidates:
            return None
        return self._nodes[candidates[hash(actor_id) % len(candidates)]]

    def runs_other_versions(self, version: str) -> bool:
        """True when a live node that takes work announces another code version than
        ``version`` (as of the last refresh)."""
        return any(announced != version for announced in self._versions.values())

    def node_running(self, version: str, actor_id: str) -> PeerNode | None:
        """A live peer that takes work and runs code ``version`` (as of the last refresh),
        spread by actor id; ``None`` if there is none."""
        candidates = sorted(
            node_id
            for node_id, announced in self._versions.items()
            if announced == version and self.peer(node_id) is not None
        )
        if not candidates:
            return None
        return self._nodes[candidates[hash(actor_id) % len(candidates)]]

    def describe(self) -> dict[str, Any]:
        """``{"id", "address", "code_version"}`` for ``/metadata`` and ``/health``."""
        return {
            "id": self.node_id,
            "address": self.config.address,
            "code_version": self.config.code_version,
        }

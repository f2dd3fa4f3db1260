"""Where a request for an actor is served in a cluster: here, or at the node that owns it.

The placement policy (docs/deploy.md):

1. An actor awake on this node is served here.
2. Otherwise this node tries to take it (acquire its lease; waking it). An actor nobody
   owns is therefore claimed where its first request lands, and stays there while it
   is awake: requests that land elsewhere are forwarded to it, so it never ping-pongs.
3. If another node's lease is live, the request is forwarded to that node. A node that
   does not answer (killed, partitioned) is avoided; once its lease has expired (the TTL)
   the next request takes the actor over.
4. A draining node takes no actor: it hands requests for actors it does not hold to
   another live node, which takes them.

Which node owns which actor is remembered after the first forward, so a steady stream of
requests for a remote actor costs one HTTP hop each and no database round trip. A
forwarded request that finds the actor gone (slept, moved) is answered with
``actor.not_owner`` and the sender looks again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from perdure.errors import (
    ActorOwnedElsewhere,
    ActorStopping,
    ActorUnavailable,
    NotOwner,
    PeerUnreachable,
)
from perdure.runtime.cluster.member import PeerNode
from perdure.runtime.dispatch.refs import ConnectionRef

if TYPE_CHECKING:
    from perdure.runtime.actor.connections import Transport
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.actor.operations import Forwardable
    from perdure.runtime.cluster.member import ClusterMember, PeerLink, RemoteConnection
    from perdure.runtime.dispatch.port import DispatchHost
    from perdure.runtime.kernel.core import ActorIdentity

__all__ = ["Placement"]

_OWNER_CACHE = 65536
_RETRY_PAUSE = 0.1


class Placement:
    """The cluster's routing for one runtime (``runtime.placement``)."""

    def __init__(self, runtime: DispatchHost, member: ClusterMember) -> None:
        self._runtime = runtime
        self._member = member
        self._owners: dict[str, str] = {}  # actor id -> node id that owned it last we saw
        # A request waits this long at most for an unreachable owner's lease to expire.
        self._patience = member.config.lease_ttl_ms / 1000 + 5.0

    @property
    def peers(self) -> PeerLink:
        peers = self._member.peers
        if peers is None:
            raise ActorUnavailable("This node has no way to reach its peers.")
        return peers

    async def locate(self, actor_id: str, *, forwarded: bool) -> ActorInstance | PeerNode:
        """The live instance here (waking the actor if nobody owns it), or the peer that
        owns it. A ``forwarded`` request is never sent on: ``actor.not_owner`` instead."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._patience
        while True:
            live = self._runtime.live_instance(actor_id)
            if live is not None:
                return live
            if not forwarded:
                node = self._cached(actor_id)
                if node is not None:
                    return node
            if self._member.draining or self._runtime.closing:
                return await self._elsewhere(actor_id, forwarded)
            try:
                return await self._runtime.instance(actor_id)
            except ActorStopping:
                if not (self._member.draining or self._runtime.closing):
                    raise
                continue  # the node began draining meanwhile: hand the request over
            except ActorOwnedElsewhere as exc:
                if forwarded:
                    raise NotOwner(actor_id, exc.owner_node) from None
                node = await self._member.find_peer(exc.owner_node)
                if node is not None:
                    self._remember(actor_id, node.node_id)
                    return node
                # The owner is dead, draining or unreachable: its lease runs out soon.
                if loop.time() >= deadline:
                    raise ActorUnavailable(
                        f"Actor `{actor_id}` is held by node `{exc.owner_node}`, which does "
                        "not answer; retry shortly.",
                        metadata={"actor_id": actor_id, "owner_node": exc.owner_node},
                    ) from None
                await asyncio.sleep(_RETRY_PAUSE)

    async def perform(
        self, actor_id: str, operation: Forwardable, params: Any, *, forwarded: bool
    ) -> tuple[ActorInstance | None, Any, ActorIdentity | None]:
        """Serve or forward: ``(instance, None, None)`` when the caller should run the
        operation on that local instance, else ``(None, result, identity)`` from the
        owner."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._patience
        while True:
            target = await self.locate(actor_id, forwarded=forwarded)
            if not isinstance(target, PeerNode):
                return target, None, None
            try:
                result, identity = await self._forward(target, actor_id, operation, params)
                return None, result, identity
            except PeerUnreachable:
                self._forget(actor_id)
                self._member.suspect(target.node_id)
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(_RETRY_PAUSE)
            except NotOwner as exc:
                self._forget(actor_id)
                if exc.owner_node and exc.owner_node != target.node_id:
                    self._remember(actor_id, exc.owner_node)
                if loop.time() >= deadline:
                    raise ActorUnavailable(f"Actor `{actor_id}` kept moving; retry.") from None
                await asyncio.sleep(_RETRY_PAUSE / 5)

    async def _forward(
        self, node: PeerNode, actor_id: str, operation: Forwardable, params: Any
    ) -> tuple[Any, ActorIdentity]:
        """Forward to ``node``, giving up if it leaves the directory meanwhile (killed or
        paused: its heartbeat expired) instead of waiting out the HTTP timeout. Whether
        such a request was applied is unknown, so it is not retried here."""
        task = asyncio.ensure_future(self.peers.perform(node, actor_id, operation, params))
        interval = self._member.config.heartbeat_ms / 1000
        try:
            while True:
                done, _ = await asyncio.wait((task,), timeout=interval)
                if done:
                    return task.result()
                if self._member.listed(node.node_id):
                    continue
                task.cancel()
                raise ActorUnavailable(
                    f"Node `{node.node_id}`, which held actor `{actor_id}`, stopped "
                    "heartbeating before it answered; the request may or may not have "
                    "been applied.",
                    code="owner_no_answer",
                    metadata={"actor_id": actor_id, "owner_node": node.node_id},
                )
        finally:
            if not task.done():
                task.cancel()

    async def connect(
        self, actor_id: str, params: Any, transport: Transport
    ) -> ConnectionRef | RemoteConnection:
        """Open a connection here if the actor is (or can be) served here, else on the
        node that owns it."""
        target = await self.locate(actor_id, forwarded=False)
        if not isinstance(target, PeerNode):
            return ConnectionRef(target, await target.connect(params, transport), self.trusts)
        try:
            return await self.peers.connect(target, actor_id, params, transport)
        except PeerUnreachable:
            self.unreachable(actor_id, target.node_id)
            raise

    def unreachable(self, actor_id: str, node_id: str) -> None:
        """``node_id``, which held ``actor_id``, could not be reached: forget it as the
        actor's owner and avoid it for a while (the next look-up waits for its lease to
        lapse if it is dead, then takes the actor over)."""
        self._forget(actor_id)
        self._member.suspect(node_id)

    def trusts(self, actor_id: str) -> bool:
        """False when this node can no longer trust its lease on the awake actor (it then
        gives the actor up): see :meth:`ClusterMember.trusts`."""
        return self._member.trusts(actor_id)

    async def sleep_elsewhere(self, actor_id: str) -> None:
        """Put an actor to sleep on the node that holds it, if any does."""
        lease = await self._runtime.store.get_lease(actor_id)
        if lease is None or lease.node_id == self._member.node_id:
            return
        node = await self._member.find_peer(lease.node_id)
        if node is not None:
            await self.peers.perform(node, actor_id, "$sleep", None)

    async def _elsewhere(self, actor_id: str, forwarded: bool) -> PeerNode:
        """While stopping, a request for an actor not awake here goes to another node."""
        if forwarded:
            raise NotOwner(actor_id, None)
        node = await self._member.other_node(actor_id)
        if node is None:
            raise ActorStopping()  # the server is shutting down
        return node

    def _cached(self, actor_id: str) -> PeerNode | None:
        node_id = self._owners.get(actor_id)
        if node_id is None:
            return None
        node = self._member.peer(node_id)
        if node is None:
            del self._owners[actor_id]
        return node

    def _remember(self, actor_id: str, node_id: str) -> None:
        owners = self._owners
        if len(owners) >= _OWNER_CACHE:
            del owners[next(iter(owners))]
        owners[actor_id] = node_id

    def _forget(self, actor_id: str) -> None:
        self._owners.pop(actor_id, None)

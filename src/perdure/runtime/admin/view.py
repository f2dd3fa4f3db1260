"""What the inspector and its live feed read of the runtime.

The admin room sits under the runtime that builds it: naming what it reads as a protocol
(the runtime satisfies it) keeps its imports pointing down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from perdure.registry import Registry
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.cluster.member import ClusterMember
    from perdure.runtime.dispatch.dispatcher import ActorDispatch
    from perdure.runtime.kernel.clock import Clock
    from perdure.store.base import Store
    from perdure.telemetry import Observers

__all__ = ["RuntimeView"]


class RuntimeView(Protocol):
    """The runtime as the inspector sees it."""

    @property
    def registry(self) -> Registry:
        """The actor definitions served."""
        ...

    @property
    def store(self) -> Store:
        """What survives a crash: the inspector reads it."""
        ...

    @property
    def clock(self) -> Clock:
        """The runtime's clock (what a lease or a rate window is measured on)."""
        ...

    @property
    def dispatch(self) -> ActorDispatch:
        """Counts of stored and awake actors."""
        ...

    @property
    def cluster(self) -> ClusterMember | None:
        """This node's membership, on a cluster node."""
        ...

    @property
    def observers(self) -> Observers:
        """Where the live feed listens."""
        ...

    def is_live(self, actor_id: str) -> bool:
        """True while the actor has an instance here."""
        ...

    def live_instance(self, actor_id: str) -> ActorInstance | None:
        """The running instance of the actor here, if any (waking nothing)."""
        ...

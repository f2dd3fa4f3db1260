"""What the dispatch needs of the runtime behind it.

The dispatch is the one way into an actor, but it keeps no actors itself: the runtime
(:class:`~perdure.runtime.host.actor_runtime.ActorRuntime`) wakes, holds and stops the
live instances, and creates actors' records. This protocol names the part of the runtime
the dispatch and the placement call on, so that this room imports no room above it: the
runtime satisfies it, and builds the dispatch on itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.actor.operations import ResolveMethod
    from perdure.runtime.dispatch.placement import Placement
    from perdure.store.base import ActorRecord, Store

__all__ = ["DispatchHost"]


class DispatchHost(Protocol):
    """The runtime as its dispatch sees it: actor definitions, stored records and the
    live instances of this process."""

    @property
    def store(self) -> Store:
        """Where actors' records live."""
        ...

    @property
    def placement(self) -> Placement | None:
        """The cluster's routing, on a cluster node; ``None`` on a single server."""
        ...

    @property
    def closing(self) -> bool:
        """True once the runtime is stopping: no actor is woken any more."""
        ...

    def definition(self, name: str) -> ActorDefinition:
        """The definition of actor ``name``; ``actor.unknown_name`` if not registered."""
        ...

    def is_live(self, actor_id: str) -> bool:
        """True while the actor has an instance here (running or stopping)."""
        ...

    def live_instance(self, actor_id: str) -> ActorInstance | None:
        """The running instance of the actor here, if any (waking nothing)."""
        ...

    def live_instances(self) -> list[ActorInstance]:
        """Every instance this process holds."""
        ...

    async def instance(self, actor_id: str, record: ActorRecord | None = None) -> ActorInstance:
        """The actor's running instance, woken if it sleeps."""
        ...

    async def running_instance(self, actor_id: str) -> ActorInstance:
        """Like :meth:`instance`, refusing an actor that is stopping."""
        ...

    async def resolve(
        self,
        name: str,
        key: str | Sequence[str] | None,
        method: ResolveMethod,
        input: Any,
        *,
        fresh: bool = False,
    ) -> str:
        """The id of the actor ``name``/``key`` (created for getOrCreate/create); a key's
        id is remembered, ``fresh`` looks it up in the store again."""
        ...

    def remembers(self, name: str, key: str | Sequence[str] | None) -> bool:
        """True when the id of actor ``name``/``key`` is known without a store read (a
        destroyed actor's may be: see :meth:`resolve`)."""
        ...

    async def get_or_create_actor(
        self, name: str, key: str | Sequence[str] | None, input: Any = None, *, fresh: bool = False
    ) -> tuple[str, bool]:
        """``(actor_id, created)``; ``fresh`` as for :meth:`resolve`."""
        ...

    async def create_actor(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> str:
        """A new actor's id; ``actor.duplicate_key`` if the key exists."""
        ...

    async def sleep_actor(self, actor_id: str) -> None:
        """Put the actor to sleep if it is awake here, and wait until it sleeps."""
        ...

    async def destroy_actor(self, actor_id: str) -> None:
        """Destroy the actor (waking it for ``on_destroy``) and wait."""
        ...

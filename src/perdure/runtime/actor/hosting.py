"""What a live actor needs of the runtime that hosts it.

The instance (:mod:`perdure.runtime.actor.instance`) is created by the runtime
(:class:`~perdure.runtime.host.actor_runtime.ActorRuntime`) and asks it for little: the
store, the clock and the observers it builds its core on, and a few services. Writing
them down here, rather than importing the runtime, keeps the actor's room below the
host's: the runtime satisfies this protocol, and nothing in this room knows its class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from perdure.handles import Client
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.actor.workflow_host import Admission
    from perdure.runtime.actor.workflow_outcomes import WorkflowOutcomes
    from perdure.runtime.kernel.clock import Clock
    from perdure.runtime.kernel.core import AlarmSink, StopReason
    from perdure.store.base import Store
    from perdure.telemetry import Observers

__all__ = ["ActorHost", "RunVersions"]

T = TypeVar("T")


class ActorHost(Protocol):
    """The runtime as one of its live actors sees it."""

    @property
    def store(self) -> Store:
        """Where the actor's data lives."""
        ...

    @property
    def clock(self) -> Clock:
        """The runtime's clock (a manual one in tests)."""
        ...

    @property
    def observers(self) -> Observers:
        """Told of what the actor does (metrics, traces, the inspector's feed)."""
        ...

    @property
    def alarms(self) -> AlarmSink:
        """The alarm scheduler: wakes the actor for an alarm, should it sleep first."""
        ...

    @property
    def outcomes(self) -> WorkflowOutcomes:
        """Who waits for which actor's workflow to end (outlives the instances)."""
        ...

    def schedule_stop(self, instance: ActorInstance, reason: StopReason) -> None:
        """Stop the actor in the background (sleep, destroy)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` as a task of the runtime's (one that outlives the instance)."""
        ...

    async def drop_instance(self, instance: ActorInstance) -> None:
        """Forget a broken instance at once; the next request wakes the actor afresh."""
        ...

    def client(self) -> Client:
        """An in-process client (``c.client()``)."""
        ...

    async def fire_scheduled(self, instance: ActorInstance, action: str, args: list[Any]) -> Any:
        """Call a due schedule's action on the actor, as any request would be."""
        ...

    @property
    def versions(self) -> RunVersions | None:
        """The version check of a cluster node's workflow runs; ``None`` on a single
        server (which announces no version)."""
        ...


class RunVersions(Protocol):
    """A cluster node's version check as a workflow run sees it
    (``runtime/host/versions.py``'s ``VersionPlacement``)."""

    @property
    def version(self) -> str:
        """The version of the code this node announces."""
        ...

    def take_admission(self, actor_id: str) -> Admission | None:
        """What the check decided as the actor woke (while the nodes ran several
        versions), if it did; asked once."""
        ...

    async def admit_here(self, instance: ActorInstance, history: dict[str, bytes]) -> str | None:
        """The check of a run whose actor woke with no admission (every node on one
        version): the version it must wait for, or ``None`` to run it here."""
        ...

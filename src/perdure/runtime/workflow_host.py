"""The runtime's side of the workflow port: an actor instance as a workflow's host.

:class:`~perdure.workflows.port.WorkflowHost` says what the engine needs; this adapter
answers it from an :class:`ActorInstance`, its commit pipeline, queue and activity
tracker. What a step reaches (state, vars, ``client()``, ``keep_awake``, ``wait_until``,
``destroy``) is what hooks reach through ``c``: the adapter hands over the actor's context.
It holds no state of its own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from perdure.runtime.context import AbortSignal, ActorContext
from perdure.workflows.port import MessageQueue

if TYPE_CHECKING:
    from perdure.runtime.instance import ActorInstance

__all__ = ["ALARM_SOURCE", "ActorWorkflowHost"]

# The workflow's source among the actor's alarms (see ActorInstance.set_alarm).
ALARM_SOURCE = "workflow"


class ActorWorkflowHost:
    """Implements :class:`~perdure.workflows.port.WorkflowHost` for one live actor."""

    def __init__(self, instance: ActorInstance) -> None:
        self._instance = instance
        # Fixed for the instance's life: read once, so the engine's hot path reads
        # plain attributes.
        self.actor_id = instance.actor_id
        self.name = instance.name
        self.key = instance.key
        self.label = instance.label
        self.log = instance.log
        self.abort: AbortSignal = instance.abort
        self.actor: ActorContext = instance.context
        self._commits = instance.commits
        self._activity = instance.activity
        self._clock = instance.runtime.clock

    # ------------------------------------------------------------------ history

    async def load_history(self) -> dict[str, bytes]:
        """The actor's stored workflow history."""
        return await self._instance.runtime.store.load_history(self.actor_id)

    def write_history(self, puts: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        """Stage history writes in the actor's next commit."""
        self._commits.write_history(puts, deletes)

    def flush(self) -> Awaitable[None]:
        """Commit now; resolves once durable."""
        return self._commits.flush_now()

    # ------------------------------------------------------- queue and events

    def queue(self) -> MessageQueue | None:
        """The actor's queue, if it declares queues."""
        return self._instance.queue

    def require_queue(self) -> MessageQueue:
        """The actor's queue (``queue.not_configured`` if it declares none)."""
        self._instance.definition.require_queues()
        queue = self._instance.queue
        assert queue is not None  # an actor with queues has one while awake
        return queue

    def validate_event(self, name: str, args: list[Any]) -> None:
        """Check an event against the actor's definition."""
        self._instance.definition.validate_event(name, args)

    def send_event(self, name: str, args: list[Any]) -> None:
        """Deliver a committed event to subscribed connections."""
        self._instance.send_event(name, args)

    # ------------------------------------------------------- time and waiting

    def now_ms(self) -> int:
        """The runtime clock."""
        return self._clock.now_ms()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or until the actor starts to stop."""
        abort = asyncio.ensure_future(self.abort.wait())
        try:
            await asyncio.wait({abort}, timeout=seconds)
        finally:
            abort.cancel()

    def set_alarm(self, at: int | None) -> None:
        """Set or clear the workflow's alarm."""
        self._instance.set_alarm(ALARM_SOURCE, at)

    def set_waiting(self, waiting: bool) -> None:
        """A waiting workflow lets its actor sleep."""
        self._activity.run_waiting(waiting)

    async def report_error(self, event: dict[str, Any]) -> None:
        """Call ``on_error``: observational, so its failures are only logged."""
        instance = self._instance
        hook = instance.definition.hooks.get("on_error")
        if hook is None:
            return
        try:
            result = hook(instance.context, event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            self.log.exception("on_error failed")

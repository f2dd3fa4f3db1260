"""The runtime's side of the workflow port: an actor instance as a workflow's host.

:class:`~perdure.workflows.port.WorkflowHost` says what the engine needs; this adapter
answers it from an :class:`ActorInstance`, its commit pipeline, queue and activity
tracker. It holds no state of its own: what the engine calls on every step (staging
history, flushing, events) is bound once to the instance's own methods, so the port
costs the hot path nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perdure.runtime.actor.hooks import call_hook
from perdure.runtime.kernel.clock import wait_first
from perdure.runtime.kernel.core import AbortSignal
from perdure.store.encoding import decode_value
from perdure.store.kv import RawKv
from perdure.telemetry import Observer
from perdure.workflows.port import ActorClient, MessageQueue

if TYPE_CHECKING:
    from perdure.runtime.actor.hosting import RunVersions
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.workflows.engine import WorkflowRunner

__all__ = ["ALARM_SOURCE", "ActorWorkflowHost", "Admission", "start_workflow"]

# The workflow's source among the actor's alarms (see ActorCore.set_alarm).
ALARM_SOURCE = "workflow"


@dataclass(frozen=True, slots=True)
class Admission:
    """What a cluster node decided about a workflow run before waking its actor
    (``runtime/host/versions.py``): the stored history it read to decide (the run loads
    it from here instead of reading it again), and ``waiting_for``: the code version the
    run must wait for, when no live node runs it and its history does not replay here."""

    history: dict[str, bytes]
    waiting_for: str | None = None


def start_workflow(instance: ActorInstance, run: Callable[..., Any]) -> Coroutine[Any, Any, None]:
    """The coroutine of the actor's run task: the workflow run, or, when the run waits
    for a node of its code version, the hold that keeps its actor awake until then."""
    from perdure.workflows.engine import WorkflowRunner

    versions = instance.host.versions
    admission = None if versions is None else versions.take_admission(instance.actor_id)
    host = ActorWorkflowHost(instance, admission)
    runner = WorkflowRunner(host, run)
    instance.workflow = runner
    if admission is not None and admission.waiting_for is not None:
        return _hold(instance, runner, admission.waiting_for)
    if admission is None and versions is not None:
        return _checked_run(instance, host, runner, versions)
    return _run(instance, runner)


async def _run(instance: ActorInstance, runner: WorkflowRunner) -> None:
    try:
        await runner.run()
    finally:
        instance.activity.run_finished()


async def _checked_run(
    instance: ActorInstance, host: ActorWorkflowHost, runner: WorkflowRunner, versions: RunVersions
) -> None:
    """A cluster node's run with no admission (every live node on one version): check
    its version with the history it loads, then run or hold it."""
    try:
        history = await host.load_history()
        host.preload(history)
        waiting_for = await versions.admit_here(instance, history)
    except BaseException:
        instance.activity.run_finished()
        raise
    if waiting_for is not None:
        await _hold(instance, runner, waiting_for)
    else:
        await _run(instance, runner)


async def _hold(instance: ActorInstance, runner: WorkflowRunner, version: str) -> None:
    """Hold the run without running it: its status record says ``waiting_for_version``
    (the inspector, the admin API and clients' ``$workflow`` read it), its alarm stays due
    as a running workflow's does (so that another node takes it up should this one stop),
    and the actor stays awake, where the runtime sees it and moves it to a node of
    ``version`` when one appears. Controls (cancel, pause) are recorded as usual."""
    try:
        await runner.load()
        runner.set_meta(waitingForVersion=version)
        runner.mark_busy()
        await runner.host.flush()
        await instance.abort.wait()
    finally:
        instance.activity.run_finished()


class ActorWorkflowHost:
    """Implements :class:`~perdure.workflows.port.WorkflowHost` for one live actor."""

    def __init__(self, instance: ActorInstance, admission: Admission | None = None) -> None:
        self._instance = instance
        # The history read by the version check of a cluster node, used once.
        self._preloaded = None if admission is None else admission.history
        versions = instance.host.versions
        self.code_version = None if versions is None else versions.version
        # Fixed for the instance's life: read once, so the engine's hot path reads
        # plain attributes.
        self.actor_id = instance.actor_id
        self.name = instance.name
        self.key = instance.key
        self.label = instance.label
        self.log = instance.log
        self.abort: AbortSignal = instance.abort
        self.observer: Observer = instance.observer
        self.run_timeout = instance.options.workflow_timeout
        # The state and vars as actions see them (an assigned state becomes the schema's type).
        self.actor = instance.context
        self._activity = instance.activity
        self._clock = instance.core.clock
        # Called on every step: bound straight to what does the work.
        self.write_history = instance.commits.write_history
        self.flush = instance.commits.flush_now
        self.validate_event = instance.definition.validate_event
        self.input_value = instance.definition.input_value
        self.send_event = instance.send_event
        # What a step's context offers, as ``c`` does.
        self.keep_awake = instance.activity.keep_awake
        self.wait_until = instance.activity.wait_until

    # ------------------------------------------------------------------ history

    async def load_history(self) -> dict[str, bytes]:
        """The actor's stored workflow history."""
        preloaded, self._preloaded = self._preloaded, None
        if preloaded is not None:
            return preloaded
        return await self._instance.core.store.load_history(self.actor_id)

    def preload(self, history: dict[str, bytes]) -> None:
        """The next :meth:`load_history` returns ``history`` (read already)."""
        self._preloaded = history

    def create_input(self) -> Any:
        """The actor's create input, as stored (plain)."""
        stored = self._instance.record.input
        return None if stored is None else decode_value(stored)

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

    # ------------------------------------------------------- time and waiting

    def now_ms(self) -> int:
        """The runtime clock."""
        return self._clock.now_ms()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or until the actor starts to stop."""
        abort = asyncio.ensure_future(self.abort.wait())
        try:
            # Durable time: the runtime's clock counts it (a test's ManualClock moves it).
            await wait_first(self._clock, {abort}, seconds)
        finally:
            abort.cancel()

    def set_alarm(self, at: int | None) -> None:
        """Set or clear the workflow's alarm."""
        self._instance.core.set_alarm(ALARM_SOURCE, at)

    def set_waiting(self, waiting: bool) -> None:
        """A waiting workflow lets its actor sleep."""
        self._activity.run_waiting(waiting)

    def workflow_ended(self, status: dict[str, Any]) -> None:
        """Answer whoever waits for the run's result (the runtime's waiters outlive
        the instance)."""
        self._instance.host.outcomes.ended(self.actor_id, status)

    async def report_error(self, event: dict[str, Any]) -> None:
        """Call ``on_error``: observational, so its failures are only logged."""
        instance = self._instance
        hook = instance.definition.hooks.get("on_error")
        if hook is None:
            return
        try:
            await call_hook(hook, instance.context, event)
        except Exception:
            self.log.exception("on_error failed")

    # ------------------------------------------------------- the step context

    def client(self) -> ActorClient:
        """An in-process client for calling other actors."""
        return self._instance.client()

    def destroy(self) -> None:
        """Destroy the actor after the caller returns."""
        self._instance.request_stop("destroy")

    def kv(self) -> RawKv:
        """The actor's KV space (``c.kv``'s)."""
        return self._instance.core.kv

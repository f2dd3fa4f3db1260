"""What the workflow engine needs from its host: the port the actor runtime implements.

The engine decides (replay or run, wait or go on, retry or fail); its host stores and
delivers. History comes in (:meth:`WorkflowHistory.load_history`); commits, queue
operations, events, alarms and the clock go out through the members below. Nothing in
this package imports the actor runtime, not even for type hints, so the engine
can be read, tested and changed as a layer of its own (``runtime/actor/workflow_host.py`` is
the adapter).

Every member is synchronous unless it says it waits: the engine stages writes as it goes
and asks for one flush per durable step, so the hot path is a handful of plain calls.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from perdure.handles import Client
from perdure.queue_message import QueueMessage
from perdure.store.base import QueueMessageRecord
from perdure.store.kv import RawKv
from perdure.telemetry import Observer

__all__ = [
    "AbortSignal",
    "ActorClient",
    "ActorData",
    "ActorIdentity",
    "MessageQueue",
    "StepHost",
    "WorkflowHistory",
    "WorkflowHost",
]

T = TypeVar("T")


class AbortSignal(Protocol):
    """Fires once, when the actor starts to sleep or be destroyed."""

    @property
    def aborted(self) -> bool:
        """True once fired."""
        ...

    async def wait(self) -> None:
        """Return when the signal fires."""
        ...


class ActorClient(Client, Protocol):
    """A client for calling other actors (``client.<actor name>`` or ``actor(name)``):
    the one handle API of :mod:`perdure.handles` (the runtime's in-process client)."""


class ActorIdentity(Protocol):
    """Who the actor is (the workflow's id is its actor's id: one workflow per actor)."""

    @property
    def actor_id(self) -> str:
        """The actor's stable id."""
        ...

    @property
    def name(self) -> str:
        """The actor's registered name."""
        ...

    @property
    def key(self) -> Sequence[str]:
        """The actor's key parts."""
        ...

    @property
    def label(self) -> str:
        """``name/actor_id``: names the actor in errors."""
        ...

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that names the actor."""
        ...


class WorkflowHistory(Protocol):
    """The workflow's durable history, written through the actor's commits."""

    async def load_history(self) -> dict[str, bytes]:
        """Every stored entry, encoded, by location."""
        ...

    def write_history(self, puts: Mapping[str, bytes], deletes: Iterable[str]) -> None:
        """Stage entries to write and locations to delete; they go with the next commit,
        together with the actor's state and queue changes (one transaction)."""
        ...

    def flush(self) -> Awaitable[None]:
        """Commit everything staged so far now; the result resolves once it is durable
        (and fails if the write failed: the host then drops the actor)."""
        ...


class MessageQueue(Protocol):
    """The actor's queue, as a workflow uses it. Changes are staged like history."""

    def available(self, names: frozenset[str] | None, count: int) -> list[QueueMessageRecord]:
        """Up to ``count`` unclaimed messages for ``names`` (all if None), oldest first."""
        ...

    def check_receive(self, names: frozenset[str] | None, completable: bool, call: str) -> None:
        """Refuse a receive the queues' limits do not allow (a receive that is not
        completable, of a queue with a concurrency limit: ``queue.*``)."""
        ...

    def consume(self, records: Sequence[QueueMessageRecord], *, completable: bool) -> None:
        """Claim messages: delete them with the next commit, or (``completable``) hold
        them until completed."""
        ...

    def hold(self, message_id: int) -> None:
        """Mark a message as received but not completed (replayed from history)."""
        ...

    async def complete(self, message: QueueMessage, response: Any) -> None:
        """Delete a held message durably, then answer a sender waiting for it."""
        ...

    async def wait_for(self, names: frozenset[str] | None, timeout: float | None) -> bool:
        """Wait until a message for ``names`` is available (False on timeout); raises
        :class:`~perdure.errors.ActorAborted` when the actor stops."""
        ...

    async def abandon(self, message_id: int, error: BaseException) -> None:
        """Delete a held message durably and answer its waiting sender with ``error``
        (the run that took it ended without completing it)."""
        ...

    def message_body(self, name: str, plain: Any) -> Any:
        """A stored message body as receivers get it (the queue's schema type, if any)."""
        ...

    def check_send(self, name: str, body: Any) -> bytes:
        """Check a message now (its queue, schema and size) without staging it; returns
        it encoded, for :meth:`enqueue_checked`."""
        ...

    def enqueue_checked(
        self, name: str, data: bytes, *, delay: float | None = None, at: int | None = None
    ) -> object:
        """Stage a message :meth:`check_send` returned (durable with the next commit);
        ``delay`` seconds or ``at`` epoch ms: hidden from receivers until then."""
        ...

    def check_room(self, count: int) -> None:
        """Fail (``queue.full``) unless ``count`` more messages fit in the queue."""
        ...


class ActorData(Protocol):
    """The actor's data, which a running step reads and changes."""

    state: Any
    """The actor's durable state (committed with the step)."""
    vars: Any
    """The actor's ephemeral vars."""


class StepHost(Protocol):
    """The powers a running step reaches through its step context."""

    def client(self) -> ActorClient:
        """A client for calling other actors."""
        ...

    def keep_awake(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """Run ``awaitable``; the actor does not idle-sleep until it finishes."""
        ...

    def wait_until(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """Run ``awaitable``; a shutdown waits for it (within the grace period)."""
        ...

    def destroy(self) -> None:
        """Destroy the actor (in the background, after the caller returns)."""
        ...

    def kv(self) -> RawKv:
        """The actor's KV space: reads see its staged writes, writes are staged for
        its next commit (a step's go in with the step's commit)."""
        ...


class WorkflowHost(ActorIdentity, WorkflowHistory, StepHost, Protocol):
    """Everything the engine needs from the actor that runs the workflow."""

    @property
    def actor(self) -> ActorData:
        """The actor's state and vars (read on every access: a step may replace them)."""
        ...

    @property
    def abort(self) -> AbortSignal:
        """Fires when the actor starts to stop: the workflow stops at its next yield."""
        ...

    @property
    def run_timeout(self) -> float:
        """The run's deadline in seconds from its start (``workflow(timeout=...)``);
        0: none."""
        ...

    @property
    def code_version(self) -> str | None:
        """The version of the code this run is on (a cluster node's; ``None`` on a single
        server): recorded in the status record as the run starts, so that placement keeps
        the run on nodes of that code (docs/deploy.md)."""
        ...

    @property
    def observer(self) -> Observer:
        """Told about steps, their failures, the workflow's status and its timers."""
        ...

    def queue(self) -> MessageQueue | None:
        """The actor's queue, or None if it declares no queues."""
        ...

    def require_queue(self) -> MessageQueue:
        """The actor's queue; raises ``queue.not_configured`` if it declares none."""
        ...

    def validate_event(self, name: str, args: list[Any]) -> list[Any]:
        """Check an event against the actor's definition (raises if it does not fit);
        return its arguments in their plain form."""
        ...

    def create_input(self) -> Any:
        """The input the actor was created with, in its stored plain form (None
        without one): the first run's input."""
        ...

    def input_value(self, plain: Any) -> Any:
        """A run's input as the workflow reads it (``input=``'s type, if a model)."""
        ...

    def send_event(self, name: str, args: list[Any]) -> None:
        """Emit an event (already validated, its step finished): logged with the host's
        next commit and delivered to subscribers once that commit is durable."""
        ...

    def now_ms(self) -> int:
        """The host clock: milliseconds since the Unix epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less if the actor starts to stop meanwhile."""
        ...

    def set_alarm(self, at: int | None) -> None:
        """Wake the actor at ``at`` (epoch ms) if it is asleep then; None clears it.
        Staged with the next commit."""
        ...

    def set_waiting(self, waiting: bool) -> None:
        """True while the workflow waits (a sleep, a queue wait): the actor may
        hibernate meanwhile; False once it runs again."""
        ...

    def workflow_ended(self, status: dict[str, Any]) -> None:
        """The run ended (``status``: completed, failed or cancelled) and that is
        durable: answer whoever waits for its result."""
        ...

    async def report_error(self, event: dict[str, Any]) -> None:
        """Hand a workflow error event to the actor's ``on_error`` hook, if any (its
        failures are logged, never raised)."""
        ...

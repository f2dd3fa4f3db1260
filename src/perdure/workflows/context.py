"""The contexts a workflow sees: ``ctx`` (orchestration) and the step context (actor data).

Only orchestration lives on ``ctx``: steps, loops, sleeps, queue receives, join, race,
try, versioning. Actor data (``state``, ``vars``, ``broadcast``, ``queue.send``,
``client()``) is reached through the step context, and only while the step runs: a step's
effects must be recorded with the step, so that replay never repeats them.

Durations (``sleep``, timeouts, retry backoff) are seconds or a ``timedelta``; instants
(``sleep_until``) an aware ``datetime`` or epoch milliseconds. A wrong type, or a keyword
a method does not take (RivetKit's ``maxRetries``), raises
:class:`~perdure.errors.ArgumentError` where the call is made, naming what to write.
"""

from __future__ import annotations

import datetime as _dt
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from perdure._names import check_keywords, keyword_names, keywords_checked
from perdure._time import (
    duration_seconds,
    instant_ms,
    optional_duration,
    utc_datetime,
)
from perdure.errors import ArgumentError, StepContextExpired
from perdure.queue_message import QueueMessage
from perdure.store.kv import KvLayer
from perdure.store.kv_api import Kv
from perdure.workflows.step_queue import StepQueue

if TYPE_CHECKING:
    from perdure.workflows.port import ActorClient, ActorIdentity, WorkflowHost

__all__ = [
    "ChildWorkflow",
    "Loop",
    "LoopBreak",
    "LoopContinue",
    "StepContext",
    "TryResult",
    "WorkflowContext",
]

T = TypeVar("T")

# ctx.step's defaults (seconds), as objects its fast path recognises by identity.
_BACKOFF_BASE = 0.1
_BACKOFF_MAX = 30.0
_STEP_TIMEOUT = 30.0
_DEFAULT_BACKOFF = (_BACKOFF_BASE, _BACKOFF_MAX)


@dataclass(frozen=True, slots=True)
class LoopContinue(Generic[T]):
    """Go on with the next iteration, carrying ``state``."""

    state: T


@dataclass(frozen=True, slots=True)
class LoopBreak(Generic[T]):
    """Leave the loop; ``value`` becomes its result."""

    value: T


class Loop:
    """``Loop.continue_(state)`` and ``Loop.break_(value)``, returned by loop bodies."""

    @staticmethod
    def continue_(state: Any = None) -> LoopContinue[Any]:
        """Continue with ``state`` as the next iteration's state."""
        return LoopContinue(state)

    @staticmethod
    def break_(value: Any = None) -> LoopBreak[Any]:
        """Break out of the loop with ``value``."""
        return LoopBreak(value)


@dataclass(frozen=True, slots=True)
class TryResult:
    """Result of ``try_step`` / ``try_``: ``ok`` with ``value``, or a ``failure`` mapping."""

    ok: bool
    value: Any = None
    failure: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ChildWorkflow:
    """A child workflow ``ctx.start_child`` started (wait with ``ctx.wait_child``): its
    actor's ``id``, name and ``key``, the start's ``location``, and ``detached``."""

    id: str
    actor: str
    key: tuple[str, ...]
    location: str
    detached: bool = False


class WorkflowQueue:
    """``ctx.queue``: receive messages durably (recorded in history)."""

    def __init__(self, context: WorkflowContext) -> None:
        self._context = context

    @keywords_checked("ctx.queue.next()")
    async def next(
        self,
        name: str,
        *,
        names: Iterable[str] | str | None = None,
        timeout: float | _dt.timedelta | None = None,
        completable: bool = False,
    ) -> QueueMessage:
        """Wait for one message; ``name`` is the history entry name (not a queue name).

        ``names`` filters by queue (all queues when omitted). With a ``timeout`` that
        elapses this raises ``queue.timed_out``; use ``next_batch`` for optional reads.
        """
        seconds = optional_duration(timeout, "ctx.queue.next() timeout")
        return await self._context._runner.queue_next(
            self._context._scope, name, names, seconds, completable
        )

    @keywords_checked("ctx.queue.next_batch()")
    async def next_batch(
        self,
        name: str,
        *,
        names: Iterable[str] | str | None = None,
        count: int = 1,
        timeout: float | _dt.timedelta | None = None,
        completable: bool = False,
    ) -> list[QueueMessage]:
        """Wait for at least one message and take up to ``count`` ([] on timeout)."""
        seconds = optional_duration(timeout, "ctx.queue.next_batch() timeout")
        return await self._context._runner.queue_batch(
            self._context._scope, name, names, count, seconds, completable
        )


class _ActorIdentity:
    """Who the actor is: shared by the workflow context and the step context."""

    _identity: ActorIdentity

    @property
    def actor_id(self) -> str:
        """The actor's id (also the workflow id: one workflow per actor)."""
        return self._identity.actor_id

    @property
    def workflow_id(self) -> str:
        """The workflow's id: the actor's id (one workflow per actor)."""
        return self._identity.actor_id

    @property
    def name(self) -> str:
        """The actor's name."""
        return self._identity.name

    @property
    def key(self) -> list[str]:
        """The actor's key."""
        return list(self._identity.key)

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """The actor's logger."""
        return self._identity.log


# A branch of a join or race, a try block: code run with a context of its own scope.
Block = Callable[["WorkflowContext"], Awaitable[Any]]


class Primitives(Protocol):
    """What a context asks of the run it belongs to: the workflow's primitives, each
    given the context's scope (the engine's
    :class:`~perdure.workflows.engine.WorkflowRunner` provides them). Written here so
    that the contexts do not import the engine that builds them."""

    @property
    def host(self) -> WorkflowHost: ...

    async def step(
        self,
        scope: str,
        name: str,
        fn: Callable[[StepContext], Any],
        *,
        max_retries: int,
        backoff: tuple[float, float],
        timeout: float,
        retry_on_timeout: bool,
        ephemeral: bool,
        rollback: Callable[[StepContext, Any], Any] | None,
    ) -> Any: ...

    async def try_step(
        self, scope: str, name: str, fn: Callable[[StepContext], Any], options: dict[str, Any]
    ) -> TryResult: ...

    async def try_block(
        self, scope: str, name: str, fn: Block, catch: tuple[str, ...]
    ) -> TryResult: ...

    async def loop(
        self,
        scope: str,
        name: str,
        fn: Callable[..., Awaitable[Any]],
        state: Any,
        stateful: bool,
        prune_interval: int,
        keep: int,
    ) -> Any: ...

    async def sleep(
        self, scope: str, name: str, deadline: int | None, seconds: float | None
    ) -> None: ...

    async def join(self, scope: str, name: str, branches: dict[str, Block]) -> dict[str, Any]: ...

    async def race(
        self, scope: str, name: str, branches: list[tuple[str, Block]]
    ) -> tuple[str, Any]: ...

    async def queue_next(
        self,
        scope: str,
        name: str,
        names: Iterable[str] | str | None,
        timeout: float | None,
        completable: bool,
    ) -> QueueMessage: ...

    async def queue_batch(
        self,
        scope: str,
        name: str,
        names: Iterable[str] | str | None,
        count: int,
        timeout: float | None,
        completable: bool,
    ) -> list[QueueMessage]: ...

    async def rollback_checkpoint(self, scope: str, name: str) -> None: ...

    async def removed(self, scope: str, name: str, original_kind: str) -> None: ...

    async def get_version(self, scope: str, name: str, latest: int) -> int: ...

    async def deterministic(self, scope: str, name: str, kind: str) -> Any: ...

    def run_input(self) -> Any: ...

    async def start_child(
        self,
        scope: str,
        name: str,
        actor: str,
        key: str | Sequence[str] | None,
        input: Any,
        detached: bool,
    ) -> ChildWorkflow: ...

    async def wait_child(self, scope: str, name: str, child: ChildWorkflow) -> Any: ...


class WorkflowContext(_ActorIdentity):
    """``ctx``: the orchestration primitives, bound to one scope of the history."""

    def __init__(self, runner: Primitives, scope: str) -> None:
        self._runner = runner
        self._identity = runner.host
        self._scope = scope
        self.queue = WorkflowQueue(self)

    @property
    def aborted(self) -> bool:
        """True once the actor is going to sleep or be destroyed."""
        return self._runner.host.abort.aborted

    def is_evicted(self) -> bool:
        """Same as ``aborted``."""
        return self.aborted

    @property
    def input(self) -> Any:
        """The run's input: the actor's create input (as ``input=``'s type), or the
        input an operator's fork gave this run (docs/inspector.md, "Fork"). Recorded
        (the create input with the actor, a fork's in the run's status record), so
        every replay reads the same value."""
        return self._runner.run_input()

    # primitives
    @keywords_checked("ctx.step()")
    async def step(
        self,
        name: str,
        run: Callable[[StepContext], Any],
        *,
        max_retries: int = 3,
        retry_backoff_base: float | _dt.timedelta = _BACKOFF_BASE,
        retry_backoff_max: float | _dt.timedelta = _BACKOFF_MAX,
        timeout: float | _dt.timedelta = _STEP_TIMEOUT,
        retry_on_timeout: bool = False,
        ephemeral: bool = False,
        rollback: Callable[[StepContext, Any], Any] | None = None,
    ) -> Any:
        """Run ``run(step)`` once, durably; on replay return its recorded output.

        A failure is retried ``max_retries`` times; after the n-th failure the retry
        waits ``min(retry_backoff_max, retry_backoff_base * 2**n)`` (RivetKit's rule, no
        jitter, durable): 0.2 s, 0.4 s, 0.8 s… with the defaults. An attempt longer
        than ``timeout`` fails. Durations are seconds or ``timedelta``."""
        if type(max_retries) is not int or max_retries < 0:  # a bool is refused too
            raise ArgumentError(
                f"ctx.step(): max_retries must be a non-negative int, not {max_retries!r}."
            )
        # The defaults, as most steps use them, need no conversion (this runs every step).
        if retry_backoff_base is _BACKOFF_BASE and retry_backoff_max is _BACKOFF_MAX:
            backoff = _DEFAULT_BACKOFF
        else:
            backoff = (
                duration_seconds(retry_backoff_base, "ctx.step() retry_backoff_base"),
                duration_seconds(retry_backoff_max, "ctx.step() retry_backoff_max"),
            )
        seconds = (
            _STEP_TIMEOUT
            if timeout is _STEP_TIMEOUT
            else duration_seconds(timeout, "ctx.step() timeout")
        )
        return await self._runner.step(
            self._scope,
            name,
            run,
            max_retries=max_retries,
            backoff=backoff,
            timeout=seconds,
            retry_on_timeout=retry_on_timeout,
            ephemeral=ephemeral,
            rollback=rollback,
        )

    async def try_step(
        self, name: str, run: Callable[[StepContext], Any], **options: Any
    ) -> TryResult:
        """Like ``step`` (same options) but a terminal failure is returned as
        ``TryResult(ok=False)``."""
        check_keywords("ctx.try_step()", options, _STEP_OPTIONS)
        return await self._runner.try_step(self._scope, name, run, options)

    @keywords_checked("ctx.try_()")
    async def try_(
        self,
        name: str,
        run: Callable[[WorkflowContext], Awaitable[Any]],
        *,
        catch: Sequence[str] = ("step", "join", "race", "child"),
    ) -> TryResult:
        """Run a block; failures of the kinds in ``catch`` become ``TryResult(ok=False)``."""
        return await self._runner.try_block(self._scope, name, run, tuple(catch))

    @keywords_checked("ctx.loop()")
    async def loop(
        self,
        name: str,
        run: Callable[..., Awaitable[Any]],
        *,
        state: Any = None,
        stateful: bool | None = None,
        history_prune_interval: int = 20,
        history_size: int | None = None,
    ) -> Any:
        """Repeat ``run`` durably. Stateless: ``run(ctx)``; stateful (``state=`` given):
        ``run(ctx, state)`` returning ``Loop.continue_(state)`` or ``Loop.break_(value)``.
        Old iterations' history is pruned, so an endless loop uses constant storage.
        """
        is_stateful = stateful if stateful is not None else state is not None
        return await self._runner.loop(
            self._scope,
            name,
            run,
            state,
            is_stateful,
            max(1, history_prune_interval),
            history_size if history_size is not None else history_prune_interval,
        )

    @keywords_checked("ctx.sleep()")
    async def sleep(self, name: str, duration: float | _dt.timedelta) -> None:
        """Sleep durably for ``duration`` (seconds or ``timedelta``; a negative one does
        not wait). A long sleep lets the actor hibernate until the deadline."""
        seconds = duration_seconds(duration, "ctx.sleep() duration", negative_ok=True)
        await self._runner.sleep(self._scope, name, None, seconds)

    @keywords_checked("ctx.sleep_until()")
    async def sleep_until(self, name: str, when: _dt.datetime | int) -> None:
        """Sleep until ``when`` (an aware datetime, or epoch milliseconds)."""
        deadline = instant_ms(when, "ctx.sleep_until() time")
        await self._runner.sleep(self._scope, name, deadline, None)

    @keywords_checked("ctx.join()")
    async def join(
        self, name: str, branches: Mapping[str, Callable[[WorkflowContext], Awaitable[Any]]]
    ) -> dict[str, Any]:
        """Run branches concurrently; all must succeed. Returns outputs by branch name."""
        return await self._runner.join(self._scope, name, dict(branches))

    @keywords_checked("ctx.race()")
    async def race(
        self,
        name: str,
        branches: Mapping[str, Callable[[WorkflowContext], Awaitable[Any]]]
        | Sequence[tuple[str, Callable[[WorkflowContext], Awaitable[Any]]]],
    ) -> tuple[str, Any]:
        """Run branches concurrently; the first to succeed wins: ``(winner, value)``."""
        items = list(branches.items()) if isinstance(branches, Mapping) else list(branches)
        return await self._runner.race(self._scope, name, items)

    @keywords_checked("ctx.rollback_checkpoint()")
    async def rollback_checkpoint(self, name: str) -> None:
        """Mark the point after which steps may declare ``rollback`` handlers."""
        await self._runner.rollback_checkpoint(self._scope, name)

    @keywords_checked("ctx.removed()")
    async def removed(self, name: str, original_kind: str) -> None:
        """Stand in for an entry that the code no longer has (keeps old histories valid)."""
        await self._runner.removed(self._scope, name, original_kind)

    @keywords_checked("ctx.get_version()")
    async def get_version(self, name: str, latest: int) -> int:
        """``latest`` for new runs; 1 for runs that already passed this point before."""
        return await self._runner.get_version(self._scope, name, latest)

    @keywords_checked("ctx.now()")
    async def now(self, name: str) -> _dt.datetime:
        """The time (an aware UTC ``datetime``, to the millisecond) read from the actor's
        clock at the first execution and recorded: every replay returns the same."""
        return utc_datetime(await self._runner.deterministic(self._scope, name, "now"))

    @keywords_checked("ctx.random()")
    async def random(self, name: str) -> float:
        """A float in [0, 1), drawn at the first execution and recorded (not for secrets:
        it is stored in history)."""
        return float(await self._runner.deterministic(self._scope, name, "random"))

    @keywords_checked("ctx.uuid4()")
    async def uuid4(self, name: str) -> uuid.UUID:
        """A random UUID (version 4), drawn at the first execution and recorded."""
        return uuid.UUID(await self._runner.deterministic(self._scope, name, "uuid4"))

    @keywords_checked("ctx.start_child()")
    async def start_child(
        self,
        name: str,
        actor: str,
        *,
        key: str | Sequence[str] | None = None,
        input: Any = None,
        detached: bool = False,
    ) -> ChildWorkflow:
        """Start actor ``actor``'s workflow as a child of this run, exactly once: the
        actor is got or created by ``key`` (by default one derived from this actor's id
        and this entry's location) with ``input``, and recorded in history, so a replay
        never starts it twice. Cancelling this run cancels the child unless
        ``detached``. docs/workflow-children.md."""
        return await self._runner.start_child(self._scope, name, actor, key, input, detached)

    @keywords_checked("ctx.wait_child()")
    async def wait_child(self, name: str, child: ChildWorkflow) -> Any:
        """Wait until ``child``'s run ends and return its output, recorded in history
        (the actor may sleep meanwhile). A child that failed raises
        :class:`~perdure.errors.ChildWorkflowFailed`, one cancelled
        :class:`~perdure.errors.ChildWorkflowCancelled`, here, catchable."""
        return await self._runner.wait_child(self._scope, name, child)

    async def child(self, name: str, actor: str, **options: Any) -> Any:
        """``start_child`` (entry ``name``, its options) then ``wait_child`` (entry
        ``name-result``): the child's output."""
        started = await self.start_child(name, actor, **options)
        return await self.wait_child(f"{name}-result", started)


# What ``try_step`` passes on to ``step``.
_STEP_OPTIONS = keyword_names(WorkflowContext.step) - {"name", "run"}


class StepContext(_ActorIdentity):
    """What a step sees: actor data and effects, valid only while the step runs."""

    def __init__(self, host: WorkflowHost, location: str) -> None:
        self._host = host
        self._data = host.actor
        self._identity = host
        self.location = location
        self._live = True
        self._events: list[tuple[str, tuple[Any, ...]]] = []
        # Sends wait for the attempt to succeed: a failed one sends nothing, so its
        # retry does not send twice (``(queue, encoded body, delay s, at ms)``).
        self._sends: list[tuple[str, bytes, float | None, int | None]] = []
        self._kv: KvLayer | None = None  # the step's KV writes

    def _check(self, feature: str) -> None:
        if not self._live:
            raise StepContextExpired(
                f"`{feature}` is only available inside a running workflow step "
                f"(step `{self.location}` has finished)."
            )

    def stage_effects(self) -> None:
        """The attempt succeeded: stage its sends (all of them or, when the queue has no
        room for all, none: ``queue.full``) and its KV writes, for the step's commit."""
        sends, self._sends = self._sends, []
        if sends:
            queue = self._host.require_queue()
            queue.check_room(len(sends))
            for name, data, delay, at in sends:
                queue.enqueue_checked(name, data, delay=delay, at=at)
        if self._kv is not None:
            self._kv.keep()

    def close(self) -> list[tuple[str, tuple[Any, ...]]]:
        """End the step; return the events it broadcast (delivered after commit). Sends and
        KV writes not staged by :meth:`stage_effects` (a failed attempt's) are dropped."""
        self._live = False
        self._sends = []
        self._kv = None
        events, self._events = self._events, []
        return events

    @property
    def state(self) -> Any:
        """The actor's state (committed together with the step)."""
        self._check("state")
        return self._data.state

    @state.setter
    def state(self, value: Any) -> None:
        self._check("state")
        self._data.state = value

    @property
    def vars(self) -> Any:
        """The actor's ephemeral vars."""
        self._check("vars")
        return self._data.vars

    @vars.setter
    def vars(self, value: Any) -> None:
        self._check("vars")
        self._data.vars = value

    def broadcast(self, name: str, *args: Any) -> None:
        """Broadcast an event; it leaves only after the step's commit."""
        self._check("broadcast")
        # Validated now; sent (in plain form, models dumped) after the step's commit.
        self._events.append((name, tuple(self._host.validate_event(name, list(args)))))

    @property
    def queue(self) -> StepQueue:
        """``queue.send``: enqueue a message, committed together with the step."""
        self._check("queue")
        return StepQueue(self)

    @property
    def kv(self) -> Kv:
        """The actor's KV space as ``c.kv``; a failed attempt's writes are dropped."""
        self._check("kv")
        self._kv = self._kv or KvLayer(self._host.kv())  # made at first use
        return Kv(self._kv)

    def client(self) -> ActorClient:
        """A client for calling other actors."""
        self._check("client")
        return self._host.client()

    def keep_awake(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """Keep the actor awake while ``awaitable`` runs."""
        self._check("keep_awake")
        return self._host.keep_awake(awaitable)

    def wait_until(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """Make shutdown wait for ``awaitable``."""
        self._check("wait_until")
        return self._host.wait_until(awaitable)

    def destroy(self) -> None:
        """Destroy the actor after this step."""
        self._check("destroy")
        self._host.destroy()

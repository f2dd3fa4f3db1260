"""The context ``c`` that hooks and actions receive.

A context reads and acts on the actor through :class:`ContextTarget`, the few members of
the live instance that actor code may reach; it does not know the instance itself.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from perdure.errors import (
    AccessForbidden,
    ArgumentError,
    DbError,
    InternalError,
    PerdureError,
    StateNotEnabled,
)
from perdure.runtime.actor.connections import RequestInfo, current_request
from perdure.runtime.kernel.core import AbortSignal, ActorCore, StopReason
from perdure.store.kv_api import Kv

if TYPE_CHECKING:
    from perdure.handles import Client
    from perdure.runtime.actor.connections import Connection
    from perdure.runtime.kernel.db_api import Database
    from perdure.runtime.queues.actor_queue import ActorQueue
    from perdure.runtime.queues.receiver import QueueReceiver
    from perdure.runtime.schedules.api import ActorCron, ActorSchedule
    from perdure.runtime.schedules.manager import ScheduleManager

__all__ = ["AbortSignal", "ActionContext", "ActorContext", "ContextTarget", "check_access"]

T = TypeVar("T")


class ContextTarget(Protocol):
    """What a context reaches of the live actor (the instance provides it)."""

    core: ActorCore
    state: Any
    vars: Any
    conns: dict[str, Connection]
    queue: ActorQueue | None
    schedules: ScheduleManager

    def broadcast(self, name: str, args: tuple[Any, ...] | list[Any]) -> None:
        """Log an event and send it to its subscribers once durable."""
        ...

    def request_stop(self, reason: StopReason) -> None:
        """Ask for sleep or destroy (it happens after the caller returns)."""
        ...

    def client(self) -> Client:
        """A client for calling actors in process."""
        ...


class ActorContext:
    """What hooks receive as ``c``: the actor's state, identity and powers."""

    __slots__ = ("_instance",)

    def __init__(self, instance: ContextTarget) -> None:
        self._instance = instance

    @property
    def state(self) -> Any:
        """The actor's durable state. Mutate it freely; it is saved after each action.

        With a state schema (docs/models.md) it is the model, and an assigned value is
        converted to it (a dict becomes the model; ``state.invalid`` if it does not fit).
        An actor declared without state has none: ``actor.state_not_enabled``.
        """
        state = self._instance.state
        if state is None and not self._instance.core.definition.has_state:
            raise StateNotEnabled()
        return state

    @state.setter
    def state(self, value: Any) -> None:
        definition = self._instance.core.definition
        if not definition.has_state:
            raise StateNotEnabled()
        self._instance.state = definition.adopt_state(value)

    @property
    def vars(self) -> Any:
        """Ephemeral per-wake values (clients, caches); never persisted."""
        return self._instance.vars

    @vars.setter
    def vars(self, value: Any) -> None:
        self._instance.vars = value

    @property
    def name(self) -> str:
        """The actor's registered name."""
        return self._instance.core.name

    @property
    def key(self) -> list[str]:
        """The actor's key parts."""
        return list(self._instance.core.key)

    @property
    def actor_id(self) -> str:
        """The actor's stable id."""
        return self._instance.core.actor_id

    @property
    def generation(self) -> int:
        """How many times this actor has started (bumped at every wake)."""
        return self._instance.core.generation

    @property
    def request(self) -> RequestInfo | None:
        """The client request being served (headers, origin, client address), read-only:
        set in ``on_before_connect``, ``create_conn_state``, ``on_connect``, in actions
        called over HTTP or a WebSocket and in ``on_disconnect`` when the client closes.
        ``None`` in process, for schedule fires and in lifecycle hooks (docs/edge.md)."""
        return current_request(self._instance.core.actor_id)

    @property
    def conns(self) -> dict[str, Connection]:
        """The open connections, by id."""
        return self._instance.conns

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that names the actor."""
        return self._instance.core.log

    @property
    def abort_signal(self) -> AbortSignal:
        """Fires when the actor begins to sleep or be destroyed."""
        return self._instance.core.abort

    @property
    def aborted(self) -> bool:
        """True once the actor is shutting down."""
        return self._instance.core.abort.aborted

    def broadcast(self, name: str, *args: Any) -> None:
        """Send an event to every connection subscribed to ``name``."""
        self._instance.broadcast(name, args)

    @property
    def queue(self) -> QueueReceiver:
        """The actor's durable queues: ``send``, ``next``, ``next_batch``, ``iter`` …"""
        from perdure.runtime.queues.receiver import QueueReceiver

        self._instance.core.definition.require_queues()
        queue = self._instance.queue
        assert queue is not None  # an actor with queues has one while awake
        return QueueReceiver(queue)

    @property
    def schedule(self) -> ActorSchedule:
        """One-shot scheduled actions: ``after``, ``at``, ``get``, ``list``, ``cancel``."""
        from perdure.runtime.schedules.api import ActorSchedule

        return ActorSchedule(self._instance.schedules)

    @property
    def cron(self) -> ActorCron:
        """Recurring jobs: ``every``, ``set``, ``get``, ``list``, ``delete``, ``history``."""
        from perdure.runtime.schedules.api import ActorCron

        return ActorCron(self._instance.schedules)

    @property
    def kv(self) -> Kv:
        """The actor's ordered key-value space (docs/storage.md): ``get``, ``get_batch``,
        ``put``, ``put_batch``, ``delete``, ``delete_batch``, ``delete_range``, ``list``,
        ``list_range``. Reads see this actor's own writes; writes are durable with the
        next commit, atomically with the state (an action's, once it returns)."""
        return Kv(self._instance.core.kv)

    @property
    def db(self) -> Database:
        """The actor's SQL database (``db=db(...)`` in its definition; docs/storage.md):
        ``await c.db.execute(sql, *params)`` returns rows as dicts; ``c.db.transaction()``.
        Writes are durable with the next commit, atomically with the state."""
        from perdure.runtime.kernel.db_api import Database

        db = self._instance.core.db
        if db is None:
            raise DbError(
                "This actor has no SQL database: give it one with "
                "actor(db=db(on_migrate=...), ...).",
                code="not_configured",
            )
        return Database(db)

    async def save_state(self, *, immediate: bool = False) -> None:
        """Persist the state: ``immediate=True`` waits until it is durable."""
        future = self._instance.core.request_flush()
        if immediate:
            await future

    def keep_awake(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Run ``awaitable`` and keep the actor awake (no idle sleep) until it finishes."""
        return self._instance.core.activity.keep_awake(awaitable)

    def wait_until(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Run ``awaitable``; a shutdown waits for it (within the grace period)."""
        return self._instance.core.activity.wait_until(awaitable)

    def set_prevent_sleep(self, prevent: bool) -> None:
        """rivetkit's ``setPreventSleep``: while True the actor does not idle-sleep, and
        a stop (``c.sleep()``, a shutdown) waits after ``on_sleep``, within the grace
        period, for it to be set back to False. Not stored: a wake starts with False."""
        if not isinstance(prevent, bool):
            raise ArgumentError(f"set_prevent_sleep takes True or False, not {prevent!r}.")
        self._instance.core.activity.set_prevent_sleep(prevent)

    @property
    def prevent_sleep(self) -> bool:
        """What :meth:`set_prevent_sleep` last set (False at every wake)."""
        return self._instance.core.activity.prevent_sleep

    def sleep(self) -> None:
        """Ask the actor to go to sleep now (takes effect after this call returns)."""
        self._instance.request_stop("sleep")

    def destroy(self) -> None:
        """Destroy the actor: ``on_destroy`` runs, its data is deleted, later calls fail."""
        self._instance.request_stop("destroy")

    def client(self) -> Client:
        """A client for calling other actors (in-process, no network hop)."""
        return self._instance.client()


async def check_access(
    instance: ContextTarget, conn: Connection, hook_name: str, name: str
) -> None:
    """Ask the access hooks whether ``conn`` may use event or queue ``name``: the event's
    or queue's own (``event(can_subscribe=)``, ``queue(can_publish=)``, rivetkit's
    per-event ``canSubscribe`` and per-queue ``canPublish``, called with ``c``), then the
    actor's ``can_subscribe``/``can_publish`` (called with ``c`` and ``name``); both must
    allow. ``False`` refuses with 403 ``auth.forbidden``. A hook gets an action context
    (``c.conn``, ``c.request``); an error it raises is the answer, a value other than a
    bool is a mistake in the actor (logged, ``actor.internal_error``)."""
    definition = instance.core.definition
    specs: Any = definition.events if hook_name == "can_subscribe" else definition.queues
    spec = None if specs is None else specs.get(name)
    own = None if spec is None else getattr(spec, hook_name)
    if own is not None:
        await _ask(instance, conn, hook_name, name, own)
    hook = definition.hooks.get(hook_name)
    if hook is not None:
        await _ask(instance, conn, hook_name, name, hook, name)


async def _ask(
    instance: ContextTarget,
    conn: Connection,
    hook_name: str,
    name: str,
    hook: Callable[..., Any],
    *args: Any,
) -> None:
    try:
        allowed = hook(ActionContext(instance, conn), *args)
        if inspect.isawaitable(allowed):
            allowed = await allowed
    except PerdureError:
        raise
    except Exception as exc:
        instance.core.log.exception("%s failed", hook_name)
        raise InternalError() from exc
    if not isinstance(allowed, bool):
        instance.core.log.error("%s returned %r: it must return True or False", hook_name, allowed)
        raise InternalError()
    if not allowed:
        what = "subscribe to event" if hook_name == "can_subscribe" else "send to queue"
        raise AccessForbidden(
            f"This connection may not {what} `{name}`.",
            metadata={"event" if hook_name == "can_subscribe" else "queue": name},
        )


class ActionContext(ActorContext):
    """The context of an action; ``conn`` is the calling connection (``None`` over HTTP)."""

    __slots__ = ("conn",)

    def __init__(self, instance: ContextTarget, conn: Connection | None) -> None:
        super().__init__(instance)
        self.conn = conn

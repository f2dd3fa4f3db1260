"""An in-process client: the same handle API as the network client, without the network.

Used by tests, benchmarks and ``c.client()`` (actor-to-actor calls)::

    client = runtime.client()
    counter = client.counter.get_or_create(["main"])
    await counter.increment(5)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from perdure.keys import normalize_key
from perdure.runtime.dispatch import ActorAddress, ActorRef, CallAction, ConnectionRef, SendMessage

if TYPE_CHECKING:
    from perdure.runtime.cluster import RemoteConnection
    from perdure.runtime.dispatch import ActorDispatch, Operation, ResolveMethod
    from perdure.runtime.queue import QueueSendResult

__all__ = ["ActionRef", "LocalAccessor", "LocalClient", "LocalConnection", "LocalHandle"]

KeyArg = str | Sequence[str] | None


class LocalClient:
    """``client.<actor name>`` gives an accessor with ``get``/``get_or_create``/…"""

    def __init__(self, dispatch: ActorDispatch) -> None:
        self._dispatch = dispatch

    def actor(self, name: str) -> LocalAccessor:
        """The accessor for actor ``name``."""
        return LocalAccessor(self._dispatch, name)

    def __getattr__(self, name: str) -> LocalAccessor:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)


class LocalAccessor:
    """Handles to actors of one name."""

    def __init__(self, dispatch: ActorDispatch, name: str) -> None:
        self._dispatch = dispatch
        self._name = name

    def get(self, key: KeyArg = None) -> LocalHandle:
        """A handle to an existing actor (``actor.not_found`` on first use if absent)."""
        return LocalHandle(self._dispatch, self._name, key, "get")

    def get_or_create(self, key: KeyArg = None, *, input: Any = None) -> LocalHandle:
        """A handle that creates the actor on first use, with ``input``."""
        return LocalHandle(self._dispatch, self._name, key, "getOrCreate", input)

    async def create(self, key: KeyArg = None, *, input: Any = None) -> LocalHandle:
        """Create the actor now (error if the key exists) and return a handle bound to it."""
        actor = await self._dispatch.create(self._name, key, input)
        return self.get_for_id(actor.actor_id)

    def get_for_id(self, actor_id: str) -> LocalHandle:
        """A handle bound to an actor id."""
        handle = LocalHandle(self._dispatch, self._name, None, "get")
        handle._ref = self._dispatch.ref(actor_id)
        return handle


class LocalHandle:
    """Calls actions on one actor; unknown attributes are actions (``await h.increment(1)``)."""

    def __init__(
        self,
        dispatch: ActorDispatch,
        name: str,
        key: KeyArg,
        method: ResolveMethod,
        input: Any = None,
    ) -> None:
        self._dispatch = dispatch
        self._name = name
        self._key = key
        self._method = method
        self._input = input
        self._ref: ActorRef | None = None

    async def resolve(self) -> str:
        """The actor id (creating the actor if this is a get-or-create handle)."""
        return (await self._resolved()).actor_id

    async def _resolved(self) -> ActorRef:
        if self._ref is None:
            address = ActorAddress(
                name=self._name,
                key=normalize_key(self._key),
                method=self._method,
                input=self._input,
            )
            self._ref = await self._dispatch.resolve(address)
        return self._ref

    async def _perform(self, operation: Operation) -> Any:
        if self._ref is None and self._method != "get":
            # Checked before the first use can create the actor, as over the network.
            operation = self._dispatch.check(self._name, operation)
        return await (await self._resolved()).perform(operation)

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args``."""
        return await self._perform(CallAction(name, list(args)))

    async def send(
        self, queue: str, body: Any, *, wait: bool = False, timeout: float | None = None
    ) -> QueueSendResult:
        """Send a durable message to ``queue``; with ``wait``, wait (up to ``timeout``
        seconds) until the receiver completes it."""
        result: QueueSendResult = await self._perform(SendMessage(queue, body, wait, timeout))
        return result

    def __getattr__(self, name: str) -> ActionRef:
        if name.startswith("_"):
            raise AttributeError(name)
        return ActionRef(self.action, name)

    async def connect(self, params: Any = None) -> LocalConnection:
        """Open an in-process connection (events and actions)."""
        conn = LocalConnection()
        await conn.open(await self._resolved(), params)
        return conn


class ActionRef:
    """``handle.users.add(...)``: calling it calls the action; attributes nest the name.

    Nested action groups are dotted names on the wire (``users.add``), as in Rivet's client.
    """

    __slots__ = ("_call", "_name")

    def __init__(self, call: Callable[..., Coroutine[Any, Any, Any]], name: str) -> None:
        self._call = call
        self._name = name

    def __call__(self, *args: Any) -> Coroutine[Any, Any, Any]:
        return self._call(self._name, *args)

    def __getattr__(self, name: str) -> ActionRef:
        if name.startswith("_"):
            raise AttributeError(name)
        return ActionRef(self._call, f"{self._name}.{name}")


class LocalConnection:
    """An in-process connection; it is its own transport."""

    def __init__(self) -> None:
        self.conn: ConnectionRef | RemoteConnection | None = None
        self.events: list[tuple[str, list[Any]]] = []
        self.closed: tuple[int, str] | None = None
        self._listeners: dict[str, list[Callable[..., Any]]] = {}

    async def open(self, actor: ActorRef, params: Any) -> None:
        """Connect to ``actor``."""
        self.conn = await actor.connect(params, self)

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Subscribe to ``event``; returns a function that unsubscribes."""
        self._listeners.setdefault(event, []).append(callback)
        if self.conn is not None:
            self.conn.subscribe(event)

        def off() -> None:
            listeners = self._listeners.get(event, [])
            if callback in listeners:
                listeners.remove(callback)
            if not listeners and self.conn is not None:
                self.conn.unsubscribe(event)

        return off

    async def action(self, name: str, *args: Any) -> Any:
        """Call an action over this connection."""
        if self.conn is None:
            raise RuntimeError("not connected")
        return await self.conn.call(name, list(args))

    def send_event(self, name: str, args: list[Any]) -> None:
        self.events.append((name, args))
        for callback in list(self._listeners.get(name, [])):
            callback(*args)

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    async def dispose(self) -> None:
        """Disconnect (runs ``on_disconnect``)."""
        if self.conn is not None:
            await self.conn.close()
        self.conn = None
        await asyncio.sleep(0)

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

if TYPE_CHECKING:
    from perdure.runtime.connections import Connection
    from perdure.runtime.instance import ActorInstance
    from perdure.runtime.runtime import ActorRuntime, ResolveMethod

__all__ = ["ActionRef", "LocalAccessor", "LocalClient", "LocalConnection", "LocalHandle"]

KeyArg = str | Sequence[str] | None


class LocalClient:
    """``client.<actor name>`` gives an accessor with ``get``/``get_or_create``/…"""

    def __init__(self, runtime: ActorRuntime) -> None:
        self._runtime = runtime

    def actor(self, name: str) -> LocalAccessor:
        """The accessor for actor ``name``."""
        return LocalAccessor(self._runtime, name)

    def __getattr__(self, name: str) -> LocalAccessor:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)


class LocalAccessor:
    """Handles to actors of one name."""

    def __init__(self, runtime: ActorRuntime, name: str) -> None:
        self._runtime = runtime
        self._name = name

    def get(self, key: KeyArg = None) -> LocalHandle:
        """A handle to an existing actor (``actor.not_found`` on first use if absent)."""
        return LocalHandle(self._runtime, self._name, key, "get")

    def get_or_create(self, key: KeyArg = None, *, input: Any = None) -> LocalHandle:
        """A handle that creates the actor on first use, with ``input``."""
        return LocalHandle(self._runtime, self._name, key, "getOrCreate", input)

    async def create(self, key: KeyArg = None, *, input: Any = None) -> LocalHandle:
        """Create the actor now (error if the key exists) and return a handle bound to it."""
        actor_id = await self._runtime.create_actor(self._name, key, input)
        return self.get_for_id(actor_id)

    def get_for_id(self, actor_id: str) -> LocalHandle:
        """A handle bound to an actor id."""
        handle = LocalHandle(self._runtime, self._name, None, "get")
        handle._actor_id = actor_id
        return handle


class LocalHandle:
    """Calls actions on one actor; unknown attributes are actions (``await h.increment(1)``)."""

    def __init__(
        self,
        runtime: ActorRuntime,
        name: str,
        key: KeyArg,
        method: ResolveMethod,
        input: Any = None,
    ) -> None:
        self._runtime = runtime
        self._name = name
        self._key = key
        self._method = method
        self._input = input
        self._actor_id: str | None = None

    async def resolve(self) -> str:
        """The actor id (creating the actor if this is a get-or-create handle)."""
        if self._actor_id is None:
            self._actor_id = await self._runtime.resolve(
                self._name, self._key, self._method, self._input
            )
        return self._actor_id

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args``."""
        return await self._runtime.call(await self.resolve(), name, list(args))

    def __getattr__(self, name: str) -> ActionRef:
        if name.startswith("_"):
            raise AttributeError(name)
        return ActionRef(self.action, name)

    async def connect(self, params: Any = None) -> LocalConnection:
        """Open an in-process connection (events and actions)."""
        conn = LocalConnection(self._runtime)
        await conn.open(await self.resolve(), params)
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

    def __init__(self, runtime: ActorRuntime) -> None:
        self._runtime = runtime
        self._instance: ActorInstance | None = None
        self.conn: Connection | None = None
        self.events: list[tuple[str, list[Any]]] = []
        self.closed: tuple[int, str] | None = None
        self._listeners: dict[str, list[Callable[..., Any]]] = {}

    async def open(self, actor_id: str, params: Any) -> None:
        """Connect to ``actor_id``."""
        self._instance, self.conn = await self._runtime.connect(actor_id, params, self)

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Subscribe to ``event``; returns a function that unsubscribes."""
        self._listeners.setdefault(event, []).append(callback)
        if self.conn is not None:
            self.conn.subscriptions.add(event)

        def off() -> None:
            listeners = self._listeners.get(event, [])
            if callback in listeners:
                listeners.remove(callback)
            if not listeners and self.conn is not None:
                self.conn.subscriptions.discard(event)

        return off

    async def action(self, name: str, *args: Any) -> Any:
        """Call an action over this connection."""
        if self._instance is None or self.conn is None:
            raise RuntimeError("not connected")
        return await self._instance.call_action(name, list(args), self.conn)

    def send_event(self, name: str, args: list[Any]) -> None:
        self.events.append((name, args))
        for callback in list(self._listeners.get(name, [])):
            callback(*args)

    def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    async def dispose(self) -> None:
        """Disconnect (runs ``on_disconnect``)."""
        if self._instance is not None and self.conn is not None:
            await self._instance.disconnect(self.conn)
        self.conn = None
        await asyncio.sleep(0)

"""An in-process connection: the :class:`~perdure.handles.Connection` of ``runtime.client()``
and ``c.client()``.

Like the network connection it opens in the background (``handle.connect()`` returns
at once; ``await conn.wait_open()`` waits and raises a refusal), takes listeners before
it is open (they are subscribed when it opens), and calls actions by attribute. It is
its own transport: the actor sends events and the close straight to it.

Listeners may be plain functions or coroutine functions (run as tasks the connection
owns); their exceptions are logged to ``perdure.client``, never raised into the actor
that broadcast.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Literal

from perdure.errors import ActorAborted
from perdure.handles import CloseEvent, Duration, seconds

if TYPE_CHECKING:
    from perdure.runtime.cluster.member import RemoteConnection
    from perdure.runtime.dispatch.refs import ActorRef, ConnectionRef

__all__ = ["ActionRef", "LocalConnection"]

logger = logging.getLogger("perdure.client")
Lifecycle = Literal["open", "close", "error"]


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


class _Listener:
    __slots__ = ("callback", "once")

    def __init__(self, callback: Callable[..., Any], once: bool) -> None:
        self.callback = callback
        self.once = once


class LocalConnection:
    """A connection to one actor, in process. ``events`` records every event received
    and ``closed`` the ``(code, reason)`` the actor closed it with (for tests)."""

    def __init__(
        self,
        resolve: Callable[[], Coroutine[Any, Any, ActorRef]],
        params: Any,
        check_event: Callable[[str], None],
    ) -> None:
        self.conn: ConnectionRef | RemoteConnection | None = None
        self.events: list[tuple[str, list[Any]]] = []
        self.closed: tuple[int, str] | None = None
        self._check_event = check_event
        self._listeners: dict[str, list[_Listener]] = {}
        self._lifecycle: dict[Lifecycle, list[Callable[..., Any]]] = {
            "open": [],
            "close": [],
            "error": [],
        }
        self._tasks: set[asyncio.Task[Any]] = set()
        self._disposed = False
        self._opening = asyncio.get_running_loop().create_task(self._open(resolve, params))
        self._opening.add_done_callback(self._opened)

    # -- opening ------------------------------------------------------------------------

    async def _open(
        self, resolve: Callable[[], Coroutine[Any, Any, ActorRef]], params: Any
    ) -> None:
        actor = await resolve()
        self.conn = await actor.connect(params, self)
        for event in self._listeners:
            self.conn.subscribe(event)

    def _opened(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so an unawaited refusal is not "lost"
        if error is not None:
            self._emit("error", error if isinstance(error, Exception) else RuntimeError(error))
            return
        self._emit("open")

    async def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Wait until the connection is open; raises what refused it (an error of
        ``on_before_connect``, ``actor.not_found`` …), ``TimeoutError`` after
        ``timeout`` (seconds or a ``timedelta``)."""
        if self._disposed:
            raise ActorAborted("The connection was disposed.")
        try:
            await asyncio.wait_for(
                asyncio.shield(self._opening), seconds(timeout, "wait_open() timeout")
            )
        except TimeoutError:
            if self._opening.done():
                raise
            raise TimeoutError(f"The connection did not open within {timeout} s.") from None

    def __await__(self) -> Generator[Any, None, LocalConnection]:
        """``conn = await handle.connect()``: open, then the connection."""
        yield from self.wait_open(None).__await__()
        return self

    # -- state --------------------------------------------------------------------------

    @property
    def status(self) -> Literal["connecting", "connected", "disconnected"]:
        """``connecting`` until open, ``connected``, ``disconnected`` once closed."""
        if self._disposed or self.closed is not None or (self._opening.done() and not self.conn):
            return "disconnected"
        return "connected" if self.conn is not None else "connecting"

    @property
    def is_connected(self) -> bool:
        """Whether the connection is open."""
        return self.status == "connected"

    @property
    def actor_id(self) -> str | None:
        """The actor's id, once open."""
        return None if self.conn is None else self.conn.actor_id

    @property
    def connection_id(self) -> str | None:
        """The connection's id, once open."""
        return None if self.conn is None else self.conn.id

    # -- listeners ----------------------------------------------------------------------

    def on(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Call ``callback(*args)`` on each broadcast of ``event``; returns a function
        that removes the listener. Raises ``actor.unknown_event`` at once for an event
        the actor does not declare."""
        return self._listen(event, callback, once=False)

    def once(self, event: str, callback: Callable[..., Any]) -> Callable[[], None]:
        """Like :meth:`on`, for the next broadcast only."""
        return self._listen(event, callback, once=True)

    def off(self, event: str, callback: Callable[..., Any] | None = None) -> None:
        """Remove ``callback`` (every listener of ``event`` if ``None``)."""
        entries = self._listeners.get(event, [])
        kept = [] if callback is None else [e for e in entries if e.callback != callback]
        self._set_listeners(event, kept)

    def _listen(
        self, event: str, callback: Callable[..., Any], *, once: bool
    ) -> Callable[[], None]:
        self._check_event(event)
        entry = _Listener(callback, once)
        entries = self._listeners.setdefault(event, [])
        entries.append(entry)
        if len(entries) == 1 and self.conn is not None:
            self.conn.subscribe(event)

        def unsubscribe() -> None:
            current = self._listeners.get(event, [])
            self._set_listeners(event, [e for e in current if e is not entry])

        return unsubscribe

    def _set_listeners(self, event: str, entries: list[_Listener]) -> None:
        if entries:
            self._listeners[event] = entries
            return
        if self._listeners.pop(event, None) is not None and self.conn is not None:
            self.conn.unsubscribe(event)

    def on_open(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback()`` when the connection opens (now, if it is open)."""
        if self.is_connected:
            self._run(callback, ())
        return self._add_lifecycle("open", callback)

    def on_close(self, callback: Callable[..., Any]) -> Callable[[], None]:
        """Call ``callback(CloseEvent(code, reason))`` when the actor closes the connection."""
        return self._add_lifecycle("close", callback)

    def on_error(self, callback: Callable[[Exception], Any]) -> Callable[[], None]:
        """Call ``callback(error)`` when the connection is refused."""
        return self._add_lifecycle("error", callback)

    def _add_lifecycle(self, kind: Lifecycle, callback: Callable[..., Any]) -> Callable[[], None]:
        self._lifecycle[kind].append(callback)

        def remove() -> None:
            if callback in self._lifecycle[kind]:
                self._lifecycle[kind].remove(callback)

        return remove

    def _emit(self, kind: Lifecycle, *args: Any) -> None:
        for callback in list(self._lifecycle[kind]):
            self._run(callback, args)

    def _run(self, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            result = callback(*args)
        except Exception:
            logger.exception("A connection callback %r raised", callback)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(_guard(result, callback))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- actions ------------------------------------------------------------------------

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` over this connection (it waits for the open)."""
        await self.wait_open(None)
        if self.conn is None:
            raise ActorAborted("The connection is closed.")
        return await self.conn.call(name, list(args))

    def __getattr__(self, name: str) -> ActionRef:
        if name.startswith("_"):
            raise AttributeError(name)
        return ActionRef(self.action, name)

    # -- the transport the actor talks to -----------------------------------------------

    def send_event(self, name: str, args: list[Any]) -> None:
        """An event from the actor: recorded, and passed to its listeners."""
        self.events.append((name, args))
        entries = self._listeners.get(name, [])
        for entry in list(entries):
            self._run(entry.callback, tuple(args))
        if any(entry.once for entry in entries):
            self._set_listeners(name, [e for e in entries if not e.once])

    def close(self, code: int, reason: str) -> None:
        """The actor closed the connection (it sleeps or is destroyed)."""
        self.closed = (code, reason)
        self._emit("close", CloseEvent(code, reason))

    # -- the end ------------------------------------------------------------------------

    async def dispose(self) -> None:
        """Disconnect (runs ``on_disconnect``); idempotent."""
        if self._disposed:
            return
        self._disposed = True
        if not self._opening.done():
            self._opening.cancel()
        await asyncio.gather(self._opening, return_exceptions=True)
        if self.conn is not None:
            await self.conn.close()
        self.conn = None
        current = asyncio.current_task()
        pending = [task for task in self._tasks if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def __aenter__(self) -> LocalConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.dispose()


async def _guard(awaitable: Any, callback: Callable[..., Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("A connection callback %r raised", callback)

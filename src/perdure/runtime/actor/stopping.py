"""How a live actor stops (sleep or destroy), in rivetkit's order, within one budget.

The abort signal has fired (``StoppingActor.claim_stop``). Then, all within
``sleep_grace_period``:

1. the work in flight (actions, connects, schedule fires) finishes, and ``run`` returns
   (waited for at most ``run_stop_timeout``, then cancelled);
2. ``on_sleep`` (or ``on_destroy``) runs, with every connection and raw socket still
   open, so that it can tell them goodbye;
3. ``wait_until``/``keep_awake`` work finishes and ``c.set_prevent_sleep(False)`` is
   awaited (a message such work sends still reaches its connection);
4. connections and raw sockets are closed (``actor.sleeping``/``actor.destroyed``), and
   the raw handlers are given the rest of the budget to return;
5. work started by the disconnect hooks finishes; then the final flush (or the delete).

A raw socket (``on_websocket``) holds the actor awake while open but is not work a stop
waits for: it stays open for ``on_sleep`` and is closed at step 4 (rivetkit's order; a
socket the stop waited for would hold every stop for the whole grace period).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

from perdure.runtime.actor.hooks import call_hook

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.options import ActorOptions
    from perdure.runtime.actor.connections import Connection
    from perdure.runtime.actor.contexts import ActorContext
    from perdure.runtime.kernel.activity import ActivityTracker
    from perdure.runtime.kernel.core import StopReason
    from perdure.runtime.kernel.tasks import TaskOwner
    from perdure.store.base import Store

__all__ = ["ClosableSocket", "RawSockets", "StoppingActor", "run_stop_sequence"]


class _Host(Protocol):
    """The runtime, as a stop reaches it: the store a destroy deletes from."""

    @property
    def store(self) -> Store: ...


class StoppingActor(Protocol):
    """What the stop sequence reaches of the instance it stops (ActorInstance)."""

    actor_id: str
    definition: ActorDefinition
    options: ActorOptions
    activity: ActivityTracker
    context: ActorContext
    conns: dict[str, Connection]
    stop_reason: StopReason | None
    raw_sockets: RawSockets | None

    @property
    def host(self) -> _Host: ...

    @property
    def run_task(self) -> asyncio.Task[None] | None: ...

    @property
    def tasks(self) -> TaskOwner: ...

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]: ...

    def request_flush(self) -> asyncio.Future[None]: ...

    async def disconnect(self, conn: Connection) -> Any: ...


class ClosableSocket(Protocol):
    """A raw socket as a stop closes it (the server's WebSocket)."""

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        """Send a close frame."""


class RawSockets:
    """The raw sockets open on one actor, and the handlers serving them (made at the
    first socket: most actors never have one)."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        # socket -> the future that is done when its handler has returned
        self._open: dict[ClosableSocket, asyncio.Future[None]] = {}

    def opened(self, socket: ClosableSocket) -> None:
        """A handler started serving ``socket``."""
        self._open[socket] = asyncio.get_running_loop().create_future()

    def closed(self, socket: ClosableSocket) -> None:
        """The handler serving ``socket`` returned."""
        done = self._open.pop(socket, None)
        if done is not None and not done.done():
            done.set_result(None)

    async def close_all(self, reason: str, deadline: float) -> None:
        """Close every socket, then wait (until ``deadline``, loop time) for the
        handlers to return."""
        handlers = list(self._open.values())
        for socket in list(self._open):
            # The client may be gone already (nothing to close): the server says so
            # with an error of its own library (OSError, RuntimeError, a disconnect).
            with contextlib.suppress(Exception):
                await socket.close(1000, reason)
        if handlers:
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.wait(handlers, timeout=remaining)


async def run_stop_sequence(instance: StoppingActor) -> None:
    """Wind down, run the stop hook, close connections, then flush (or delete)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + instance.options.sleep_grace_period
    try:
        await _wind_down(instance, deadline)
        # Read at each step: a sleep under way becomes a destroy if one is asked for.
        await _run_stop_hook(instance, deadline, instance.stop_reason == "destroy")
        await instance.activity.wait_tracked(deadline)
        await _close_connections(instance, deadline, instance.stop_reason == "destroy")
        await instance.activity.wait_tracked(deadline)
        await instance.tasks.close(timeout=max(0.0, deadline - loop.time()))
        if instance.stop_reason == "destroy":
            # No final flush: the data goes anyway, and a state that cannot be
            # encoded must not keep a destroyed actor in the store.
            await instance.host.store.delete_actor(instance.actor_id)
        else:
            await instance.request_flush()
    except Exception:
        instance.log.exception("stopping the actor failed")


async def _wind_down(instance: StoppingActor, deadline: float) -> None:
    """Let in-flight work finish and ``run`` return, within the grace period (``run``
    within ``run_stop_timeout`` too)."""
    loop = asyncio.get_running_loop()
    await instance.activity.wait_idle(deadline)
    task = instance.run_task
    if task is not None and not task.done():
        run_deadline = min(deadline, loop.time() + instance.options.run_stop_timeout)
        await asyncio.wait([task], timeout=max(0.0, run_deadline - loop.time()))
        if not task.done():
            instance.log.warning(
                "run did not return within run_stop_timeout after the abort signal; "
                "cancelling it (check c.aborted or c.abort_signal in its loop)"
            )
            task.cancel()
            await asyncio.wait([task])


async def _run_stop_hook(instance: StoppingActor, deadline: float, destroying: bool) -> None:
    hook_name = "on_destroy" if destroying else "on_sleep"
    hook = instance.definition.hooks.get(hook_name)
    if hook is None:
        return
    options = instance.options
    limit = options.on_destroy_timeout if destroying else options.on_sleep_timeout
    remaining = max(0.001, deadline - asyncio.get_running_loop().time())
    timeout = min(limit, remaining) if limit else remaining
    try:
        await call_hook(hook, instance.context, timeout=timeout)
    except Exception:
        instance.log.exception("%s failed", hook_name)


async def _close_connections(instance: StoppingActor, deadline: float, destroying: bool) -> None:
    reason = f"actor.{'destroyed' if destroying else 'sleeping'}"
    for conn in list(instance.conns.values()):
        conn.transport.close(1000, reason)
        await instance.disconnect(conn)
    sockets = instance.raw_sockets
    if sockets is not None:
        await sockets.close_all(reason, deadline)

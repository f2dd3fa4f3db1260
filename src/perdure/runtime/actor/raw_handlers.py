"""The runtime side of a raw request or socket (``on_request``/``on_websocket``,
docs/edge.md "Raw handlers"): reached through :meth:`perdure.runtime.dispatch.refs.ActorRef.raw`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perdure.errors import InternalError, NoRawHandler, PerdureError
from perdure.runtime.actor.contexts import ActionContext
from perdure.runtime.actor.hooks import call_hook
from perdure.runtime.actor.stopping import ClosableSocket, RawSockets

if TYPE_CHECKING:
    from perdure.runtime.actor.connections import Transport
    from perdure.runtime.actor.instance import ActorInstance

__all__ = ["NoRawHandler", "serve_raw"]


async def serve_raw(
    instance: ActorInstance,
    hook: str,
    argument: Any,
    connection: tuple[Any, Transport] | None,
    ends_normally: tuple[type[BaseException], ...] = (),
) -> Any:
    """Call the actor's ``hook`` with its context and ``argument`` (the request or the
    socket) and return what it returns, in a transient connection opened with
    ``connection`` (params, transport) if given, like an action: the actor stays awake
    while it runs, and its state changes are durable before this returns. A socket is
    not work a stop waits for: it stays open for ``on_sleep``, then the stop closes it
    (:mod:`perdure.runtime.actor.stopping`).

    An exception of ``ends_normally`` (the client closing a socket) ends the hook as a
    return of ``None`` would. Any other failure that is not a :class:`PerdureError` is
    logged and becomes ``actor.internal_error``."""
    fn = instance.definition.hook(hook)
    if fn is None:
        raise NoRawHandler(instance.definition.name, hook)
    conn = None if connection is None else await instance.connect(*connection)
    socket = argument if hook == "on_websocket" else None
    _begin(instance, socket)
    try:
        try:
            try:
                result = await call_hook(fn, ActionContext(instance, conn), argument)
            except ends_normally:
                result = None
        finally:
            flushed = instance.request_flush()
        await flushed
        return result
    except PerdureError:
        raise
    except Exception as exc:
        instance.log.exception("%s failed", hook)
        raise InternalError() from exc
    finally:
        _end(instance, socket)
        if conn is not None:
            await instance.disconnect(conn)


def _begin(instance: ActorInstance, socket: ClosableSocket | None) -> None:
    """A request is work in flight (a stop waits for it); a socket is held open like a
    connection: it keeps the actor awake, and a stop closes it after ``on_sleep``."""
    if socket is None:
        instance.enter()
        return
    if instance.raw_sockets is None:
        instance.raw_sockets = RawSockets()
    instance.raw_sockets.opened(socket)
    instance.activity.socket_opened()


def _end(instance: ActorInstance, socket: ClosableSocket | None) -> None:
    if socket is None:
        instance.leave()
        return
    assert instance.raw_sockets is not None  # made by _begin
    instance.raw_sockets.closed(socket)
    instance.activity.socket_closed()

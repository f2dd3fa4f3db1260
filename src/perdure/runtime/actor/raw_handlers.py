"""The runtime side of a raw request or socket (``on_request``/``on_websocket``,
docs/edge.md "Raw handlers"): reached through :meth:`perdure.runtime.dispatch.refs.ActorRef.raw`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perdure.errors import InternalError, NoRawHandler, PerdureError
from perdure.runtime.actor.contexts import ActionContext
from perdure.runtime.actor.hooks import call_hook

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
    while it runs, and its state changes are durable before this returns.

    An exception of ``ends_normally`` (the client closing a socket) ends the hook as a
    return of ``None`` would. Any other failure that is not a :class:`PerdureError` is
    logged and becomes ``actor.internal_error``."""
    fn = instance.definition.hook(hook)
    if fn is None:
        raise NoRawHandler(instance.definition.name, hook)
    conn = None if connection is None else await instance.connect(*connection)
    instance.enter()
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
        instance.leave()
        if conn is not None:
            await instance.disconnect(conn)

"""The runtime side of a raw request or socket (``on_request``/``on_websocket``,
docs/edge.md "Raw handlers"): reached through :meth:`perdure.runtime.host.dispatch.ActorRef.raw`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from perdure.errors import InternalError, PerdureError
from perdure.runtime.actor.contexts import ActionContext

if TYPE_CHECKING:
    from perdure.runtime.actor.connections import Transport
    from perdure.runtime.actor.instance import ActorInstance

__all__ = ["NoRawHandler", "serve_raw"]

T = TypeVar("T")


class NoRawHandler(PerdureError):
    """The actor has no ``on_request``/``on_websocket`` hook: its raw routes do not exist."""

    default_code = "route_not_found"
    status = 404

    def __init__(self, name: str, hook: str) -> None:
        rivet = "onRequest" if hook == "on_request" else "onWebSocket"
        super().__init__(
            f"Actor `{name}` has no `{hook}` hook (rivetkit's `{rivet}`): it serves no raw route."
        )


async def serve_raw(
    instance: ActorInstance,
    hook: str,
    run: Callable[[Callable[..., Any], ActionContext], Awaitable[T]],
    connection: tuple[Any, Transport] | None,
) -> T:
    """``run(hook, c)`` on ``instance``, in a transient connection opened with
    ``connection`` (params, transport) if given, like an action: the actor stays awake
    while it runs, and its state changes are durable before this returns. A failure
    that is not a :class:`PerdureError` is logged and becomes ``actor.internal_error``."""
    fn = instance.definition.hook(hook)
    if fn is None:
        raise NoRawHandler(instance.definition.name, hook)
    conn = None if connection is None else await instance.connect(*connection)
    instance.enter()
    try:
        try:
            result = await run(fn, ActionContext(instance, conn))
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

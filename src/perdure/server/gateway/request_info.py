"""What a request tells the actor about itself: ``c.request`` (see
:class:`perdure.runtime.actor.connections.RequestInfo`)."""

from __future__ import annotations

from types import MappingProxyType

from perdure.runtime import RequestInfo, bind_request
from perdure.server.edge.asgi import Scope

__all__ = ["bind", "request_info"]


def bind(scope: Scope, actor_id: str) -> None:
    """Make ``scope`` the running task's request for actor ``actor_id`` (``c.request``)."""
    bind_request(actor_id, lambda: request_info(scope))


def request_info(scope: Scope) -> RequestInfo:
    """What ``c.request`` shows of the request in ``scope``."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = bytes(raw_name).decode("latin-1").lower()
        value = bytes(raw_value).decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    client = scope.get("client")
    return RequestInfo(
        headers=MappingProxyType(headers),
        origin=headers.get("origin"),
        client_host=None if client is None else str(client[0]),
        client_port=None if client is None else int(client[1]),
        method=scope.get("method", "GET"),
        path=scope["path"],
        transport="websocket" if scope["type"] == "websocket" else "http",
    )

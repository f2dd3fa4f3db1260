"""The client surface's door: the server token (:mod:`perdure.server.edge.client_access`)
and the CORS policy (:mod:`perdure.server.edge.cors`), checked before any route runs.
It is also where a request enters perdure: it records where perdure is mounted
(:mod:`perdure.server.edge.mount`) and refuses everything until the runtime has started."""

from __future__ import annotations

from collections.abc import Callable

from perdure.errors import NotStarted, PerdureError
from perdure.protocol.codec import Encoding, parse_encoding
from perdure.server.edge.asgi import ASGIApp, Message, Receive, Scope, Send, header_value
from perdure.server.edge.body_types import check_body_type, decodes_body
from perdure.server.edge.client_access import ClientAccess
from perdure.server.edge.cors import CorsPolicy
from perdure.server.edge.mount import enter, route_path
from perdure.server.edge.refusals import EdgeRefusals
from perdure.server.edge.wire_errors import send_error
from perdure.server.gateway.websocket import refuse_socket

__all__ = ["EdgeGuard"]


class EdgeGuard:
    """ASGI middleware in front of the whole app: answers CORS preflights, refuses
    requests without the token or from a page of an origin the policy does not allow,
    and bodies of a type perdure does not decode (:mod:`perdure.server.edge.body_types`),
    in perdure's error shape, and adds the CORS headers to allowed cross-origin answers.
    The admin surface and the probes have their own access rules (:data:`OPEN_PATHS`).

    Every rule reads the path below perdure's mount, so that it holds wherever a host app
    mounts perdure. Before ``started()`` is true (a host app that did not run perdure's
    lifespan) every request is refused with 503 ``server.not_started``."""

    def __init__(
        self,
        app: ASGIApp,
        access: ClientAccess,
        cors: CorsPolicy,
        refusals: EdgeRefusals,
        started: Callable[[], bool] = lambda: True,
    ) -> None:
        self.app = app
        self.access = access
        self.cors = cors
        self.refusals = refusals
        self.started = started
        self._started = False  # once started, always: only the first requests ask

    def _check_started(self) -> None:
        if not self.started():
            raise NotStarted()
        self._started = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if scope.get("root_path"):  # mounted in a host app (or behind --root-path)
            enter(scope)
            path = route_path(scope)
        try:
            if not self._started:
                self._check_started()
            origin = self.cors.check(scope) if _client_path(path) else None
            if kind == "http" and origin is not None:
                if CorsPolicy.is_preflight(scope):  # carries no token: browsers send none
                    await _preflight(send, origin)
                    return
                # Errors too: the page can then read why it was refused.
                send = _with_headers(send, CorsPolicy.response_headers(origin))
            if self.access.guards(path):
                self.access.check(scope)
            if kind == "http" and decodes_body(path):
                check_body_type(scope)
        except PerdureError as error:
            await self._refuse(scope, receive, send, error)
            return
        await self.app(scope, receive, send)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, error: PerdureError
    ) -> None:
        self.refusals.count(error.identifier)
        if scope["type"] == "websocket":
            code = 1011 if error.status >= 500 else 1008  # a server fault, or policy
            await refuse_socket(receive, send, scope, error, code=code)
        else:
            await send_error(send, error, _encoding_or_json(scope))


async def _preflight(send: Send, origin: str) -> None:
    headers = [*CorsPolicy.preflight_headers(origin), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return sending


def _client_path(path: str) -> bool:
    """The routes a browser page may call across origins (the client surface)."""
    return path.startswith(("/gateway/", "/actors")) or path in (
        "/metadata",
        "/connect",
        "/health",
        "/ready",
    )


def _encoding_or_json(scope: Scope) -> Encoding:
    try:
        return parse_encoding(header_value(scope, b"x-rivet-encoding"))
    except PerdureError:
        return "json"

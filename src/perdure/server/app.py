"""The ASGI application: ``create_app(runtime)`` wires routes to a runtime.

Routes:

- ``/gateway/{name-or-id}/action/{action}``, ``/queue/{queue}``, ``/connect`` — the actor
  gateway (:mod:`perdure.server.gateway.routes`, :mod:`perdure.server.gateway.websocket`);
- ``/connect`` (WebSocket) with the actor id in the ``rivet_actor.<id>`` subprotocol — how
  the official client connects to an actor by id when it skips the gateway's ready wait;
- ``/actors…`` — the management API (:mod:`perdure.server.gateway.management`);
- ``GET /metadata`` — what the official client reads before its first call. It looks
  only for ``clientEndpoint`` (absent here, so it keeps the endpoint it was given) and
  logs ``runtime`` and ``version``;
- ``GET /health`` — ``{"status": "ok", …}`` once the runtime is started: the process is
  alive (a liveness probe);
- ``GET /ready`` — ``{"status": "ready", …}`` while the store answers (a cheap query,
  cached for a second); otherwise 503 with the error body (``store.unavailable``) and
  ``Retry-After``: a readiness probe;
- ``/admin/…`` — the admin API (:mod:`perdure.server.admin.routes`), for operators;
- ``/ui/…`` — the inspector web UI on the admin API (:mod:`perdure.server.admin.ui`);
- ``GET /metrics`` — Prometheus metrics, for the admin surface's clients
  (:mod:`perdure.server.admin.metrics`; off with ``metrics=False``);
- ``POST /.perdure/forward`` — on a cluster node only: operations other nodes forward to
  the owner of an actor (:mod:`perdure.server.cluster.peers`). ``/metadata`` and ``/health`` then
  name the answering node (``"node": {"id", "address"}``).

The app's lifespan starts the runtime (opening the store) and stops it on shutdown: every
live actor goes to sleep (``on_sleep`` runs, state is flushed) before the store closes.

The app can also be mounted in a host ASGI app, at any prefix: :class:`PerdureApp` is
both the app to mount and, as ``perdure_app.lifespan``, the lifespan to give the host
(a host app does not run the lifespans of the apps it mounts). docs/embedding.md.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from perdure._version import __version__
from perdure.errors import MethodNotAllowed, PerdureError, RouteNotFound
from perdure.runtime import ActorRuntime, LocalClient
from perdure.server.admin.metrics import metrics_route
from perdure.server.admin.routes import admin_routes
from perdure.server.admin.ui import ui_routes
from perdure.server.cluster.peers import FORWARD_PATH, ForwardEndpoint, HttpPeers
from perdure.server.edge.admin_access import AdminAccess
from perdure.server.edge.client_access import ClientAccess
from perdure.server.edge.client_caps import ClientCaps, ClientLimits
from perdure.server.edge.cors import CorsPolicy
from perdure.server.edge.door import EdgeGuard
from perdure.server.edge.refusals import EdgeRefusals
from perdure.server.edge.wire_errors import error_body, header_text
from perdure.server.gateway.management import json_response, management_routes
from perdure.server.gateway.routes import Gateway
from perdure.server.gateway.websocket import DirectConnect

if TYPE_CHECKING:
    from perdure.server.edge.http_limits import EdgeHttpProtocol
    from perdure.server.edge.slow_clients import SlowClientLimits

__all__ = ["PerdureApp", "create_app"]

_log = logging.getLogger("perdure.server")


def create_app(
    runtime: ActorRuntime,
    *,
    admin: AdminAccess | None = None,
    metrics: bool = True,
    token: str | None = None,
    cors_origins: Iterable[str] = (),
    refusals: EdgeRefusals | None = None,
    caps: ClientCaps | None = None,
) -> PerdureApp:
    """A Starlette app serving ``runtime``'s actors; its lifespan starts and stops it
    (:class:`PerdureApp`: to mount in a host app too).

    ``admin`` says who may use the admin API, the inspector UI and ``/metrics``
    (default: loopback clients only, or, with a ``token`` and no admin token, whoever
    presents ``token``; see :mod:`perdure.server.edge.admin_access`).
    ``metrics``: serve ``GET /metrics`` (:mod:`perdure.server.admin.metrics`), watching
    ``runtime`` to do so.
    ``token``: the server token every client request must carry
    (:mod:`perdure.server.edge.client_access`); ``cors_origins``: the origins whose browser
    pages may call the server (:mod:`perdure.server.edge.cors`; ``*`` for any).
    ``refusals``: where the edge counts what it refuses (``/metrics`` shows it); the
    server's HTTP protocol shares it (``perdure serve`` passes one to both).
    ``caps``: what one client address may hold open and how fast it may create actors
    (:mod:`perdure.server.edge.client_caps`; default ``ClientCaps()``).
    """
    refusals = refusals if refusals is not None else EdgeRefusals()
    admin = admin or AdminAccess()
    if admin.token is None and token is not None:
        # A server that wants a token from its clients is not to be opened from loopback
        # alone: behind a proxy on the same host every request looks local. With no admin
        # token of its own, its admin surface wants the server's token (docs/edge.md).
        admin = dataclasses.replace(admin, token=token)
    actor_names: dict[str, Any] = {name: {"metadata": {}} for name in runtime.registry.actors}

    cluster = runtime.cluster
    node: dict[str, Any] = {} if cluster is None else {"node": cluster.describe()}
    if cluster is not None:
        # The runtime forwards to its peers through this (the HTTP side is the server's).
        # Its requests carry the cluster's secret, which the node agrees on as it starts.
        cluster.peers = HttpPeers(cluster, observer=runtime.observers)

    async def metadata(request: Request) -> Response:
        body = {"runtime": "perdure", "version": __version__, "actorNames": actor_names, **node}
        return json_response(body)

    async def health(request: Request) -> Response:
        body = {"status": "ok", "runtime": "perdure", "version": __version__, **node}
        return json_response(body)

    async def ready(request: Request) -> Response:
        error = await runtime.readiness.check()
        if error is None:
            body = {"status": "ready", "runtime": "perdure", "version": __version__, **node}
            return json_response(body)
        response = Response(error_body(error, "json", None), 503, media_type="application/json")
        response.headers["x-rivet-error"] = header_text(error.identifier).decode()
        response.headers["retry-after"] = str(getattr(error, "retry_after", 1))
        return response

    limits = ClientLimits(caps, refusals, cluster=cluster)
    gateway = Gateway(runtime, limits)
    routes = [
        # First: the router tries routes in order, and gateway calls are the hot path.
        Mount("/gateway", app=gateway),
        WebSocketRoute("/connect", DirectConnect(gateway.connect_handler)),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metadata", metadata, methods=["GET"]),
        *management_routes(runtime, limits),
        *admin_routes(runtime, admin),
        *ui_routes(runtime, admin),
    ]
    if metrics:
        routes.append(metrics_route(runtime, admin, refusals))
    if cluster is not None:
        routes.append(Route(FORWARD_PATH, ForwardEndpoint(runtime, cluster)))
    access = ClientAccess(token, admin.token, cluster)
    guard = Middleware(
        EdgeGuard,
        access=access,
        cors=CorsPolicy.of(cors_origins),
        refusals=refusals,
        started=lambda: runtime.started,
    )
    return PerdureApp(runtime, gateway, routes, guard, refusals)


class PerdureApp(Starlette):
    """What :func:`create_app` returns: perdure's ASGI app, served alone (``perdure
    serve``) or mounted in a host app at any prefix, one process and one port::

        perdure_app = create_app(ActorRuntime(registry, SQLiteStore("data.db")))
        app = FastAPI(lifespan=perdure_app.lifespan)
        app.mount("/perdure", perdure_app)

    A host app does not run the lifespan of an app it mounts, so it is given perdure's:
    :meth:`lifespan` starts the runtime on startup and stops it on shutdown. Until it
    has started, every perdure route answers 503 ``server.not_started``. The host's own
    routes reach the same actors through :meth:`client` (no network hop).
    """

    def __init__(
        self,
        runtime: ActorRuntime,
        gateway: Gateway,
        routes: list[BaseRoute],
        guard: Middleware,
        refusals: EdgeRefusals,
    ) -> None:
        self.runtime = runtime
        self.refusals = refusals
        self._gateway = gateway
        super().__init__(
            routes=routes,
            middleware=[guard],
            lifespan=self.lifespan,
            exception_handlers={HTTPException: _http_exception},
        )

    def client(self) -> LocalClient:
        """The runtime's in-process client: the host app's routes call the actors with it
        (``await perdure_app.client().counter.get_or_create("a").increment(1)``)."""
        return self.runtime.client()

    def end_streams(self) -> None:
        """End the open event streams (SSE) now: call it when the server starts to stop.
        A stream never ends by itself, so without this the server's graceful shutdown
        waits its whole timeout for them; their readers reconnect and resume from the
        log. ``perdure serve`` calls it on SIGTERM/SIGINT; a host that serves perdure
        mounted calls it from its own shutdown signal, if it has one."""
        self._gateway.end_streams()

    def http_protocol(self, limits: SlowClientLimits | None = None) -> type[EdgeHttpProtocol]:
        """``perdure serve``'s HTTP protocol, for a host that runs uvicorn itself
        (``uvicorn.run(app, http=perdure_app.http_protocol())``): bounded request lines
        and headers and the slow-client time limits (``limits``; default
        ``SlowClientLimits()``), refused in perdure's error shape and counted in this
        app's ``/metrics`` (docs/edge.md). It serves the host's routes too: the limits
        are the connection's, not a route's."""
        # Imported here: it loads uvicorn's httptools protocol, which an app that is
        # only mounted, or served by another server, does not need.
        from perdure.server.edge.http_limits import EdgeHttpProtocol
        from perdure.server.edge.slow_clients import SlowClientLimits

        return EdgeHttpProtocol.bound(limits or SlowClientLimits(), self.refusals)

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Start the runtime (opening the store), serve, then stop it: every live actor
        goes to sleep (``on_sleep`` runs, state is flushed) before the store closes.

        Give it to the host app (``FastAPI(lifespan=perdure_app.lifespan)``,
        ``Starlette(lifespan=...)``), or enter it inside a lifespan of your own
        (``async with perdure_app.lifespan(app): yield``). ``app`` (the host app) is
        not used: the parameter makes this a lifespan function.
        """
        runtime = self.runtime
        names = runtime.registry.actors
        await runtime.start()
        _log.info("runtime started: %d actor type(s): %s", len(names), ", ".join(names))
        try:
            yield
        finally:
            _log.info("stopping: putting %d live actor(s) to sleep", runtime.live_count)
            await runtime.stop()
            await self._gateway.aclose()
            _log.info("runtime stopped; store closed")


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Unknown routes and methods answer with the usual error body, not plain text."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    # Another ASGI server may hand over a path with lone surrogates (undecodable bytes):
    # the message must still encode, and stay short.
    path = str(request.scope.get("path", "")).encode("utf-8", "replace").decode()[:512]
    error: PerdureError
    if status == 405:
        error = MethodNotAllowed(request.method, path)
    elif status == 404:
        error = RouteNotFound(f"No route `{path}`.")
    else:
        error = PerdureError(str(getattr(exc, "detail", "")) or "Bad request.", code="http_error")
    response = Response(error_body(error, "json", None), status, media_type="application/json")
    response.headers["x-rivet-error"] = header_text(error.identifier).decode()
    return response

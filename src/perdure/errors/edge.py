"""Errors of the server's edge: requests refused before they reach an actor (no route,
a wrong method, a malformed request, an origin or a caller the server does not admit).
The server raises them; they live here so that the whole tree can be read in one
package."""

from __future__ import annotations

from typing import Any, ClassVar

from perdure.errors.base import PerdureError

__all__ = [
    "AdminDenied",
    "ClientCapReached",
    "GatewayQueryRefused",
    "MethodNotAllowed",
    "NotLocal",
    "NotStarted",
    "OriginNotAllowed",
    "RequestRefused",
    "RouteNotFound",
]


class AdminDenied(PerdureError):
    """The admin surface refused a request (``admin.unauthorized`` or ``admin.forbidden``)."""

    group = "admin"
    default_code = "forbidden"
    status = 403

    def __init__(self, message: str) -> None:
        super().__init__(message)


class RequestRefused(PerdureError):
    """A request the HTTP layer refuses before any route sees it."""

    group: ClassVar[str] = "request"
    default_code: ClassVar[str] = "malformed"
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, code: str, status: int, metadata: Any = None) -> None:
        super().__init__(message, code=code, metadata=metadata)
        self.status = status  # type: ignore[misc]  # one class, three statuses


class ClientCapReached(RequestRefused):
    """One client address is past one of its caps (docs/edge.md, "Per-client caps"): 429
    ``request.too_many_streams``, ``request.too_many_connections`` or
    ``request.creation_rate_limited``. ``retry_after`` (seconds) is what a server sends
    as ``Retry-After``."""

    def __init__(self, message: str, *, code: str, metadata: Any, retry_after: int) -> None:
        super().__init__(message, code=code, status=429, metadata=metadata)
        self.retry_after = retry_after


class GatewayQueryRefused(PerdureError):
    """The gateway's ``rvt-*`` query parameters name one it does not know, or one twice
    (400 ``guard.query_invalid_params`` / ``guard.query_duplicate_param``): the Rivet
    engine's gateway errors, text for text, so that a misspelt parameter is not silently
    ignored (``rvt-skip-ready-wiat`` would otherwise just wait)."""

    group = "guard"
    default_code = "query_invalid_params"
    status = 400


class RouteNotFound(PerdureError):
    """No route answers this path."""

    default_code = "route_not_found"
    status = 404


class MethodNotAllowed(PerdureError):
    """The route exists but not for this HTTP method."""

    default_code = "method_not_allowed"
    status = 405

    # rivetkit 2.3.19's text and metadata (rivetkit-core's MethodNotAllowed), byte for byte.
    def __init__(self, method: str, path: str) -> None:
        super().__init__("Method not allowed", metadata={"method": method, "path": path})


class OriginNotAllowed(PerdureError):
    """A browser page of an origin the CORS policy does not allow (403)."""

    group = "cors"
    default_code = "origin_not_allowed"
    status = 403


class NotLocal(PerdureError):
    """A stream the node cannot serve: the actor lives on another node (503)."""

    default_code = "not_local"
    status = 503


class NotStarted(PerdureError):
    """A request reached perdure's app before its runtime was started: the host app that
    mounts it did not run its lifespan (503 ``server.not_started``; docs/embedding.md)."""

    group = "server"
    default_code = "not_started"
    status = 503

    def __init__(self) -> None:
        super().__init__(
            "perdure's runtime has not been started: give the host app perdure's lifespan "
            "(FastAPI(lifespan=perdure_app.lifespan), or enter `perdure_app.lifespan()` in "
            "your own), or start the runtime yourself (docs/embedding.md)."
        )

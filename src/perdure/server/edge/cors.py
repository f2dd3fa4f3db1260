"""Cross-origin requests from browser pages (CORS) to the client surface.

Default: no policy — only pages of the server's own origin may call it. A request that
a browser marks as another site's (an ``Origin`` that is not the server's own, ``Origin:
null`` from a sandboxed frame or a ``data:``/``file:`` page, or ``Sec-Fetch-Site:
cross-site``) is refused with 403 ``cors.origin_not_allowed`` before anything runs, and
a WebSocket's upgrade likewise: a page a user visits cannot drive the server through the
user's browser, even with requests a browser sends without asking (a ``text/plain``
POST, a socket). Clients that send no ``Origin`` (the official Node client, the Python
clients, curl) are not browsers' pages and pass. With origins (``perdure serve
--cors-origin https://app.example`` repeated, or ``create_app(cors_origins=[...])``;
``*`` allows every origin but ``null``):

- a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) from an
  allowed origin answers 204 with the allowed methods and headers (those the official
  client sends: see :data:`ALLOWED_HEADERS`), cached by the browser for 10 minutes;
- an answer to an allowed origin carries ``Access-Control-Allow-Origin`` and exposes the
  ``x-rivet-*`` headers;
- a request or WebSocket whose ``Origin`` is neither allowed nor the server's own is
  refused with 403 ``cors.origin_not_allowed``, so a page of another site cannot even
  cause an action (a browser sends some requests without a preflight, and WebSockets
  are not covered by CORS at all).

Answers allow credentials (``Access-Control-Allow-Credentials: true``), because the
official client's ``fetch`` sends ``credentials: "include"`` and a browser otherwise
drops the answer; the client surface reads no cookies (the token travels in a header or
the URL), so this gives a page nothing more. The allowed origin is echoed, never ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from perdure.errors import OriginNotAllowed
from perdure.server.edge.asgi import Headers, Scope, header_value

__all__ = ["ALLOWED_HEADERS", "CorsPolicy", "OriginNotAllowed"]

ALLOWED_HEADERS = (
    "content-type",
    "authorization",
    "x-rivet-encoding",
    "x-rivet-conn-params",
    "x-rivet-token",
    "x-rivet-actor",
    "x-rivet-target",
    "x-rivet-skip-ready-wait",
    "x-rivet-ray-id",
    "idempotency-key",  # docs/idempotency.md
    "traceparent",
    "tracestate",
    "user-agent",  # the official client sets it; browsers that let it through preflight it
)
_ALLOWED_METHODS = b"GET, POST, PUT, DELETE, OPTIONS"
_EXPOSED_HEADERS = b"x-rivet-error, x-rivet-actor, x-rivet-actor-name, x-rivet-actor-key"
_MAX_AGE = b"600"


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """The origins whose pages may call the client surface (see the module docstring)."""

    origins: frozenset[str] = frozenset()

    @classmethod
    def of(cls, origins: Iterable[str]) -> CorsPolicy:
        """A policy for ``origins`` (``scheme://host[:port]``, or ``*``)."""
        return cls(frozenset(origin.rstrip("/") for origin in origins))

    @property
    def enabled(self) -> bool:
        """True when a policy is set (otherwise the server adds no CORS headers)."""
        return bool(self.origins)

    def allows(self, origin: str) -> bool:
        """True when pages of ``origin`` may call the server."""
        return "*" in self.origins or origin in self.origins

    def check(self, scope: Scope) -> str | None:
        """The request's allowed cross origin (``None``: not a cross-site page's, or the
        server's own); ``cors.origin_not_allowed`` for a page of any other origin."""
        origin = header_value(scope, b"origin")
        if origin is None:
            # A browser marks another site's request even where it sends no Origin.
            if header_value(scope, b"sec-fetch-site") == "cross-site":
                raise OriginNotAllowed(
                    "Pages of other sites may not call this server (its CORS policy: "
                    "perdure serve --cors-origin)."
                )
            return None
        if origin != "null" and _same_origin(scope, origin):
            return None
        if origin == "null" or not self.allows(origin):
            raise OriginNotAllowed(
                f"Pages of `{origin[:200]}` may not call this server (its CORS policy: "
                "perdure serve --cors-origin)."
            )
        return origin

    @staticmethod
    def is_preflight(scope: Scope) -> bool:
        """True for a browser's CORS preflight request."""
        return (
            scope["method"] == "OPTIONS"
            and header_value(scope, b"origin") is not None
            and header_value(scope, b"access-control-request-method") is not None
        )

    @staticmethod
    def preflight_headers(origin: str) -> Headers:
        """The headers of a preflight answer for an allowed ``origin``."""
        return [
            *_origin_headers(origin),
            (b"access-control-allow-methods", _ALLOWED_METHODS),
            (b"access-control-allow-headers", ", ".join(ALLOWED_HEADERS).encode()),
            (b"access-control-max-age", _MAX_AGE),
        ]

    @staticmethod
    def response_headers(origin: str) -> Headers:
        """The headers added to an answer for an allowed ``origin``."""
        return [*_origin_headers(origin), (b"access-control-expose-headers", _EXPOSED_HEADERS)]


def _origin_headers(origin: str) -> Headers:
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-credentials", b"true"),
        (b"vary", b"Origin"),
    ]


def _same_origin(scope: Scope, origin: str) -> bool:
    host = header_value(scope, b"host")
    return host is not None and origin.partition("://")[2].rstrip("/") == host

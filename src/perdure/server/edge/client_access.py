"""Who may use the client surface: the gateway (HTTP and WebSocket), ``/actors…``,
``/metadata`` and ``/connect``.

Without a server token (the default) these routes are open, as before. With one
(``perdure serve --token``, ``PERDURE_TOKEN``, ``create_app(token=...)``) every request
to them must present it, in any of the forms the official RivetKit client uses:

- the ``x-rivet-token`` header (gateway requests);
- ``Authorization: Bearer TOKEN`` (``/actors`` and ``/metadata``);
- ``/gateway/{actorId}@TOKEN/…`` (an actor addressed by id) or the ``rvt-token`` query
  parameter (an actor addressed by name and key);
- the ``rivet_token.TOKEN`` WebSocket subprotocol.

A request without a token is refused with 401 ``auth.unauthorized``, one with another
token with 403 ``auth.forbidden`` (a WebSocket gets the error frame, then close 1008).
Tokens are compared in constant time. The admin token (:mod:`perdure.server.edge.admin_access`) is
accepted here too: an operator may do what a client may. The server token is not
accepted on the admin surface. ``/health`` and ``/ready`` stay open for probes (they
reveal only that the server is alive and whether its store answers); the admin surface
and a cluster's internal routes have their own rules.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import parse_qsl

from perdure.errors import AccessForbidden, AccessUnauthorized
from perdure.runtime import ClusterMember
from perdure.server.cluster.pipe import presents_secret
from perdure.server.edge.asgi import Scope, header_value
from perdure.server.edge.mount import route_path

__all__ = ["OPEN_PATHS", "ClientAccess", "presented_token", "server_token"]

# Probes, and the surfaces with their own access rules (admin token, cluster secret).
OPEN_PATHS = ("/health", "/ready", "/admin", "/ui", "/metrics", "/.perdure/")
_TOKEN_PROTOCOL = "rivet_token."


@dataclass(frozen=True, slots=True)
class ClientAccess:
    """The client surface's access rule (see the module docstring). ``cluster``: on a
    cluster node, what another node hands on with the cluster's secret needs no token."""

    token: str | None = None
    admin_token: str | None = None
    cluster: ClusterMember | None = None

    def __post_init__(self) -> None:
        if self.token is not None:
            server_token(self.token)  # a ValueError names the rule

    @property
    def enabled(self) -> bool:
        """True when requests must carry a token."""
        return self.token is not None

    def guards(self, path: str) -> bool:
        """True when a request for ``path`` must carry the token."""
        if self.token is None:
            return False
        return not any(
            path == open_path or path.startswith(open_path.rstrip("/") + "/")
            for open_path in OPEN_PATHS
        )

    def check(self, scope: Scope) -> None:
        """Raise ``auth.unauthorized``/``auth.forbidden`` unless ``scope`` may proceed."""
        if self.token is None or self._from_peer_node(scope):
            return
        presented = presented_token(scope)
        if presented is None:
            raise AccessUnauthorized(
                "This server needs its token: createClient({ token }) or "
                "Client(endpoint, token=...) (the x-rivet-token header, "
                "`Authorization: Bearer TOKEN`, or the rivet_token.TOKEN subprotocol)."
            )
        if not _matches(presented, self.token) and not (
            self.admin_token is not None and _matches(presented, self.admin_token)
        ):
            raise AccessForbidden("The token is not valid for this server.")

    def _from_peer_node(self, scope: Scope) -> bool:
        """A connection another node of the cluster pipes here, with the cluster secret
        (the client presented its token to that node)."""
        return self.cluster is not None and presents_secret(scope, self.cluster.secret)


def presented_token(scope: Scope) -> str | None:
    """The token a request carries, in the first form found (see the module docstring)."""
    token = header_value(scope, b"x-rivet-token")
    if token:
        return token
    scheme, _, value = (header_value(scope, b"authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    for protocol in scope.get("subprotocols") or ():
        if protocol.startswith(_TOKEN_PROTOCOL) and len(protocol) > len(_TOKEN_PROTOCOL):
            return str(protocol[len(_TOKEN_PROTOCOL) :])
    return _token_in_url(scope)


def _token_in_url(scope: Scope) -> str | None:
    path = route_path(scope)
    if path.startswith("/gateway/"):
        segment = path.split("/", 3)[2]
        if "@" in segment:
            return segment.partition("@")[2] or None
    query: bytes = scope.get("query_string") or b""
    if b"rvt-token=" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if name == "rvt-token" and value:
                return value
    return None


def _matches(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode(), expected.encode())


_TOKEN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def server_token(text: str) -> str:
    """``text`` as a server token, or ``ValueError``: at least 16 characters, all safe in
    a URL path, a header and a WebSocket subprotocol (letters, digits and ``-._~``: what
    ``secrets.token_urlsafe`` makes)."""
    if len(text) < 16 or not set(text) <= _TOKEN_CHARACTERS:
        raise ValueError(
            "a server token is at least 16 characters of letters, digits and -._~ "
            "(for one: python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    return text

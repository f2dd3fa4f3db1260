"""Who may use the admin surface: the admin API (``/admin/…``), the inspector UI
(``/ui/…``) and ``/metrics``.

Without a token the admin surface answers only requests from a loopback address
(127.0.0.0/8, ::1): the operator on the server's own machine. With a token
(``perdure serve --admin-token`` or ``PERDURE_ADMIN_TOKEN``; on a server with a client
``--token`` and no admin token, that token) it answers any address that presents it,
loopback included — behind a reverse proxy on the same host every request comes from
loopback, so a token must not be bypassed there. The token goes in
``Authorization: Bearer TOKEN`` (the CLI, Prometheus' ``bearer_token``) or in the
``perdure_admin`` cookie that the inspector's sign-in page sets (browsers cannot put a
header on an ``EventSource``). ``--no-admin`` turns the whole surface off.

A request that came through a proxy (it carries ``X-Forwarded-For``, ``Forwarded`` or
``X-Real-IP``) is not the operator on this machine, though its peer is loopback: a proxy
on the same host makes every request look local. Only with ``perdure serve
--proxy-headers`` (``trust_forwarded``) does such a request count as local, when the
proxy's own client was loopback too (the last ``X-Forwarded-For`` hop).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from perdure.errors import AdminDenied

__all__ = [
    "ADMIN_COOKIE",
    "AdminAccess",
    "AdminDisabled",
    "AdminUnauthorized",
    "admin_token",
]

ADMIN_COOKIE = "perdure_admin"


class AdminDisabled(AdminDenied):
    """The server runs with the admin surface turned off (403 ``admin.disabled``)."""

    default_code = "disabled"

    def __init__(self) -> None:
        super().__init__("The admin surface is turned off on this server (--no-admin).")


class AdminUnauthorized(AdminDenied):
    """The request carries no valid admin token (401 ``admin.unauthorized``)."""

    default_code = "unauthorized"
    status = 401


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """The admin surface's access rule (see the module docstring)."""

    enabled: bool = True
    token: str | None = None
    trust_forwarded: bool = False

    def check(self, connection: HTTPConnection) -> None:
        """Raise :class:`AdminDenied` unless ``connection`` may use the admin surface."""
        if not self.enabled:
            raise AdminDisabled()
        _check_same_origin(connection)
        if self.token is None:
            if self._is_local(connection):
                return
            raise AdminDenied(
                "The admin surface answers only on loopback unless the server has an admin "
                "token (perdure serve --admin-token, or PERDURE_ADMIN_TOKEN)."
            )
        presented = self.presented_token(connection)
        if presented is None:
            raise AdminUnauthorized(
                "This server's admin surface needs its token: send "
                "`Authorization: Bearer TOKEN`, or sign in at /ui/login."
            )
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            raise AdminUnauthorized("The admin token is not valid.")

    def _is_local(self, connection: HTTPConnection) -> bool:
        """The operator on the server's own machine (see the module docstring)."""
        if not (_is_loopback(connection) and _names_loopback(connection)):
            return False
        if not _came_through_a_proxy(connection):
            return True
        # Through a proxy: local only if the proxy's own client was (the last hop of
        # X-Forwarded-For, which the proxy appends), and only when proxies are trusted.
        return self.trust_forwarded and _last_hop_is_loopback(connection)

    def allows(self, connection: HTTPConnection) -> bool:
        """True when :meth:`check` would pass."""
        try:
            self.check(connection)
        except AdminDenied:
            return False
        return True

    @staticmethod
    def presented_token(connection: HTTPConnection) -> str | None:
        """The token a request carries (bearer header first, then the cookie)."""
        header = connection.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return connection.cookies.get(ADMIN_COOKIE) or None


_TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
)


def admin_token(text: str) -> str:
    """``text`` as an admin token, or ``ValueError``: at least 16 characters, all of them
    safe in a header and a cookie (letters, digits and ``-._~+/=``: what
    ``openssl rand -base64`` and ``secrets.token_urlsafe`` make)."""
    if len(text) < 16 or not set(text) <= _TOKEN_CHARACTERS:
        raise ValueError(
            "an admin token is at least 16 characters of letters, digits and -._~+/= "
            "(for one: python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    return text


def _check_same_origin(connection: HTTPConnection) -> None:
    """Refuse a request a browser made for another site's page (cross-site request
    forgery against the operator's browser): its ``Origin`` names another host or is
    ``null`` (a sandboxed frame, a ``data:`` or ``file:`` page: no origin to trust), or
    ``Sec-Fetch-Site`` says it is cross-site."""
    fetch_site = connection.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise AdminDenied("The admin surface refuses requests made by other sites' pages.")
    origin = connection.headers.get("origin")
    if origin is not None:
        host = connection.headers.get("host", "")
        if origin == "null" or origin.partition("://")[2].rstrip("/") != host:
            raise AdminDenied("The admin surface refuses requests made by other sites' pages.")


def _names_loopback(connection: HTTPConnection) -> bool:
    """The ``Host`` the client asked for is a loopback name: without a token, this keeps
    a hostile page from reaching the admin surface through a DNS name that it points at
    127.0.0.1 (DNS rebinding)."""
    host = connection.headers.get("host", "")
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else host
    else:
        name = host.rpartition(":")[0] if host.count(":") == 1 else host
    if name in ("localhost", "") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


_FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def _came_through_a_proxy(connection: HTTPConnection) -> bool:
    return any(name in connection.headers for name in _FORWARDING_HEADERS)


def _last_hop_is_loopback(connection: HTTPConnection) -> bool:
    hops = connection.headers.get("x-forwarded-for", "").split(",")
    return _loopback_address(hops[-1].strip())


def _loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _is_loopback(connection: HTTPConnection) -> bool:
    client = connection.client
    if client is None:
        return False  # no peer address (some test transports): not provably local
    return _loopback_address(client.host)

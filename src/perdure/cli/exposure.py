"""What a ``perdure serve`` command line leaves open beyond this machine, said at startup.

Each default is safe on loopback; some are not once the server listens on an address
other hosts reach. :func:`open_settings` names each setting that leaves a route open
to more than the machine, so that the log says so before the first request (docs/edge.md,
"The security model").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Exposure", "open_settings"]


@dataclass(frozen=True, slots=True)
class Exposure:
    """The settings of ``perdure serve`` that decide who may reach what."""

    host: str
    token: bool
    admin_token: bool
    admin: bool
    cors_origins: Sequence[str] = ()
    proxy_headers: bool = False
    trusted_proxies: Sequence[str] = ()


def open_settings(exposure: Exposure) -> list[str]:
    """One sentence per setting that opens a route beyond loopback (empty when none)."""
    found: list[str] = []
    reachable = not _loopback(exposure.host)
    if reachable and not exposure.token:
        found.append(
            f"--host {exposure.host} with no --token: the client routes (actions, queues, "
            "events, /actors) are open to anyone who reaches this port; set --token "
            "(PERDURE_TOKEN) or bind to 127.0.0.1"
        )
    if "*" in exposure.cors_origins:
        found.append(
            "--cors-origin *: a page of any web site may call the client routes from its "
            "visitors' browsers; name the origins instead"
        )
    if reachable and exposure.admin and exposure.token and not exposure.admin_token:
        found.append(
            "no --admin-token: the admin surface (/admin, /ui, /metrics) accepts the client "
            "token, so every client may inspect and change every actor; set --admin-token"
        )
    if exposure.proxy_headers and any(_wide(proxy) for proxy in exposure.trusted_proxies):
        found.append(
            "--proxy-headers trusts X-Forwarded-For from "
            f"{', '.join(exposure.trusted_proxies)}: a client there can claim any address; "
            "name only your proxies with --trusted-proxy"
        )
    return found


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def _wide(proxy: str) -> bool:
    """A trusted-proxy entry that is not one host or a private or loopback network."""
    if proxy == "*":
        return True
    try:
        network = ipaddress.ip_network(proxy, strict=False)
    except ValueError:
        return False  # uvicorn refuses it when it starts
    return not (network.is_private or network.is_loopback)

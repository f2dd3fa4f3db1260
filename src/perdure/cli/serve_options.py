"""The options of ``perdure serve``: where it listens, its store, its cluster identity, who
may use its admin and client surfaces (docs/cli.md, docs/edge.md)."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable
from typing import Any

from perdure.cli.loading import CliError, add_store_options, positive_seconds
from perdure.cli.reload import RELOAD_FLAG
from perdure.observe.serving import add_serve_options
from perdure.runtime import NodeConfig
from perdure.server.edge.admin_access import admin_token
from perdure.server.edge.client_access import server_token
from perdure.server.edge.client_caps import (
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_WEBSOCKETS,
    ClientCaps,
)
from perdure.server.edge.slow_clients import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    KEEP_ALIVE_TIMEOUT,
    SlowClientLimits,
)

__all__ = [
    "add_serve_command",
    "client_caps",
    "lease_ttl",
    "node_config",
    "slow_client_limits",
    "store_timeout_of",
    "trusted_proxies",
]


def add_serve_command(commands: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to ``commands`` (the subparsers of ``perdure``)."""
    serve: argparse.ArgumentParser = commands.add_parser(
        "serve", help="serve a registry over HTTP and WebSocket"
    )
    serve.add_argument("registry", help="module:attribute or path/to/file.py:attribute")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=6420, help="port (default 6420)")
    add_store_options(serve)
    _add_cluster_options(serve)
    _add_admin_options(serve)
    _add_client_access_options(serve)
    _add_client_caps_options(serve)
    _add_slow_client_options(serve)
    _add_proxy_options(serve)
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level (default info; debug adds an access log and actor wake/sleep)",
    )
    add_serve_options(serve)  # --otel, --log-format
    serve.add_argument(
        RELOAD_FLAG,
        action="store_true",
        help="for development: restart the server when a .py file under the current "
        "directory changes (the data is kept; workflows replay under the new code)",
    )
    serve.add_argument(
        "--no-gc-tuning",
        dest="gc_tuning",
        action="store_false",
        help="keep Python's default garbage-collector settings (see perdure.tuning)",
    )
    return serve


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "cluster (PostgreSQL stores: every server is a node of the cluster on its database)"
    )
    group.add_argument(
        "--node-id",
        help="this node's id, unique in the cluster ($PERDURE_NODE_ID; default HOSTNAME-PORT)",
    )
    group.add_argument(
        "--advertise",
        help="the URL other nodes reach this one at ($PERDURE_ADVERTISE_URL; default "
        "http://HOST:PORT, with 127.0.0.1 for a wildcard host)",
    )
    group.add_argument(
        "--lease-ttl",
        type=float,
        help="seconds a node's leases outlive its last heartbeat: how long a dead node's actors "
        "wait before another node takes them ($PERDURE_LEASE_TTL; default 5)",
    )
    group.add_argument(
        "--store-timeout",
        type=positive_seconds,
        default=None,
        help="seconds a call waits for an unreachable PostgreSQL before it fails with 503 "
        "store.unavailable ($PERDURE_STORE_TIMEOUT; default 5)",
    )
    group.add_argument(
        "--code-version",
        help="the version of the code this node runs, announced to the cluster so that a "
        "workflow run stays on the code it started on ($PERDURE_CODE_VERSION; default: a "
        "digest of the registry's definitions and workflow code)",
    )
    group.add_argument(
        "--cluster-secret",
        help="the secret nodes present to each other, the same on every node "
        "($PERDURE_CLUSTER_SECRET; the database keeps only its digest); default: the nodes "
        "agree on a random one through the database. A node given another secret than its "
        "cluster's exits; `perdure reset-cluster-secret` changes it (`perdure docs deploy`)",
    )


def _add_admin_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "admin", "the admin API, inspector UI and /metrics (`perdure docs inspector`)"
    )
    group.add_argument(
        "--admin-token",
        type=_admin_token,
        default=os.environ.get("PERDURE_ADMIN_TOKEN") or None,
        help="require this token for the admin surface from every address (env "
        "PERDURE_ADMIN_TOKEN); without it, only loopback clients may use it",
    )
    group.add_argument(
        "--no-admin",
        dest="admin",
        action="store_false",
        help="turn the admin API, inspector UI and /metrics off",
    )
    group.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        default=os.environ.get("PERDURE_METRICS", "1").lower() not in ("0", "false", "no", "off"),
        help="serve no /metrics and keep no Prometheus metrics (env PERDURE_METRICS=0; "
        "`perdure docs metrics`)",
    )


def _add_client_access_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "client access", "the gateway, /actors and /metadata (`perdure docs edge`)"
    )
    group.add_argument(
        "--token",
        type=_server_token,
        default=os.environ.get("PERDURE_TOKEN") or None,
        help="require this token on every client request (env PERDURE_TOKEN; clients: "
        "createClient({ token }), Client(url, token=...)); default: open",
    )
    group.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let browser pages of ORIGIN (https://app.example, or *) call the server; "
        "repeat for more; default: no CORS headers (same origin only)",
    )


_SLOW_CLIENT_FLAGS = {
    "header_timeout": ("PERDURE_HEADER_TIMEOUT", HEADER_TIMEOUT),
    "body_timeout": ("PERDURE_BODY_TIMEOUT", BODY_TIMEOUT),
    "keep_alive_timeout": ("PERDURE_KEEP_ALIVE_TIMEOUT", KEEP_ALIVE_TIMEOUT),
}


def _add_slow_client_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "slow clients", "how long a connection may take to send a request (`perdure docs edge`)"
    )
    group.add_argument(
        "--header-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="seconds from a connection's opening (or the next request's first byte) to the "
        "end of the request's headers; later: 408 request.header_timeout "
        f"($PERDURE_HEADER_TIMEOUT; default {HEADER_TIMEOUT:g})",
    )
    group.add_argument(
        "--body-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="seconds from the end of the headers to the end of the body; later: 408 "
        f"request.body_timeout ($PERDURE_BODY_TIMEOUT; default {BODY_TIMEOUT:g})",
    )
    group.add_argument(
        "--keep-alive-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="seconds an idle kept-alive connection stays open "
        f"($PERDURE_KEEP_ALIVE_TIMEOUT; default {KEEP_ALIVE_TIMEOUT:g})",
    )


def slow_client_limits(args: argparse.Namespace) -> SlowClientLimits:
    """The slow-client limits: each flag, else its environment variable, else its default."""
    seconds = {}
    for name, (variable, default) in _SLOW_CLIENT_FLAGS.items():
        flag: float | None = getattr(args, name)
        seconds[name] = flag or _seconds_from_env(variable) or default
    return SlowClientLimits(**seconds)


def _seconds_from_env(variable: str) -> float | None:
    """The positive seconds in ``$variable``, ``None`` when it is unset or empty."""
    text = os.environ.get(variable)
    if not text:
        return None
    try:
        return positive_seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"{variable} {exc}") from None


def _add_client_caps_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "per-client caps",
        "what one client address may hold open and how fast it may create actors; 0: no "
        "cap (`perdure docs edge`)",
    )
    group.add_argument(
        "--max-streams-per-client",
        type=_count,
        metavar="N",
        help="open Server-Sent Events streams per client address; past it: 429 request."
        f"too_many_streams ($PERDURE_MAX_STREAMS_PER_CLIENT; default {DEFAULT_MAX_STREAMS})",
    )
    group.add_argument(
        "--max-websockets-per-client",
        type=_count,
        metavar="N",
        help="open WebSockets per client address; past it: request.too_many_connections, "
        f"close 1013 ($PERDURE_MAX_WEBSOCKETS_PER_CLIENT; default {DEFAULT_MAX_WEBSOCKETS})",
    )
    group.add_argument(
        "--creation-rate-per-client",
        type=_rate,
        metavar="PER_SECOND",
        help="actors one client address may create per second; past it: 429 "
        "request.creation_rate_limited ($PERDURE_CREATION_RATE_PER_CLIENT; default 0: no limit)",
    )
    group.add_argument(
        "--creation-burst-per-client",
        type=_count,
        metavar="N",
        help="creations allowed at once before the rate applies "
        "($PERDURE_CREATION_BURST_PER_CLIENT; default: the rate rounded up)",
    )


_CLIENT_CAP_FLAGS = {
    "max_streams": ("max_streams_per_client", "PERDURE_MAX_STREAMS_PER_CLIENT"),
    "max_websockets": ("max_websockets_per_client", "PERDURE_MAX_WEBSOCKETS_PER_CLIENT"),
    "creation_rate": ("creation_rate_per_client", "PERDURE_CREATION_RATE_PER_CLIENT"),
    "creation_burst": ("creation_burst_per_client", "PERDURE_CREATION_BURST_PER_CLIENT"),
}


def client_caps(args: argparse.Namespace) -> ClientCaps:
    """The per-client caps: each flag, else its environment variable, else its default."""
    caps: dict[str, Any] = {}
    for field, (name, variable) in _CLIENT_CAP_FLAGS.items():
        value = getattr(args, name)
        text = os.environ.get(variable)
        if value is None and text:
            parse = _rate if field == "creation_rate" else _count
            try:
                value = parse(text)
            except argparse.ArgumentTypeError as exc:
                raise CliError(f"{variable} {exc}") from None
        if value is not None:
            caps[field] = value
    return ClientCaps(**caps)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (0: no cap), not {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (0: no limit), not {text!r}")
    return value


def _add_proxy_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "behind a proxy", "who the client is when a reverse proxy forwards to this server"
    )
    group.add_argument(
        "--proxy-headers",
        action="store_true",
        default=_env_flag("PERDURE_PROXY_HEADERS"),
        help="take the client's address (and scheme) from X-Forwarded-For (-Proto) when "
        "the request comes from a trusted proxy (env PERDURE_PROXY_HEADERS=1); default: "
        "off, and a forwarded request never counts as local for the admin surface",
    )
    group.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="ADDRESS",
        help="an address or network (10.0.0.0/8) of a proxy whose X-Forwarded-* headers "
        "to believe; repeat for more (env PERDURE_TRUSTED_PROXIES, comma-separated; "
        "default 127.0.0.1 and ::1: a proxy on this host)",
    )


def trusted_proxies(args: argparse.Namespace) -> list[str]:
    """The proxies whose forwarding headers ``perdure serve`` believes."""
    if args.trusted_proxy:
        return [str(address) for address in args.trusted_proxy]
    text = os.environ.get("PERDURE_TRUSTED_PROXIES", "")
    return [part.strip() for part in text.split(",") if part.strip()] or ["127.0.0.1", "::1"]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


def _admin_token(text: str) -> str:
    return _argument(admin_token, text)


def _server_token(text: str) -> str:
    return _argument(server_token, text)


def _argument(check: Callable[[str], str], text: str) -> str:
    """``check(text)``, its ``ValueError`` as argparse's usage error."""
    try:
        return check(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def store_timeout_of(args: argparse.Namespace) -> float | None:
    if args.store_timeout is not None:
        return float(args.store_timeout)
    return _seconds_from_env("PERDURE_STORE_TIMEOUT")


def lease_ttl(args: argparse.Namespace) -> float:
    if args.lease_ttl is not None:
        return float(args.lease_ttl)
    text = os.environ.get("PERDURE_LEASE_TTL", "5")
    try:
        return float(text)
    except ValueError:
        raise CliError(f"PERDURE_LEASE_TTL must be a number of seconds, got {text!r}") from None


def node_config(args: argparse.Namespace, url: str) -> NodeConfig | None:
    """The node's identity when the store is shared (PostgreSQL), else ``None``."""
    if not url.startswith(("postgresql://", "postgres://")):
        if args.node_id or args.advertise or args.code_version:
            raise CliError(
                "--node-id, --advertise and --code-version need a PostgreSQL store (--store)"
            )
        return None
    env = os.environ.get
    host = args.host if args.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    address = args.advertise or env("PERDURE_ADVERTISE_URL") or f"http://{host}:{args.port}"
    if not address.startswith(("http://", "https://")):
        raise CliError(f"--advertise must be an http:// or https:// URL, got {address!r}")
    try:
        return NodeConfig(
            node_id=args.node_id or env("PERDURE_NODE_ID") or f"{socket.gethostname()}-{args.port}",
            address=address.rstrip("/"),
            lease_ttl_ms=int(lease_ttl(args) * 1000),
            # Without one the nodes agree on a secret through the store (cli.cluster_secret).
            # Not the client token: whoever has it could then act as a node.
            secret=args.cluster_secret or env("PERDURE_CLUSTER_SECRET") or None,
            # Without one the runtime announces a digest of the registry (registry_digest).
            code_version=args.code_version or env("PERDURE_CODE_VERSION") or None,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None

"""The ``perdure`` command line.

``perdure serve module:registry`` serves a registry over HTTP and WebSocket (uvicorn with
uvloop and httptools). It binds to 127.0.0.1 unless ``--host`` says otherwise, keeps its
data in ``./.perdure/perdure.db`` (SQLite) unless ``--data`` or ``--store`` says
otherwise, and shuts down gracefully on SIGTERM or SIGINT: every live actor goes to sleep
(``on_sleep`` runs, state is flushed) before the process exits.

One server per SQLite data directory: a second ``perdure serve`` on a directory in use
exits at once (status 1) with a message naming the directory and the process holding it
(see :mod:`perdure.store.sqlite.lock`); a killed holder's lock goes with it.

``perdure actors`` lists the actors in a store, with their decoded state, without a
server (SQLite readers do not block a running server, and take no lock).

On a PostgreSQL store every ``perdure serve`` is a node of one cluster (docs/deploy.md):
``--node-id``, ``--advertise``, ``--lease-ttl`` and ``--cluster-secret`` (or their
``PERDURE_*`` environment variables) say who it is to its peers. ``perdure nodes`` lists
the live nodes with the number of actors each holds.

``perdure inspect``, ``perdure workflow status|retry|replay`` and ``perdure destroy`` work on
a running server through its admin API (:mod:`perdure.cli.admin`, docs/cli.md).

The registry is named ``package.module:attribute`` or ``path/to/file.py:attribute``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import datetime as _dt
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from perdure._version import __version__
from perdure.cli.admin import ADMIN_COMMANDS, add_admin_commands, run_admin_command
from perdure.cli.check_command import add_check_command, run_check
from perdure.cli.loading import (
    CliError,
    add_store_options,
    load_registry,
    open_store_at,
    positive_seconds,
    store_url,
)
from perdure.keys import serialize_key
from perdure.observe.serving import add_serve_options, configure_logging, enable_otel
from perdure.registry import Registry
from perdure.runtime import NodeConfig
from perdure.server.edge.admin_access import admin_token
from perdure.server.edge.client_access import server_token
from perdure.store import SQLiteStore, StoreLocked
from perdure.store.base import ActorRecord
from perdure.store.encoding import decode_value
from perdure.tuning import tune_garbage_collector

__all__ = ["load_registry", "main"]

_log = logging.getLogger("perdure.cli.app")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``perdure`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "actors":
            return asyncio.run(_actors(args))
        if args.command == "nodes":
            return asyncio.run(_nodes(args))
        if args.command in ADMIN_COMMANDS:
            return run_admin_command(args)
        if args.command == "check":
            return run_check(args)
    except CliError as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perdure", description="Durable actors and workflows.")
    parser.add_argument("--version", action="version", version=f"perdure {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve a registry over HTTP and WebSocket")
    serve.add_argument("registry", help="module:attribute or path/to/file.py:attribute")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=6420, help="port (default 6420)")
    add_store_options(serve)
    _add_cluster_options(serve)
    _add_admin_options(serve)
    _add_client_access_options(serve)
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level (default info; debug adds an access log and actor wake/sleep)",
    )
    add_serve_options(serve)  # --otel, --log-format
    serve.add_argument(
        "--no-gc-tuning",
        dest="gc_tuning",
        action="store_false",
        help="keep Python's default garbage-collector settings (see perdure.tuning)",
    )
    actors = commands.add_parser("actors", help="list the actors in a store and their state")
    add_store_options(actors)
    actors.add_argument("--name", help="only actors of this name")
    actors.add_argument("--json", action="store_true", help="one JSON object per line")
    nodes = commands.add_parser("nodes", help="list the live nodes of a cluster")
    add_store_options(nodes)
    nodes.add_argument("--all", action="store_true", help="also nodes whose heartbeat stopped")
    nodes.add_argument("--json", action="store_true", help="one JSON object per line")
    add_admin_commands(commands)
    add_check_command(commands)
    return parser


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
        "--cluster-secret",
        help="a secret nodes present to each other on forwarded requests "
        "($PERDURE_CLUSTER_SECRET; default none: keep node ports private)",
    )


def _add_admin_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "admin", "the admin API, inspector UI and /metrics (docs/inspector.md)"
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
        "docs/metrics.md)",
    )


def _add_client_access_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "client access", "the gateway, /actors and /metadata (docs/edge.md)"
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


def _store_timeout_of(args: argparse.Namespace) -> float | None:
    if args.store_timeout is not None:
        return float(args.store_timeout)
    text = os.environ.get("PERDURE_STORE_TIMEOUT")
    if not text:
        return None
    try:
        return positive_seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"PERDURE_STORE_TIMEOUT {exc}") from None


def _lease_ttl(args: argparse.Namespace) -> float:
    if args.lease_ttl is not None:
        return float(args.lease_ttl)
    text = os.environ.get("PERDURE_LEASE_TTL", "5")
    try:
        return float(text)
    except ValueError:
        raise CliError(f"PERDURE_LEASE_TTL must be a number of seconds, got {text!r}") from None


def _node_config(args: argparse.Namespace, url: str) -> NodeConfig | None:
    """The node's identity when the store is shared (PostgreSQL), else ``None``."""
    if not url.startswith(("postgresql://", "postgres://")):
        if args.node_id or args.advertise:
            raise CliError("--node-id and --advertise need a PostgreSQL store (--store)")
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
            lease_ttl_ms=int(_lease_ttl(args) * 1000),
            # With a client token and no cluster secret, the token (the same on every
            # node) guards the nodes' forward route: it must not stay open.
            secret=args.cluster_secret or env("PERDURE_CLUSTER_SECRET") or args.token or None,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


# --------------------------------------------------------------------------- serve


def _serve(args: argparse.Namespace) -> int:
    from perdure.server.edge.listening import ListenError, bind_listener

    level = getattr(logging, args.log_level.upper())
    configure_logging(level, args.log_format)
    # httpx logs every request at INFO: between the nodes of a cluster, that is every
    # forwarded request (debug adds them back).
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))
    logging.getLogger("uvicorn.error").addFilter(_UvicornLog(quiet=level > logging.DEBUG))
    registry = load_registry(args.registry)
    # Before the store is opened or anything logged: a port in use is the first thing
    # a user hears about, not an error line after "serving".
    try:
        listener = bind_listener(args.host, args.port)
    except ListenError as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        return 1
    with listener:
        return _serve_on(args, registry, listener, level)


def _serve_on(
    args: argparse.Namespace, registry: Registry, listener: socket.socket, level: int
) -> int:
    import uvicorn

    from perdure.runtime import ActorRuntime
    from perdure.server import create_app
    from perdure.server.edge.admin_access import AdminAccess
    from perdure.server.edge.draining import DrainingServer
    from perdure.server.edge.http_limits import EdgeHttpProtocol

    port = listener.getsockname()[1]
    url = store_url(args, create=True)
    node = _node_config(args, url)
    store = open_store_at(url, store_timeout=_store_timeout_of(args))
    try:
        # Before the server starts, so that a second server on the same data directory
        # exits at once with the reason; the store shares this lock when it opens.
        data_lock = store.lock() if isinstance(store, SQLiteStore) else None
    except StoreLocked as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        return 1
    _log.info("store: %s", _describe_store(url))
    runtime = ActorRuntime(registry, store, node=node)
    if args.otel:
        enable_otel(runtime)
    if node is not None:
        _log.info("cluster node %s, reachable by its peers at %s", node.node_id, node.address)
        if "//127.0.0.1:" in node.address and args.host not in ("127.0.0.1", "localhost"):
            _log.warning(
                "peers are told to reach this node at %s, which only works on this host: "
                "set --advertise (or PERDURE_ADVERTISE_URL) to an address other hosts reach",
                node.address,
            )
    options = registry.options
    config = uvicorn.Config(
        create_app(
            runtime,
            admin=AdminAccess(enabled=args.admin, token=args.admin_token),
            metrics=args.metrics,
            token=args.token,
            cors_origins=args.cors_origin,
        ),
        host=args.host,
        port=args.port,
        loop="uvloop",
        # httptools with bounded request lines and headers, refused in perdure's shape.
        http=EdgeHttpProtocol,
        ws="websockets-sansio",
        # Frames between the protocol limit and this one get a clear close reason from
        # the server (message.incoming_too_long); this bounds what is buffered at all.
        ws_max_size=options.max_incoming_message_size * 4 + 65536,
        lifespan="on",
        log_config=None,
        log_level=level,
        access_log=level <= logging.DEBUG,
        timeout_graceful_shutdown=30,
        server_header=False,
        # No proxy in front by default; trusting X-Forwarded-* is an explicit choice.
        proxy_headers=False,
    )
    if args.gc_tuning:
        tune_garbage_collector()  # everything long-lived is loaded by now
    _log.info("perdure %s serving %s on http://%s:%d", __version__, args.registry, args.host, port)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal with the
    # handlers it found installed. Installing ours turns that into a clean exit status 0.
    previous = {sig: signal.signal(sig, _stop_requested) for sig in _STOP_SIGNALS}
    try:
        DrainingServer(config, runtime).run(sockets=[listener])
    except _StopRequested:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if data_lock is not None:
            data_lock.release()
    _log.info("perdure stopped")
    return 0


class _StopRequested(Exception):
    """Raised by the signal handler uvicorn restores and re-triggers after shutdown."""


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_requested(signum: int, frame: Any) -> None:
    raise _StopRequested()


class _UvicornLog(logging.Filter):
    """Names uvicorn's server log ``uvicorn`` (not ``uvicorn.error``, which reads like a
    failure) and, unless debugging, drops its per-WebSocket lines: it logs every
    handshake, opening and closing at INFO, URL included (which may carry a token). Like
    the HTTP access log, those are for debug only."""

    def __init__(self, *, quiet: bool) -> None:
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        """Rename the record; ``False`` drops a per-connection line."""
        record.name = "uvicorn"
        message = record.msg
        if not self.quiet or not isinstance(message, str):
            return True
        return message not in _CONNECTION_LINES and not message.startswith(_HANDSHAKE_LINE)


_CONNECTION_LINES = frozenset({"connection open", "connection closed"})
_HANDSHAKE_LINE = '%s - "WebSocket %s"'


def _describe_store(url: str) -> str:
    if url == "memory://":
        return "in memory (nothing survives a restart)"
    if url.startswith(("postgresql://", "postgres://")):
        # Host and database only: the URL may carry a password, which must not be logged.
        parts = urlsplit(url)
        return f"PostgreSQL {parts.netloc.rpartition('@')[2]}{parts.path}"
    return f"SQLite {url}"


# -------------------------------------------------------------------------- actors


async def _actors(args: argparse.Namespace) -> int:
    # Not exclusive: listing reads beside a running server, which holds the lock.
    store = open_store_at(store_url(args, create=False), exclusive=False)
    await store.open()
    try:
        after: str | None = None
        while True:
            page = await store.list_actors(name=args.name, after=after, limit=500)
            for record in page:
                print(_actor_line(record, as_json=args.json))
            if len(page) < 500:
                break
            after = page[-1].actor_id
    finally:
        await store.close()
    return 0


async def _nodes(args: argparse.Namespace) -> int:
    store = open_store_at(store_url(args, create=False), exclusive=False)
    await store.open()
    try:
        records = await store.list_nodes(include_dead=args.all)
    finally:
        await store.close()
    now = _dt.datetime.now(_dt.UTC).timestamp() * 1000
    for node in records:
        alive = node.expires_at > now
        if args.json:
            print(json.dumps({**dataclasses.asdict(node), "alive": alive}))
            continue
        state = "draining" if node.draining else ("live" if alive else "dead")
        beat = (now - node.heartbeat_at) / 1000
        print(
            f"{node.node_id}  {node.address}  {state}  {node.actors} actor(s)  "
            f"heartbeat {beat:.1f} s ago"
        )
    if not records and not args.json:
        print("no live nodes", file=sys.stderr)
    return 0


def _actor_line(record: ActorRecord, *, as_json: bool) -> str:
    state = None if record.state is None else plain(decode_value(record.state))
    created = _dt.datetime.fromtimestamp(record.created_at / 1000, _dt.UTC)
    if as_json:
        return json.dumps(
            {
                "actor_id": record.actor_id,
                "name": record.name,
                "key": list(record.key),
                "created_at": created.isoformat(),
                "generation": record.generation,
                "state": state,
            },
            ensure_ascii=False,
        )
    key = serialize_key(record.key)
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    return f"{record.actor_id}  {record.name}  [{key}]  gen {record.generation}  {text}"


def plain(value: Any) -> Any:
    """A JSON-friendly copy of a stored value (bytes as base64, instants as ISO text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [plain(v) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return repr(value)

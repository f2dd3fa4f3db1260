"""``perdure serve``: bind, open the store, and serve a registry with uvicorn until SIGTERM or
SIGINT, when every live actor goes to sleep before the process exits."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from perdure._version import __version__
from perdure.cli.cluster_secret import agreed_node
from perdure.cli.exposure import Exposure, open_settings
from perdure.cli.loading import load_registry, open_store_at, store_url
from perdure.cli.serve_options import (
    client_caps,
    node_config,
    slow_client_limits,
    store_timeout_of,
    trusted_proxies,
)
from perdure.errors import ClusterSecretMismatch
from perdure.observe.serving import configure_logging, enable_otel
from perdure.registry import Registry
from perdure.store import SQLiteStore, StoreLocked
from perdure.tuning import tune_garbage_collector

__all__ = ["serve"]

_log = logging.getLogger("perdure.cli.app")


def serve(args: argparse.Namespace) -> int:
    from perdure.server.edge.listening import ListenError, bind_listener

    level = getattr(logging, args.log_level.upper())
    # The configured credentials are masked in every log line, at every level.
    secrets = (
        args.token,
        args.admin_token,
        args.cluster_secret,
        os.environ.get("PERDURE_CLUSTER_SECRET"),
    )
    configure_logging(level, args.log_format, [s for s in secrets if s])
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
    from perdure.server.edge.refusals import EdgeRefusals

    port = listener.getsockname()[1]
    url = store_url(args, create=True)
    node = node_config(args, url)
    if node is not None:
        try:
            # Before anything registers or serves: a node given another secret than its
            # cluster's exits here, saying what to pass.
            node = agreed_node(node, url, store_timeout_of(args))
        except ClusterSecretMismatch as exc:
            print(f"perdure: error: {exc.message}", file=sys.stderr)
            return 1
    caps = client_caps(args)
    limits = slow_client_limits(args)
    store = open_store_at(url, store_timeout=store_timeout_of(args))
    try:
        # Before the server starts, so that a second server on the same data directory
        # exits at once with the reason; the store shares this lock when it opens.
        data_lock = store.lock() if isinstance(store, SQLiteStore) else None
    except StoreLocked as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        return 1
    _log.info("store: %s", _describe_store(url))
    runtime = ActorRuntime(registry, store, node=node)
    stop_tracing = enable_otel(runtime) if args.otel else None
    if node is not None:
        _log.info("cluster node %s, reachable by its peers at %s", node.node_id, node.address)
        if "//127.0.0.1:" in node.address and args.host not in ("127.0.0.1", "localhost"):
            _log.warning(
                "peers are told to reach this node at %s, which only works on this host: "
                "set --advertise (or PERDURE_ADVERTISE_URL) to an address other hosts reach",
                node.address,
            )
    options = registry.options
    # One count of what the edge refuses, shared by the app (/metrics, the door) and the
    # HTTP protocol (oversized and slow requests).
    refusals = EdgeRefusals()
    app = create_app(
        runtime,
        admin=AdminAccess(
            enabled=args.admin, token=args.admin_token, trust_forwarded=args.proxy_headers
        ),
        metrics=args.metrics,
        token=args.token,
        cors_origins=args.cors_origin,
        caps=caps,
        refusals=refusals,
    )
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        # httptools with bounded request lines and headers and time limits on slow
        # clients (the keep-alive timeout among them), refused in perdure's shape and
        # counted.
        http=EdgeHttpProtocol.bound(limits, refusals),
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
        # No proxy in front by default; trusting X-Forwarded-* is an explicit choice, and
        # only from the proxies named (docs/edge.md, "Behind a proxy").
        proxy_headers=args.proxy_headers,
        forwarded_allow_ips=trusted_proxies(args),
    )
    if args.gc_tuning:
        tune_garbage_collector()  # everything long-lived is loaded by now
    _log.info("perdure %s serving %s on http://%s:%d", __version__, args.registry, args.host, port)
    _warn_of_open_settings(args)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal with the
    # handlers it found installed. Installing ours turns that into a clean exit status 0.
    previous = {sig: signal.signal(sig, _stop_requested) for sig in _STOP_SIGNALS}
    try:
        DrainingServer(config, runtime, on_stop=[app.end_streams]).run(sockets=[listener])
    except _StopRequested:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if data_lock is not None:
            data_lock.release()
        if stop_tracing is not None:
            stop_tracing()  # bounded: a missing collector does not hold the exit
    _log.info("perdure stopped")
    return 0


def _warn_of_open_settings(args: argparse.Namespace) -> None:
    """Name each setting that leaves a route open beyond this machine (docs/edge.md)."""
    exposure = Exposure(
        host=args.host,
        token=args.token is not None,
        admin_token=args.admin_token is not None,
        admin=args.admin,
        cors_origins=args.cors_origin,
        proxy_headers=args.proxy_headers,
        trusted_proxies=trusted_proxies(args),
    )
    for sentence in open_settings(exposure):
        _log.warning("open: %s (`perdure docs edge`, the security model)", sentence)


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

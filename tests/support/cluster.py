"""A perdure cluster for tests and benches: nodes on one PostgreSQL schema, and HAProxy.

- :class:`ClusterNode`: a real ``python -m perdure serve`` subprocess (a
  :class:`~tests.support.server.ServerProcess`) on a PostgreSQL store, with a node id,
  an advertised URL and a lease TTL; it can be killed (SIGKILL), stopped gracefully
  (SIGTERM), paused (SIGSTOP), resumed (SIGCONT) and restarted on the same port.
- :class:`Cluster`: N nodes on one fresh schema; a context manager that kills every node
  and drops the schema on exit.
- :class:`Balancer`: a real HAProxy (``haproxy -f CFG -db``) in front of the nodes on
  loopback: HTTP mode, round robin, no stickiness (the cluster forwards a request to the
  actor's node itself), WebSocket upgrades tunnelled, active health checks on ``/health``
  and retries on another node when a connection to a dead one fails. The same shape as
  the configuration in docs/deploy.md.

::

    with Cluster("tests.support.apps.compat:registry", size=3, base_dir=tmp_path) as cluster:
        with Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as balancer:
            ...  # clients on balancer.url; cluster.node(0).kill(); ...

``node_flags=False`` starts the nodes without ``--node-id``/``--advertise``/
``--lease-ttl`` (a server that does not know them yet refuses them). Every wait here is
bounded. Without PostgreSQL (or without ``haproxy``) a test is skipped, or fails when
``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from tests.support.postgres import POSTGRES_URL, drop_schema, new_schema_name, require_postgres
from tests.support.server import REPO_ROOT, STOP_TIMEOUT, ServerProcess, free_port

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Balancer",
    "Cluster",
    "ClusterNode",
    "haproxy_config",
    "require_haproxy",
    "store_url",
]

DEFAULT_LEASE_TTL = 2.0
"""Seconds; short, so a killed node's actors are taken over quickly in tests."""

HAPROXY_START_TIMEOUT = 15.0
CHECK_INTERVAL_MS = 250
"""HAProxy's health-check period: with ``fall 2`` a dead node leaves the rotation in
about half a second, and a refused connection is retried on another node before that."""


def store_url(schema: str, base: str = POSTGRES_URL) -> str:
    """``base`` (a PostgreSQL URL) with ``?schema=<schema>`` added."""
    parts = urlsplit(base)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"]
    query.append(("schema", schema))
    return urlunsplit(parts._replace(query=urlencode(query)))


class _StartStop:
    """``with x:`` starts ``x`` and stops it on the way out, whatever happened."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ClusterNode(ServerProcess):
    """``perdure serve REGISTRY --store URL --node-id ID --advertise URL --lease-ttl S``.

    The port, node id and store stay the same across restarts. With
    ``node_flags=False`` the three node flags are left out (the server's defaults
    apply). ``extra_args`` go last.
    """

    def __init__(
        self,
        registry: str,
        data_dir: Path,
        *,
        store: str,
        node_id: str,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        node_flags: bool = True,
        port: int | None = None,
        env: dict[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        port = port or free_port()
        self.store = store
        self.node_id = node_id
        self.lease_ttl = lease_ttl
        self.paused = False
        args = ["--store", store]
        if node_flags:
            args += [
                "--node-id",
                node_id,
                "--advertise",
                f"http://127.0.0.1:{port}",
                "--lease-ttl",
                f"{lease_ttl:g}",
            ]
        super().__init__(registry, data_dir, port=port, env=env, extra_args=[*args, *extra_args])

    @property
    def advertise(self) -> str:
        """The URL peers reach this node at (its own loopback URL)."""
        return self.url

    @property
    def pid(self) -> int:
        """The process id (the node must have been started)."""
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> ClusterNode:
        """Start and wait (bounded) until ``/health`` answers."""
        self.paused = False
        super().start()
        return self

    def kill(self) -> None:
        """SIGKILL (works on a paused node too); reap the process."""
        super().kill()
        self.paused = False

    def terminate(self) -> int:
        """SIGTERM (a paused node is resumed first, or it could not act on it) and wait
        (bounded) for the drain to finish; returns the exit status."""
        if self.paused:
            self.resume()
        return super().terminate()

    def pause(self) -> None:
        """SIGSTOP: the process freezes; its sockets stay open, its leases stop renewing."""
        assert self.running, "not running"
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.process is not None, "not started"
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def health(self, timeout: float = 2.0) -> dict[str, Any]:
        """``GET /health`` of this node (not through a balancer)."""
        response = httpx.get(f"{self.url}/health", timeout=timeout)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


class Cluster(_StartStop):
    """``size`` nodes serving ``registry`` on one fresh PostgreSQL schema.

    Node ``i`` is named ``node-<i>``; its data directory (which holds only its logs)
    is ``base_dir/node-<i>``. :meth:`start` (or ``with``) starts the first node alone
    (it creates the tables), then the others together. :meth:`stop` (or leaving the
    ``with``) kills every node and drops the schema.
    """

    def __init__(
        self,
        registry: str,
        size: int = 3,
        *,
        base_dir: Path,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        node_flags: bool = True,
        schema: str | None = None,
        env: dict[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        require_postgres()
        self.registry = registry
        self.schema = schema or new_schema_name()
        self.store = store_url(self.schema)
        self.base_dir = base_dir
        self.nodes: list[ClusterNode] = [
            ClusterNode(
                registry,
                base_dir / f"node-{index}",
                store=self.store,
                node_id=f"node-{index}",
                lease_ttl=lease_ttl,
                node_flags=node_flags,
                env=env,
                extra_args=extra_args,
            )
            for index in range(size)
        ]

    @property
    def urls(self) -> list[str]:
        """Every node's URL, in order."""
        return [node.url for node in self.nodes]

    def node(self, index: int) -> ClusterNode:
        """Node ``index``."""
        return self.nodes[index]

    def start(self) -> Self:
        """Start every node; bounded by each node's start timeout."""
        try:
            if self.nodes:
                self.nodes[0].start()
            rest = self.nodes[1:]
            if rest:
                with ThreadPoolExecutor(len(rest)) as pool:
                    for _ in pool.map(ClusterNode.start, rest):
                        pass
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill every node (SIGKILL, no drain) and drop the schema."""
        for node in self.nodes:
            node.kill()
        drop_schema(self.schema)

    close = stop

    def nodes_command(self, *args: str, timeout: float = 20.0) -> str:
        """What ``perdure nodes --store URL ARGS`` prints (it must exit 0)."""
        result = subprocess.run(
            [sys.executable, "-m", "perdure", "nodes", "--store", self.store, *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return result.stdout

    def live_nodes(self, *, timeout: float = 20.0) -> list[dict[str, Any]]:
        """What ``perdure nodes --store URL --json`` lists (one dict per live node)."""
        text = self.nodes_command("--json", timeout=timeout)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_members(self, node_ids: Iterable[str], *, timeout: float = 15.0) -> None:
        """Wait (bounded) until the live nodes are exactly ``node_ids``."""
        wanted = set(node_ids)
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while time.monotonic() < deadline:
            seen = {n["node_id"] for n in self.live_nodes() if n.get("alive", True)}
            if seen == wanted:
                return
            time.sleep(0.2)
        raise AssertionError(f"live nodes {sorted(seen)}, expected {sorted(wanted)}")

    def logs(self) -> str:
        """Every node's log, each under a header."""
        return "\n".join(f"===== {node.node_id} =====\n{node.log()}" for node in self.nodes)


def require_haproxy() -> str:
    """The ``haproxy`` executable; skip without it, or fail when ``CI=true``."""
    path = shutil.which("haproxy")
    if path is not None:
        return path
    reason = "haproxy is not installed (apt-get install haproxy)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} — the cluster tests are required in CI.", pytrace=False)
    pytest.skip(reason)


def haproxy_config(
    servers: Sequence[tuple[str, str]],
    *,
    port: int,
    stats_port: int,
    check_interval_ms: int = CHECK_INTERVAL_MS,
    bind: str = "127.0.0.1",
    forward_for: bool = False,
) -> str:
    """The configuration :class:`Balancer` runs: ``servers`` are ``(name, "host:port")``;
    it listens on ``bind`` and, with ``forward_for``, adds ``X-Forwarded-For``."""
    lines = [
        "global",
        "    log stdout format raw local0 info",
        "    maxconn 4096",
        "",
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    option dontlognull",
        "    timeout connect 2s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    timeout http-request 15s",
        "    timeout queue 10s",
        "    timeout check 1s",
        # WebSocket connections: once upgraded, the tunnel timeout applies.
        "    timeout tunnel 1h",
        # A connection refused by a dead node is retried on another node (redispatch),
        # up to 3 times. Only refused connections: a request a node received may have
        # been applied, so replaying it (empty-response) could apply it twice.
        "    retries 3",
        "    option redispatch 1",
        "    retry-on conn-failure",
        "",
        "frontend perdure",
        f"    bind {bind}:{port}",
        *(["    option forwardfor"] if forward_for else []),
        "    default_backend nodes",
        "",
        "backend nodes",
        "    balance roundrobin",
        "    option httpchk GET /health",
        "    http-check expect status 200",
        f"    default-server check inter {check_interval_ms}ms fall 2 rise 2",
        *(f"    server {name} {address}" for name, address in servers),
        "",
        "frontend stats",
        f"    bind 127.0.0.1:{stats_port}",
        "    stats enable",
        "    stats uri /stats",
        "    http-request set-log-level silent",
        "",
    ]
    return "\n".join(lines)


class Balancer(_StartStop):
    """HAProxy on ``127.0.0.1:<port>`` in front of ``servers`` (``(name, "host:port")``).

    Its configuration and log live in ``base_dir``; its statistics (each server's
    health as HAProxy sees it) at :attr:`stats_url`. :meth:`start` waits (bounded) until
    every server is up; :meth:`stop` stops it.
    """

    def __init__(
        self,
        servers: Sequence[tuple[str, str]],
        *,
        base_dir: Path,
        port: int | None = None,
        check_interval_ms: int = CHECK_INTERVAL_MS,
        bind: str = "127.0.0.1",
        forward_for: bool = False,
    ) -> None:
        self.executable = require_haproxy()
        self.bind = bind
        self.forward_for = forward_for
        self.servers = list(servers)
        self.base_dir = base_dir
        self.port = port or free_port()
        self.stats_port = free_port()
        self.check_interval_ms = check_interval_ms
        self.config_path = base_dir / "haproxy.cfg"
        self.log_path = base_dir / "haproxy.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @classmethod
    def in_front_of(cls, nodes: Sequence[ServerProcess], *, base_dir: Path) -> Balancer:
        """A balancer for these nodes (named ``node-<i>`` or by their node id)."""
        servers = [
            (getattr(node, "node_id", f"node-{index}"), f"127.0.0.1:{node.port}")
            for index, node in enumerate(nodes)
        ]
        return cls(servers, base_dir=base_dir / "haproxy")

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: where clients connect."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def stats_url(self) -> str:
        """HAProxy's statistics as CSV."""
        return f"http://127.0.0.1:{self.stats_port}/stats;csv"

    @property
    def running(self) -> bool:
        """True while HAProxy is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self, *, wait_up: bool = True) -> Self:
        """Write the configuration, start HAProxy in the foreground and wait (bounded)
        until it answers, and with ``wait_up`` until every server is up."""
        assert not self.running, "already running"
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            haproxy_config(
                self.servers,
                port=self.port,
                stats_port=self.stats_port,
                check_interval_ms=self.check_interval_ms,
                bind=self.bind,
                forward_for=self.forward_for,
            )
        )
        check = subprocess.run(
            [self.executable, "-c", "-q", "-f", str(self.config_path)],
            capture_output=True,
            text=True,
            timeout=HAPROXY_START_TIMEOUT,
        )
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its configuration:\n{check.stdout}{check.stderr}")
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [self.executable, "-f", str(self.config_path), "-db"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            if wait_up:
                self.wait_status({name: "UP" for name, _ in self.servers}, checked=True)
            else:
                self.wait_status({})
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if HAProxy has not exited within the stop timeout."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)
        if self._log is not None:
            self._log.close()
            self._log = None

    def stats(self) -> list[dict[str, str]]:
        """HAProxy's statistics row of each server (``svname``, ``status``,
        ``check_status`` …; see HAProxy's management guide, "CSV format")."""
        response = httpx.get(self.stats_url, timeout=2.0)
        response.raise_for_status()
        header, *lines = response.text.lstrip("# ").splitlines()
        columns = header.split(",")
        rows = [dict(zip(columns, line.split(","), strict=False)) for line in lines]
        return [
            row
            for row in rows
            if row.get("pxname") == "nodes" and row.get("svname") not in ("FRONTEND", "BACKEND")
        ]

    def status(self) -> dict[str, str]:
        """Each server's state as HAProxy's health checks see it (``UP``, ``DOWN``,
        ``UP 1/2`` while going down, ``DOWN 1/2`` while coming up …)."""
        return {row["svname"]: row["status"] for row in self.stats()}

    def wait_status(
        self, wanted: dict[str, str], *, timeout: float = 10.0, checked: bool = False
    ) -> None:
        """Wait (bounded) until every server named in ``wanted`` has that state (an
        empty ``wanted``: until HAProxy answers at all). With ``checked``, each of them
        must also have been health-checked once (HAProxy counts a server up before its
        first check)."""
        deadline = time.monotonic() + timeout
        rows: list[dict[str, str]] | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"haproxy exited early:\n{self.log()}")
            try:
                rows = self.stats()
            except httpx.TransportError:
                rows = None
            if rows is not None and _matches(rows, wanted, checked=checked):
                return
            time.sleep(0.05)
        raise AssertionError(
            f"haproxy servers {rows}, expected {wanted} after {timeout} s\n{self.log()}"
        )

    def log(self) -> str:
        """What HAProxy printed (its log lines, one per request, and its alerts)."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")


def _matches(rows: list[dict[str, str]], wanted: dict[str, str], *, checked: bool) -> bool:
    by_name = {row["svname"]: row for row in rows}
    for name, state in wanted.items():
        row = by_name.get(name)
        if row is None or row["status"] != state:
            return False
        if checked and row.get("check_status", "").lstrip("* ") in ("", "INI"):
            return False
    return True

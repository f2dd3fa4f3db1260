"""Clients through HAProxy in front of a perdure cluster (``tests/support/cluster.py``).

Real ``perdure serve tests.support.apps.compat:registry`` nodes on one PostgreSQL schema, and a
real HAProxy in front of them (round robin, no stickiness, health checks on ``/health``,
a refused connection retried on another node). Clients know only the balancer's URL:

- the Python client and the official RivetKit client (``balancer.mts``, run with
  ``tests/scenarios/compat``'s runner, in ``json``, ``cbor`` and ``bare``): actions, queue sends
  with wait and a WebSocket connection receiving events, while the balancer spreads the
  requests over every node (the cluster forwards each to the actor's node); then the
  actors' node is killed (SIGKILL) and the same actors answer again through the balancer
  within :data:`TAKEOVER_LIMIT` seconds;
- a rolling restart (SIGTERM one node at a time, start it again) under a steady stream
  of requests;
- :func:`test_single_node_behind_the_balancer` checks the harness itself with one node
  started without the node flags;
- :func:`test_deploy_doc_haproxy_config`: the HAProxy configuration printed in
  docs/deploy.md is valid and has the harness's settings.

Without PostgreSQL, HAProxy, or (for the official client) Node.js and ``npm ci`` in
tests/scenarios/compat, the tests are skipped; with ``CI=true`` they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from perdure.client import ActorError, AsyncClient, TransportError, create_client
from tests.scenarios.compat.runner import ProgramRun, node_or_skip, run_program
from tests.support.cluster import Balancer, Cluster, ClusterNode, haproxy_config, require_haproxy
from tests.support.server import REPO_ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(180)]

REGISTRY = "tests.support.apps.compat:registry"
ENCODINGS = ["json", "cbor", "bare"]
NODES = 3
LEASE_TTL = 2.0  # seconds: how long a killed node's actors wait before a takeover
TAKEOVER_LIMIT = 10.0  # seconds from the kill until every actor answers again
PROGRAM = "../cluster/balancer.mts"  # relative to tests/scenarios/compat, where the runner runs it
PROGRAM_TIMEOUT = 60.0

T = TypeVar("T")


@contextlib.contextmanager
def _logs_on_failure(cluster: Cluster, balancer: Balancer | None = None) -> Iterator[None]:
    """On a failure, print the nodes' and HAProxy's logs (pytest shows them)."""
    try:
        yield
    except BaseException:
        print(cluster.logs()[-12000:])
        if balancer is not None:
            print("===== haproxy =====\n" + balancer.log()[-6000:])
        raise


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(REGISTRY, NODES, base_dir=tmp_path, lease_ttl=LEASE_TTL) as running:
        yield running


@pytest.fixture
def balancer(cluster: Cluster, tmp_path: Path) -> Iterator[Balancer]:
    with Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as running:
        yield running


async def _retrying(
    call: Callable[..., Awaitable[T]], *args: Any, limit: float, errors: list[str] | None = None
) -> T:
    """``call(*args)`` until it succeeds, for at most ``limit`` seconds (a node's death shows
    as refused connections, ``actor.unavailable`` and the like until the takeover)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return await call(*args)
        except (ActorError, TransportError) as exc:
            if errors is not None:
                errors.append(f"{type(exc).__name__}: {exc}")
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _node_ids(url: str, count: int) -> list[str]:
    async with httpx.AsyncClient(timeout=5) as http:
        return [(await http.get(f"{url}/health")).json()["node"]["id"] for _ in range(count)]


async def _subscribed(client: AsyncClient, key: list[str]) -> tuple[Any, list[Any]]:
    """A connection to counter ``key`` collecting ``newCount`` (subscribed on return)."""
    conn = client.compatCounter.get_or_create(key).connect()
    got: list[Any] = []
    conn.on("newCount", got.append)
    await conn.wait_open()
    await conn.getState()  # the subscription went first on the same socket
    return conn, got


async def _until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _exercise(url: str, encoding: str, tag: str, *, first: int) -> None:
    """Actions, queue sends with wait and events on a connection, through ``url``; the
    counter ``counter-<tag>`` is at ``first - 1`` and ends at ``first + 9``."""
    async with create_client(url, encoding=encoding, timeout=20) as client:
        counter = client.compatCounter.get_or_create([f"counter-{tag}"])
        worker = client.compatWorker.get_or_create([f"worker-{tag}"])
        counts = [await counter.increment(1) for _ in range(6)]
        assert counts == list(range(first, first + 6))
        results = [await worker.send("jobs", n, wait=True, timeout=5) for n in (1, 2, 3)]
        assert results == [{"status": "completed", "response": n * 2} for n in (1, 2, 3)]
        conn, got = await _subscribed(client, [f"counter-{tag}"])
        try:
            counts = [await counter.increment(1) for _ in range(3)]
            counts.append(await conn.increment(1))
            expected = list(range(first + 6, first + 10))
            await _until(lambda: got[-4:] == expected, "four events")
            # A perdure connection also gets what was emitted up to a second before
            # connect() (docs/events.md): every event once, in order.
            assert counts == expected
            assert got == list(range(got[0], first + 10))
        finally:
            await conn.dispose()


# ------------------------------------------------------------------ the Python client


async def test_python_client_through_the_balancer(cluster: Cluster, balancer: Balancer) -> None:
    with _logs_on_failure(cluster, balancer):
        ids = await _node_ids(balancer.url, 2 * NODES)
        assert sorted(set(ids)) == [node.node_id for node in cluster.nodes], ids

        run = secrets.token_hex(4)
        home = cluster.node(0)
        # Woken directly on node 0 first, so they live there; then everything goes
        # through the balancer, which hands two requests in three to the other nodes.
        async with create_client(home.url) as direct:
            for encoding in ENCODINGS:
                tag = f"{encoding}-{run}"
                assert (await direct.compatCounter.get_or_create([f"counter-{tag}"]).getState())[
                    "count"
                ] == 0
                await direct.compatWorker.get_or_create([f"worker-{tag}"]).getState()
        for encoding in ENCODINGS:
            await _exercise(balancer.url, encoding, f"{encoding}-{run}", first=1)

        home.kill()
        killed_at = time.monotonic()
        errors: list[str] = []
        for encoding in ENCODINGS:  # every actor answers within TAKEOVER_LIMIT of the kill
            tag = f"{encoding}-{run}"
            async with create_client(balancer.url, encoding=encoding, timeout=5) as client:
                counter = client.compatCounter.get_or_create([f"counter-{tag}"])
                left = TAKEOVER_LIMIT - (time.monotonic() - killed_at)
                assert await _retrying(counter.increment, 1, limit=left, errors=errors) == 11
        print(f"answered {time.monotonic() - killed_at:.2f} s after the kill; meanwhile: {errors}")
        for encoding in ENCODINGS:
            await _exercise(balancer.url, encoding, f"{encoding}-{run}", first=12)
        balancer.wait_status({home.node_id: "DOWN"})
        survivors = set(await _node_ids(balancer.url, 2 * NODES))
        assert survivors == {n.node_id for n in cluster.nodes[1:]}


# ---------------------------------------------------------- the official client


def _assert_passed(run: ProgramRun, expected: set[str]) -> None:
    report = run.report()
    assert not run.timed_out, f"the program did not finish in time\n{report}"
    assert run.done is not None, f"the program ended without its summary\n{report}"
    assert not run.failed, f"{len(run.failed)} check(s) failed\n{report}"
    assert {c["check"] for c in run.checks} == expected, report
    assert run.returncode == 0, report


BEFORE = {"wake-on-home", "round-robin", "actions", "queue-send-wait", "events"}
AFTER = {"takeover-action", "takeover-queue-send-wait", "takeover-events", "survivors-answer"}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_official_client_through_the_balancer(
    encoding: str, cluster: Cluster, balancer: Balancer
) -> None:
    node_or_skip()
    tag = f"{encoding}-{secrets.token_hex(4)}"
    home = cluster.node(0)
    with _logs_on_failure(cluster, balancer):
        before = run_program(
            PROGRAM,
            [balancer.url, encoding, "before", tag, home.url, str(NODES)],
            timeout=PROGRAM_TIMEOUT,
        )
        _assert_passed(before, BEFORE)
        home.kill()
        killed_at = time.monotonic()
        args = [balancer.url, encoding, "after", tag]
        after = run_program(PROGRAM, args, timeout=PROGRAM_TIMEOUT)
        _assert_passed(after, AFTER)
        takeover = next(c for c in after.checks if c["check"] == "takeover-action")
        assert takeover["detail"]["ms"] <= TAKEOVER_LIMIT * 1000, after.report()
        assert home.node_id not in takeover["detail"]["nodes"], after.report()
        print(f"{encoding}: the program ended {time.monotonic() - killed_at:.2f} s after the kill")
        print(f"takeover: {takeover['detail']}")


# ------------------------------------------------------------------ rolling restart


class _Load:
    """Increments of one counter through the balancer, one after the other, in a thread,
    until stopped; a request that fails is retried (bounded) and counted. A connection
    to the counter (through the balancer too) collects its events and counts its opens."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.key = key
        self.counts: list[int] = []
        self.failures: list[str] = []
        self.ambiguous = 0  # failures after which the increment may have applied
        self.events: list[int] = []
        self.opens = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the load did not stop"

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except BaseException as exc:
            self.error = exc

    def _opened(self) -> None:
        self.opens += 1

    async def _loop(self) -> None:
        async with create_client(self.url, timeout=10, max_reconnect_delay=1.0) as client:
            counter = client.compatCounter.get_or_create([self.key])
            conn = counter.connect()
            conn.on("newCount", self.events.append)
            conn.on_open(self._opened)
            await conn.wait_open()
            while not self._stop.is_set():
                deadline = time.monotonic() + TAKEOVER_LIMIT
                while True:
                    try:
                        self.counts.append(await counter.increment(1))
                        break
                    except (ActorError, TransportError) as exc:
                        self.failures.append(f"{type(exc).__name__}: {exc}")
                        if isinstance(exc, TransportError):
                            self.ambiguous += 1
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.1)
                await asyncio.sleep(0.01)


def test_rolling_restart_through_the_balancer(cluster: Cluster, balancer: Balancer) -> None:
    """SIGTERM one node at a time (it drains and exits 0), start it again, wait until
    the balancer sends it requests again, go on to the next; the requests of a steady
    client never fail for good, the counter loses nothing, and a WebSocket connection
    through the balancer reconnects by itself and receives events after the last restart."""
    key = f"rolling-{secrets.token_hex(4)}"
    with _logs_on_failure(cluster, balancer), _Load(balancer.url, key) as load:
        for node in cluster.nodes:
            _wait_for_progress(load, 20)
            assert node.terminate() == 0
            balancer.wait_status({node.node_id: "DOWN"})
            _wait_for_progress(load, 20)
            node.restart()
            balancer.wait_status({node.node_id: "UP"}, checked=True)
        _wait_for_progress(load, 20)
        _wait_for_event(load, at_least=load.counts[-1])
    with _logs_on_failure(cluster, balancer):
        assert load.error is None, (load.error, load.failures)
        counts = load.counts
        assert counts == sorted(set(counts)), "answers out of order or repeated"
        final = httpx.post(
            f"{balancer.url}/gateway/compatCounter/action/getState?rvt-method=get&rvt-key={key}",
            json={"args": []},
            timeout=5,
        ).json()["output"]["count"]
        # Every answered increment is counted once; a failed one may have applied too.
        assert len(counts) <= final <= len(counts) + load.ambiguous, (final, len(counts))
        # Each node was stopped once, so the socket's node was too: it reconnected.
        assert load.opens >= 2, load.opens
        print(
            f"{len(counts)} increments, {len(load.failures)} retried: {load.failures}; "
            f"{len(load.events)} events, connection opened {load.opens} times"
        )


def _wait_for_event(load: _Load, *, at_least: int, timeout: float = 10.0) -> None:
    """Wait (bounded) until the connection has delivered an event ``>= at_least``."""
    deadline = time.monotonic() + timeout
    while not (load.events and load.events[-1] >= at_least):
        assert time.monotonic() < deadline, (
            f"no event >= {at_least} (last: {load.events[-3:]}, opens: {load.opens})"
        )
        time.sleep(0.02)


def _wait_for_progress(load: _Load, n: int, timeout: float = 20.0) -> None:
    """Wait (bounded) until the load has made ``n`` more increments."""
    target = len(load.counts) + n
    deadline = time.monotonic() + timeout
    while len(load.counts) < target:
        assert load.error is None, (load.error, load.failures)
        assert time.monotonic() < deadline, f"no progress: {load.failures[-5:]}"
        time.sleep(0.02)


# ------------------------------------------------------------------ the harness itself


def test_single_node_behind_the_balancer(tmp_path: Path) -> None:
    """One node started without the node flags, behind HAProxy: the Python client works
    through it; a killed node leaves the rotation (HAProxy answers 503 at once, no node
    left); started again on the same store, it answers with the state it had."""
    tag = f"single-{secrets.token_hex(4)}"
    with (
        Cluster(REGISTRY, 1, base_dir=tmp_path, node_flags=False) as cluster,
        Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as balancer,
        _logs_on_failure(cluster, balancer),
    ):
        node: ClusterNode = cluster.node(0)
        asyncio.run(_single_node_python(balancer.url, node.url, tag))

        node.kill()
        balancer.wait_status({node.node_id: "DOWN"})
        assert httpx.get(f"{balancer.url}/health", timeout=5).status_code == 503
        node.restart()
        balancer.wait_status({node.node_id: "UP"}, checked=True)
        asyncio.run(_single_node_python_after(balancer.url, tag))


async def _single_node_python(url: str, home: str, tag: str) -> None:
    async with create_client(home) as direct:
        await direct.compatCounter.get_or_create([f"counter-{tag}"]).getState()
    await _exercise(url, "cbor", tag, first=1)


async def _single_node_python_after(url: str, tag: str) -> None:
    async with create_client(url) as client:
        counter = client.compatCounter.get_or_create([f"counter-{tag}"])
        assert await _retrying(counter.increment, 1, limit=TAKEOVER_LIMIT) == 11


def test_single_node_official_client_behind_the_balancer(tmp_path: Path) -> None:
    """The official client's first phase through HAProxy and one node (no node flags)."""
    node_or_skip()
    with (
        Cluster(REGISTRY, 1, base_dir=tmp_path, node_flags=False) as cluster,
        Balancer.in_front_of(cluster.nodes, base_dir=tmp_path) as balancer,
        _logs_on_failure(cluster, balancer),
    ):
        tag = f"single-{secrets.token_hex(4)}"
        for encoding in ENCODINGS:
            run = run_program(
                PROGRAM,
                [balancer.url, encoding, "before", f"{encoding}-{tag}", cluster.urls[0], "1"],
                timeout=PROGRAM_TIMEOUT,
            )
            _assert_passed(run, BEFORE)


# ------------------------------------------------------------------ the deployment guide

# What the guide's configuration must share with the harness's: balancing, stickiness
# (none), WebSocket tunnel, retries on another node, health checks.
SHARED_DIRECTIVES = [
    "mode http",
    "timeout tunnel 1h",
    "retries 3",
    "option redispatch 1",
    "retry-on conn-failure",
    "balance roundrobin",
    "option httpchk GET /health",
    "http-check expect status 200",
]


def test_deploy_doc_haproxy_config(tmp_path: Path) -> None:
    haproxy = require_haproxy()
    text = (REPO_ROOT / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```haproxy\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/deploy.md should hold one haproxy block"
    path = tmp_path / "haproxy.cfg"
    path.write_text(blocks[0])
    check = subprocess.run(
        [haproxy, "-c", "-f", str(path)], capture_output=True, text=True, timeout=15
    )
    assert check.returncode == 0, check.stdout + check.stderr
    harness = haproxy_config([("node-0", "127.0.0.1:1")], port=2, stats_port=3)
    for config in (blocks[0], harness):
        lines = {line.strip() for line in config.splitlines()}
        missing = [d for d in SHARED_DIRECTIVES if d not in lines]
        assert not missing, f"missing {missing} in:\n{config}"
        assert any(line.startswith("default-server check inter") for line in lines)
        assert not any(line.startswith(("cookie", "stick", "balance source")) for line in lines)

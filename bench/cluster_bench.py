"""The cluster: several ``perdure serve`` nodes on one PostgreSQL (run by hand, not a test).

::

    python bench/cluster_bench.py                  # everything below, a few minutes
    python bench/cluster_bench.py --quick          # small counts: a smoke run (~30 s)
    python bench/cluster_bench.py --only throughput --runs 3
    python bench/cluster_bench.py --only failover --ttl 5 2
    python bench/cluster_bench.py --only throughput --nodes 1 3 --throughput-ttl 1.5 --pg-waits

Three measurements, each on real nodes (``tests.support.cluster``: ``perdure serve``
subprocesses on a fresh PostgreSQL schema, dropped at the end, even on failure):

``throughput``
    The seed's 100-actor progress workload over HTTP on 1, 2 and 3 nodes: 100
    ``progressActor``s, each woken on node ``i % N`` first (an actor lives where its
    first request lands), then ``--jobs`` jobs per actor sent by 32 concurrent senders
    (raw keep-alive HTTP, ``rawhttp.py``), job ``j`` to actor ``j % 100`` through the
    nodes in turn (round robin, as a balancer without stickiness: ``(N-1)/N`` of the
    sends are forwarded to the owner), until every actor has completed its jobs. Also,
    for 2 and 3 nodes, ``owner`` routing: every send goes straight to its actor's node
    (what a key-aware balancer would do), which separates the cost of the hop from the
    cost of sharing two cores. CPU seconds of each node process, of the PostgreSQL
    backends serving them, of the load generator and of the whole machine come from
    ``/proc`` (``utime + stime``) before and after.
``forwarding``
    One action on one actor through a node that does not own it against through its
    owner (2 nodes): p50/p99 of ``--calls`` sequential calls each on kept-alive httpx
    clients, in alternating blocks (direct, forwarded, direct, ...), after a warm-up;
    ``get`` (read) and ``increment`` (one durable commit). Target: forwarded
    p50 <= 2 x direct p50 + 0.5 ms.
``failover``
    3 nodes; an actor woken on node X, a random 0..TTL seconds later called through the
    other two (forwarded) and X killed with SIGKILL (so at a random point of the lease's
    renewal cycle, which runs every TTL/3); then the time until a survivor answers an
    action for it, asked through the survivors in turn, 20 ms after each failed answer
    (a survivor holds the request itself, retrying every 100 ms until the lease lapses,
    so one request usually suffices); then X is restarted. ``--kills`` times with X
    rotating over the nodes, for each ``--ttl`` (lease TTL, seconds). Target: p99 <= 10
    s. Checks that the answer carries every increment made before the kill.

The machine is shared and has 2 cores: the nodes, PostgreSQL and the load generator
all run on them, so read a node count as processes sharing two cores, not as machines;
the CPU columns show where the cores went.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx
import psycopg
from psycopg import sql
from rawhttp import RawConnection
from tests.support.cluster import Cluster, ClusterNode
from tests.support.postgres import POSTGRES_URL

PROGRESS_APP = "examples.app:registry"
COUNTER_APP = "bench/latency_app.py:registry"
NODE_ARGS = ["--log-level", "warning"]
SENDERS = 32
DEFAULT_TTL = 5.0
POLL_PAUSE = 0.02
TICK = os.sysconf("SC_CLK_TCK")
JSON_HEADERS = {"content-type": "application/json", "x-rivet-encoding": "json"}
ACTION_BODY = b'{"args":[]}'


# --------------------------------------------------------------------------- helpers


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; 0 if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def machine_busy() -> float:
    """CPU seconds the whole machine has spent not idle (every process, all cores)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / TICK


def postgres_backends(pids: Sequence[int]) -> list[int]:
    """The PostgreSQL backend processes connected to these client processes (their
    pool connections), found by matching the clients' TCP ports in pg_stat_activity."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        inodes.update(link[8:-1] for link in links if link.startswith("socket:["))
    ports: list[int] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[9] in inodes and parts[2].endswith(":1538"):  # remote port 5432
                ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    if not ports:
        return []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", (ports,)
        ).fetchall()
    return [int(row[0]) for row in rows]


@dataclass
class CpuMeter:
    """CPU seconds of node processes, their PostgreSQL backends, this process and the
    machine, between :meth:`start` and :meth:`stop`."""

    nodes: Sequence[ClusterNode]
    wall: float = 0.0
    per_node: list[float] = field(default_factory=list)
    postgres: float = 0.0
    client: float = 0.0
    machine: float = 0.0
    _start: dict[str, Any] = field(default_factory=dict)

    def _snapshot(self) -> dict[str, Any]:
        pids = [node.pid for node in self.nodes]
        backends = postgres_backends(pids)
        times = os.times()
        return {
            "wall": time.perf_counter(),
            "nodes": [process_cpu(pid) for pid in pids],
            "backends": {pid: process_cpu(pid) for pid in backends},
            "client": times.user + times.system,
            "machine": machine_busy(),
        }

    def start(self) -> None:
        self._start = self._snapshot()

    def stop(self) -> None:
        end, start = self._snapshot(), self._start
        self.wall = end["wall"] - start["wall"]
        self.per_node = [b - a for a, b in zip(start["nodes"], end["nodes"], strict=True)]
        # A backend that appeared meanwhile counts from zero; one that left is lost
        # (the pools keep their connections, so that is rare).
        self.postgres = sum(
            cpu - start["backends"].get(pid, 0.0) for pid, cpu in end["backends"].items()
        )
        self.client = end["client"] - start["client"]
        self.machine = end["machine"] - start["machine"]


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


@contextmanager
def cluster(registry: str, size: int, lease_ttl: float) -> Iterator[Cluster]:
    """``size`` nodes on a fresh schema; every node killed and the schema dropped on exit
    (the drop is retried for a minute: the shared PostgreSQL may be restarting)."""
    with tempfile.TemporaryDirectory(prefix="perdure-cluster-bench-") as tmp:
        nodes = Cluster(
            registry,
            size,
            base_dir=Path(tmp),
            lease_ttl=lease_ttl,
            schema=f"perdure_bench_{secrets.token_hex(5)}",
            extra_args=NODE_ARGS,
        )
        try:
            nodes.start()
            yield nodes
        except BaseException:
            for node in nodes.nodes:  # what the nodes said, before their directory goes
                tail = "\n".join(node.log().splitlines()[-30:])
                print(f"===== {node.node_id} (last lines) =====\n{tail}", file=sys.stderr)
            raise
        finally:
            for node in nodes.nodes:
                node.kill()
            _drop_schema(nodes.schema)


def _drop_schema(schema: str, patience: float = 60.0) -> None:
    deadline = time.monotonic() + patience
    while True:
        try:
            with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                print(f"could not drop schema {schema}: {exc}", file=sys.stderr)
                return
            time.sleep(1.0)


def gateway_path(name: str, route: str, key: str) -> str:
    return f"/gateway/{name}/{route}?rvt-method=getOrCreate&rvt-key={key}"


# ------------------------------------------------------------------------ throughput


@dataclass
class ThroughputResult:
    nodes: int
    routing: str
    jobs: int
    seconds: float
    forwarded: int
    owners: list[int]
    cpu: CpuMeter
    stats: SendStats

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


@dataclass
class SendStats:
    """Every send's round trip (s), queue-full answers, and connections reopened."""

    sends: list[float] = field(default_factory=list)
    full: int = 0
    reconnects: int = 0


async def _drive_progress(
    nodes: Sequence[ClusterNode], actors: int, jobs_per_actor: int, routing: str
) -> tuple[float, int, CpuMeter, SendStats]:
    count = len(nodes)
    owner = [index % count for index in range(actors)]
    queue_paths = [gateway_path("progressActor", "queue/jobs", f"a{i}") for i in range(actors)]
    state_paths = [gateway_path("progressActor", "action/getState", f"a{i}") for i in range(actors)]
    job_body = b'{"name":"jobs","body":{"value":1},"wait":false}'

    async def completed(connection: RawConnection, actor: int) -> int:
        answer = await connection.send(connection.request(state_paths[actor], ACTION_BODY))
        return int(json.loads(answer)["output"]["progress"]["completed"])

    # Wake actor i on node i % N, then ask every node about it (warms the owner caches
    # and the kept-alive connections between nodes); none of this is timed.
    async def warm(worker: int) -> None:
        connections = [RawConnection(node.url) for node in nodes]
        for connection in connections:
            await connection.__aenter__()
        try:
            for actor in range(worker, actors, SENDERS):
                await completed(connections[owner[actor]], actor)
            for actor in range(worker, actors, SENDERS):
                for connection in connections:
                    await completed(connection, actor)
        finally:
            for connection in connections:
                await connection.__aexit__(None, None, None)

    await asyncio.gather(*(warm(worker) for worker in range(SENDERS)))

    total = actors * jobs_per_actor
    clock = time.perf_counter
    next_job = 0
    forwarded = 0

    async def sender() -> None:
        nonlocal next_job, forwarded
        connections = [RawConnection(node.url) for node in nodes]
        for connection in connections:
            await connection.__aenter__()
        requests = [[c.request(path, job_body) for path in queue_paths] for c in connections]
        try:
            while next_job < total:
                job = next_job
                next_job += 1
                actor = job % actors
                # Round robin: the k-th job of actor a goes through node (a + k * 101) % N.
                round_robin = (job + job // actors) % count
                node = owner[actor] if routing == "owner" else round_robin
                forwarded += node != owner[actor]
                while True:
                    began = clock()
                    try:
                        status, answer = await connections[node].exchange(requests[node][actor])
                    except (asyncio.IncompleteReadError, ConnectionError):
                        # The node closed the connection without an answer (uvicorn
                        # closes one idle past its 5 s keep-alive timeout); send again on
                        # a new one. Counted: a duplicate job would show as completed >
                        # jobs, which the completion check tolerates (it waits for >=).
                        stats.reconnects += 1
                        await connections[node].__aexit__(None, None, None)
                        connections[node] = RawConnection(nodes[node].url)
                        await connections[node].__aenter__()
                        continue
                    stats.sends.append(clock() - began)
                    if status == 200:
                        break
                    if b'"code":"full"' not in answer:
                        raise RuntimeError(answer.decode(errors="replace"))
                    stats.full += 1
                    await asyncio.sleep(0.05)  # back-pressure: the actor's queue is full
        finally:
            for connection in connections:
                await connection.__aexit__(None, None, None)

    stats = SendStats()
    meter = CpuMeter(nodes)
    meter.start()
    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(SENDERS)))
    # Done when every actor has completed its jobs (asked of its owner, one at a time:
    # they all progress at once, so this costs a few requests past the last one).
    owners_connections = [RawConnection(node.url) for node in nodes]
    for connection in owners_connections:
        await connection.__aenter__()
    try:
        for actor in range(actors):
            while await completed(owners_connections[owner[actor]], actor) < jobs_per_actor:
                await asyncio.sleep(POLL_PAUSE)
    finally:
        for connection in owners_connections:
            await connection.__aexit__(None, None, None)
    seconds = time.perf_counter() - started
    meter.stop()
    return seconds, forwarded, meter, stats


class WaitSampler:
    """What PostgreSQL's backends wait on (``pg_stat_activity``, every 20 ms, in a thread
    of its own): a count per ``(state, wait_event_type, wait_event)``."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._running = False
        self._thread.join(5)

    def _sample(self) -> None:
        query = (
            "SELECT state, coalesce(wait_event_type, '-'), coalesce(wait_event, '-')"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND state <> 'idle' AND pid <> pg_backend_pid()"
        )
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            while self._running:
                for row in conn.execute(query).fetchall():
                    self.counts[row] += 1
                time.sleep(0.02)

    def report(self) -> str:
        return ", ".join(f"{'/'.join(k)} {n}" for k, n in self.counts.most_common(6))


def bench_throughput(
    size: int,
    routing: str,
    actors: int,
    jobs_per_actor: int,
    timeout: float,
    *,
    ttl: float = DEFAULT_TTL,
    waits: bool = False,
) -> ThroughputResult:
    with cluster(PROGRESS_APP, size, ttl) as nodes:
        sampler = WaitSampler() if waits else contextlib.nullcontext()
        with sampler:
            seconds, forwarded, meter, stats = asyncio.run(
                asyncio.wait_for(
                    _drive_progress(nodes.nodes, actors, jobs_per_actor, routing), timeout
                )
            )
        if isinstance(sampler, WaitSampler):
            print(f"  PostgreSQL waits (samples): {sampler.report()}", flush=True)
        listed = {n["node_id"]: int(n["actors"]) for n in nodes.live_nodes()}
        owners = [listed.get(node.node_id, 0) for node in nodes.nodes]
    return ThroughputResult(
        size, routing, actors * jobs_per_actor, seconds, forwarded, owners, meter, stats
    )


# ------------------------------------------------------------------------ forwarding


@dataclass
class ForwardingResult:
    action: str
    direct: list[float]
    forwarded: list[float]
    # CPU seconds per call: (owner node, other node) for each path
    direct_cpu: tuple[float, float]
    forwarded_cpu: tuple[float, float]

    def p(self, path: str, fraction: float) -> float:
        samples = self.direct if path == "direct" else self.forwarded
        return percentile(samples, fraction) * 1000

    @property
    def target_ms(self) -> float:
        return 2 * self.p("direct", 0.5) + 0.5


def _timed_block(client: httpx.Client, url: str, calls: int, samples: list[float]) -> None:
    clock = time.perf_counter
    for _ in range(calls):
        start = clock()
        response = client.post(url, content=ACTION_BODY)
        samples.append(clock() - start)
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text}")


def bench_forwarding(calls: int, block: int, warmup: int) -> list[ForwardingResult]:
    results: list[ForwardingResult] = []
    with cluster(COUNTER_APP, 2, DEFAULT_TTL) as nodes:
        owner, other = nodes.nodes
        clients = [httpx.Client(headers=JSON_HEADERS, timeout=10) for _ in range(2)]
        try:
            direct_client, forward_client = clients
            for action in ("get", "increment"):
                path = gateway_path("counter", f"action/{action}", "forwarding")
                direct_url, forward_url = owner.url + path, other.url + path
                # The first request lands on the owner: the actor is woken (and leased) there.
                _timed_block(direct_client, direct_url, warmup, [])
                _timed_block(forward_client, forward_url, warmup, [])
                listed = {n["node_id"]: int(n["actors"]) for n in nodes.live_nodes()}
                if listed.get(owner.node_id) != 1 or listed.get(other.node_id) != 0:
                    raise RuntimeError(f"the actor is not where expected: {listed}")
                samples: dict[str, list[float]] = {"direct": [], "forwarded": []}
                cpu = {"direct": [0.0, 0.0], "forwarded": [0.0, 0.0]}
                done = 0
                while done < calls:
                    size = min(block, calls - done)
                    for kind, client, url in (
                        ("direct", direct_client, direct_url),
                        ("forwarded", forward_client, forward_url),
                    ):
                        before = (process_cpu(owner.pid), process_cpu(other.pid))
                        _timed_block(client, url, size, samples[kind])
                        cpu[kind][0] += process_cpu(owner.pid) - before[0]
                        cpu[kind][1] += process_cpu(other.pid) - before[1]
                    done += size
                results.append(
                    ForwardingResult(
                        action,
                        samples["direct"],
                        samples["forwarded"],
                        (cpu["direct"][0] / calls, cpu["direct"][1] / calls),
                        (cpu["forwarded"][0] / calls, cpu["forwarded"][1] / calls),
                    )
                )
        finally:
            for client in clients:
                client.close()
    return results


# -------------------------------------------------------------------------- failover


@dataclass
class FailoverRound:
    killed: str
    seconds: float
    answered_by: str
    attempts: int
    errors: dict[str, int]


def _call(client: httpx.Client, url: str) -> tuple[int, Any]:
    response = client.post(url, content=ACTION_BODY)
    body = response.json() if response.content else None
    return response.status_code, body


def _failover_round(
    nodes: Cluster,
    victim: int,
    key: str,
    limit: float,
    clients: list[httpx.Client],
    delay: float,
) -> FailoverRound:
    node = nodes.node(victim)
    increments = 5
    increment = gateway_path("counter", "action/increment", key)
    get = gateway_path("counter", "action/get", key)
    for _ in range(increments):  # the first request lands on the victim: it owns the actor
        status, body = _call(clients[victim], node.url + increment)
        if status != 200:
            raise RuntimeError(f"increment on {node.node_id}: {status} {body}")
    # Killed at a random point of the lease's renewal cycle, not right after it was taken.
    time.sleep(delay)
    survivors = [i for i in range(len(nodes.nodes)) if i != victim]
    for index in survivors:  # forwarded to the victim: each survivor knows the owner
        status, body = _call(clients[index], nodes.node(index).url + get)
        if status != 200 or body["output"] != increments:
            raise RuntimeError(f"get via {nodes.node(index).node_id}: {status} {body}")

    started = time.monotonic()
    node.kill()  # SIGKILL, then reap
    attempts = 0
    errors: dict[str, int] = {}
    while True:
        index = survivors[attempts % len(survivors)]
        attempts += 1
        try:
            status, body = _call(clients[index], nodes.node(index).url + get)
        except httpx.HTTPError as exc:
            status, body = 0, {"code": type(exc).__name__}
        elapsed = time.monotonic() - started
        if status == 200:
            if body["output"] != increments:
                raise RuntimeError(f"after failover the count is {body['output']}, not 5")
            return FailoverRound(node.node_id, elapsed, nodes.node(index).node_id, attempts, errors)
        code = str((body or {}).get("code", status)) if isinstance(body, dict) else str(status)
        errors[code] = errors.get(code, 0) + 1
        if elapsed > limit:
            raise RuntimeError(f"no survivor answered within {limit} s: {errors}")
        time.sleep(POLL_PAUSE)


def bench_failover(kills: int, lease_ttl: float, seed: int) -> list[FailoverRound]:
    rounds: list[FailoverRound] = []
    limit = lease_ttl + 30.0
    rng = random.Random(seed)
    with cluster(COUNTER_APP, 3, lease_ttl) as nodes:
        ids = [node.node_id for node in nodes.nodes]
        clients = [
            httpx.Client(headers=JSON_HEADERS, timeout=httpx.Timeout(limit, connect=2.0))
            for _ in ids
        ]
        try:
            for index in range(kills):
                victim = index % len(ids)
                key = f"failover-{lease_ttl:g}-{index}"
                delay = rng.uniform(0, lease_ttl)
                rounds.append(_failover_round(nodes, victim, key, limit, clients, delay))
                last = rounds[-1]
                print(
                    f"  kill {index + 1}/{kills} ({delay:.2f} s after waking): "
                    f"{last.killed} -> {last.answered_by} "
                    f"in {last.seconds:.2f} s ({last.attempts} requests, {last.errors})",
                    flush=True,
                )
                clients[victim].close()  # its connection went with the node
                clients[victim] = httpx.Client(
                    headers=JSON_HEADERS, timeout=httpx.Timeout(limit, connect=2.0)
                )
                nodes.node(victim).restart()
                nodes.wait_members(ids, timeout=30)
        finally:
            for client in clients:
                client.close()
    return rounds


# ------------------------------------------------------------------------------ main


def _postgres_or_exit() -> None:
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise SystemExit(f"PostgreSQL at {POSTGRES_URL} does not answer: {exc}") from None


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # unwinds: nodes killed, schemas dropped


def report_throughput(results: list[ThroughputResult]) -> None:
    print("\nthroughput: 100-actor progress over HTTP (jobs/s; CPU seconds over the run)")
    print(
        f"{'nodes':>5} {'routing':<11} {'jobs/s':>7} {'s':>6} {'fwd':>5} {'owners':<10} "
        f"{'CPU per node':<18} {'nodes':>6} {'PG':>5} {'client':>6} {'machine':>7} {'cores':>5}"
    )
    for r in results:
        cpu = r.cpu
        per_node = "/".join(f"{c:.1f}" for c in cpu.per_node)
        print(
            f"{r.nodes:>5} {r.routing:<11} {r.jobs_per_s:>7.0f} {r.seconds:>6.2f} "
            f"{r.forwarded / r.jobs:>5.0%} {'/'.join(map(str, r.owners)):<10} {per_node:<18} "
            f"{sum(cpu.per_node):>6.1f} {cpu.postgres:>5.1f} {cpu.client:>6.1f} "
            f"{cpu.machine:>7.1f} {cpu.machine / cpu.wall:>5.2f}"
        )
    base = [r.jobs_per_s for r in results if r.nodes == 1]
    if base:
        one = statistics.median(base)
        for size in (2, 3):
            for routing in ("round-robin", "owner"):
                rows = [r.jobs_per_s for r in results if r.nodes == size and r.routing == routing]
                if rows:
                    ratio = statistics.median(rows) / one
                    print(f"  {size} nodes ({routing}) / 1 node: {ratio:.2f}")


def report_forwarding(results: list[ForwardingResult]) -> None:
    print("\nforwarding: one actor, sequential calls (ms); CPU µs per call (owner + other)")
    print(
        f"{'action':<10} {'direct p50':>10} {'p99':>7} {'fwd p50':>8} {'p99':>7} "
        f"{'fwd/dir':>7} {'target':>7} {'CPU direct':>12} {'CPU fwd':>12}"
    )
    for r in results:
        dp50, fp50 = r.p("direct", 0.5), r.p("forwarded", 0.5)
        verdict = "met" if fp50 <= r.target_ms else "MISSED"
        dcpu = f"{r.direct_cpu[0] * 1e6:.0f}+{r.direct_cpu[1] * 1e6:.0f}"
        fcpu = f"{r.forwarded_cpu[0] * 1e6:.0f}+{r.forwarded_cpu[1] * 1e6:.0f}"
        print(
            f"{r.action:<10} {dp50:>10.3f} {r.p('direct', 0.99):>7.3f} {fp50:>8.3f} "
            f"{r.p('forwarded', 0.99):>7.3f} {fp50 / dp50:>7.2f} {r.target_ms:>7.3f} "
            f"{dcpu:>12} {fcpu:>12}  {verdict}"
        )


def report_failover(ttl: float, rounds: list[FailoverRound]) -> None:
    seconds = [r.seconds for r in rounds]
    p99 = percentile(seconds, 0.99)
    print(
        f"\nfailover, lease TTL {ttl:g} s, {len(rounds)} kills: p50 "
        f"{percentile(seconds, 0.5):.2f} s, p99 {p99:.2f} s, max {max(seconds):.2f} s, "
        f"min {min(seconds):.2f} s  (target p99 <= 10 s: {'met' if p99 <= 10 else 'MISSED'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument(
        "--only", nargs="+", choices=["throughput", "forwarding", "failover"], default=None
    )
    parser.add_argument("--runs", type=int, help="throughput runs per row (default 2; quick 1)")
    parser.add_argument("--jobs", type=int, help="jobs per actor (default 30; quick 3)")
    parser.add_argument("--calls", type=int, help="calls per path (default 2000; quick 200)")
    parser.add_argument("--kills", type=int, help="kills per TTL (default 10; quick 2)")
    parser.add_argument("--ttl", type=float, nargs="+", help="lease TTLs (default 5 2; quick 2)")
    parser.add_argument("--nodes", type=int, nargs="+", help="throughput node counts")
    parser.add_argument(
        "--throughput-ttl", type=float, default=DEFAULT_TTL, help="lease TTL (throughput)"
    )
    parser.add_argument(
        "--pg-waits", action="store_true", help="sample PostgreSQL's wait events (throughput)"
    )
    parser.add_argument("--seed", type=int, default=1, help="when each kill happens (failover)")
    args = parser.parse_args()
    quick = args.quick
    runs = args.runs or (1 if quick else 2)
    jobs = args.jobs or (3 if quick else 30)
    calls = args.calls or (200 if quick else 2000)
    kills = args.kills or (2 if quick else 10)
    ttls = args.ttl or ([2.0] if quick else [5.0, 2.0])
    sizes = args.nodes or ([1, 2] if quick else [1, 2, 3])
    only = set(args.only or ["throughput", "forwarding", "failover"])

    signal.signal(signal.SIGTERM, _on_sigterm)
    _postgres_or_exit()
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")

    if "throughput" in only:
        results: list[ThroughputResult] = []
        for run in range(runs):  # the node counts alternate, so drift hits them alike
            for size in sizes:
                for routing in ["round-robin"] if size == 1 else ["round-robin", "owner"]:
                    result = bench_throughput(
                        size,
                        routing,
                        100,
                        jobs,
                        timeout=600,
                        ttl=args.throughput_ttl,
                        waits=args.pg_waits,
                    )
                    results.append(result)
                    sends = result.stats.sends
                    print(
                        f"  run {run + 1}: {size} node(s), {routing}: "
                        f"{result.jobs_per_s:.0f} jobs/s ({result.seconds:.2f} s); send p50 "
                        f"{percentile(sends, 0.5) * 1000:.1f} ms, p99 "
                        f"{percentile(sends, 0.99) * 1000:.1f} ms, max {max(sends) * 1000:.0f} "
                        f"ms; {result.stats.full} queue-full, "
                        f"{result.stats.reconnects} reconnects",
                        flush=True,
                    )
        report_throughput(results)
    if "forwarding" in only:
        report_forwarding(bench_forwarding(calls, block=max(1, calls // 4), warmup=200))
    if "failover" in only:
        for ttl in ttls:
            report_failover(ttl, bench_failover(kills, ttl, args.seed))
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()

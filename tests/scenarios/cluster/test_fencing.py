"""Fencing under pauses and partitions: the owner of an actor stopped with SIGSTOP past
its lease TTL, or cut off from PostgreSQL while it keeps its sockets, under writers that
go through the other nodes. A history checker (:mod:`tests.support.history`) looks at
every answer the clients got: every acknowledged write applied once, in real-time
order, no lost one; every read consistent with one order of the writes; and no request
answered by the old owner once the new one had answered.

The workload is a tagged counter (``taggedCounter`` in ``app.py``): 32 writers append
unique tokens through nodes 1 and 2 over HTTP (no retries: an error leaves the outcome
unknown), readers read through nodes 1 and 2 over HTTP, and two sockets read without
waiting for their answers (several reads in flight): one open on the owner itself, one
on node 1 (piped to the owner). The actor lives on node 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from perdure.client import (
    ActorError,
    AsyncActorConnection,
    AsyncActorHandle,
    TransportError,
    create_client,
)
from tests.support.cluster import Cluster, ClusterNode, store_url
from tests.support.history import History, Op, check, owners
from tests.support.postgres import POSTGRES_URL
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

REGISTRY = "tests.scenarios.cluster.app:registry"
TTL = 1.0  # seconds: the pause (2 × TTL) stays short
WRITERS = 32
KEY = ["fenced"]
FAILED = (TransportError, ActorError, TimeoutError)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three nodes, TTL 1 s, each reaching PostgreSQL through a TCP proxy of its own that
    the test controls (``cluster.proxies``)."""
    target = urlsplit(POSTGRES_URL)
    cluster = Cluster(REGISTRY, 3, base_dir=tmp_path, lease_ttl=TTL)
    proxies: list[TcpProxy] = []
    try:
        for index in range(3):
            proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432).start()
            proxies.append(proxy)
            proxied = target._replace(netloc=f"{target.username}@127.0.0.1:{proxy.port}")
            cluster.nodes[index] = ClusterNode(
                REGISTRY,
                tmp_path / f"node-{index}",
                store=store_url(cluster.schema, proxied.geturl()),
                node_id=f"node-{index}",
                lease_ttl=TTL,
                extra_args=["--store-timeout", "2"],
            )
        cluster.proxies = proxies  # type: ignore[attr-defined]
        yield cluster.start()
    finally:
        cluster.stop()
        for proxy in proxies:
            proxy.close()


class Workload:
    """The writers and readers of the module docstring, recording into ``history``."""

    def __init__(self, handles: list[AsyncActorHandle], sockets: dict[str, AsyncActorConnection]):
        self.handles = handles  # through nodes 1 and 2
        self.sockets = sockets
        self.history = History()
        self.running = True
        self.holding = False  # writers send nothing while set
        self.writing = 0  # writes in flight
        self.closes: dict[str, int] = dict.fromkeys(sockets, 0)
        for via, conn in sockets.items():
            conn.on_close(lambda *_, via=via: self._closed(via))

    def _closed(self, via: str) -> None:
        self.closes[via] += 1

    async def _write(self, k: int) -> None:
        handle = self.handles[k % 2]
        while self.running:
            if self.holding:
                await asyncio.sleep(0.01)
                continue
            token = self.history.token()
            op = self.history.begin("write", token, via=f"http node-{1 + k % 2}")
            self.writing += 1
            try:
                with contextlib.suppress(*FAILED):
                    self.history.answered(op, await handle.append(token))
            finally:
                self.writing -= 1
            if not op.ok:
                await asyncio.sleep(0.05)

    async def hold_writers(self) -> None:
        """Stop the writers and wait until none of their writes is in flight."""
        self.holding = True
        async with asyncio.timeout(10):
            while self.writing:
                await asyncio.sleep(0.001)

    async def _read(self, k: int) -> None:
        handle = self.handles[k % 2]
        while self.running:
            op = self.history.begin("read", via=f"http node-{1 + k % 2}")
            with contextlib.suppress(*FAILED):
                self.history.answered(op, await handle.read())
            await asyncio.sleep(0.02 if op.ok else 0.05)

    async def _read_over(self, via: str, conn: AsyncActorConnection) -> None:
        """Reads sent every 20 ms without waiting for the previous answers: those sent
        while the owner is paused wait in its socket and meet it when it resumes."""
        pending: set[asyncio.Task[None]] = set()

        async def one() -> None:
            op = self.history.begin("read", via=via)
            with contextlib.suppress(*FAILED):
                self.history.answered(op, await asyncio.wait_for(conn.read(), 15))

        while self.running:
            if len(pending) < 200:
                task = asyncio.create_task(one())
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.sleep(0.02)
        await asyncio.gather(*pending)

    async def run(self, during: Any) -> None:
        """Run the workload around ``await during()``, then stop it."""
        tasks = [asyncio.create_task(self._write(k)) for k in range(WRITERS)]
        tasks += [asyncio.create_task(self._read(k)) for k in range(4)]
        tasks += [asyncio.create_task(self._read_over(v, c)) for v, c in self.sockets.items()]
        try:
            await during()
        finally:
            self.running = False
            async with asyncio.timeout(30):
                await asyncio.gather(*tasks)


async def final_log(handle: AsyncActorHandle) -> list[int]:
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(*FAILED):
                return list(await handle.log())
            await asyncio.sleep(0.1)


Fault = Callable[[Workload], Awaitable[None]]


async def run_with(cluster: Cluster, fault: Fault) -> tuple[Workload, list[int]]:
    """Wake the actor on node 0, run the workload around ``fault``, and read the log."""
    owner, one, two = cluster.nodes[:3]
    async with (
        create_client(owner.url, retries=0) as on_owner,
        create_client(one.url, retries=0) as on_one,
        create_client(two.url, retries=0) as on_two,
    ):
        await on_owner.taggedCounter.get_or_create(KEY).read()  # it lives on node 0
        handles = [c.taggedCounter.get_or_create(KEY) for c in (on_one, on_two)]
        sockets = {
            "socket on node-0": on_owner.taggedCounter.get_or_create(KEY).connect(),
            "socket on node-1": on_one.taggedCounter.get_or_create(KEY).connect(),
        }
        for conn in sockets.values():
            await conn.wait_open(timeout=10)
        workload = Workload(handles, sockets)
        await workload.run(lambda: fault(workload))
        log = await final_log(handles[0])
        for conn in sockets.values():
            await conn.dispose()
    return workload, log


async def for_two_ttls(
    workload: Workload, quiet: bool, begin: Callable[[], None], end: Callable[[], None]
) -> float:
    """``begin()`` the fault, ``end()`` it 2 × TTL later; when it began (monotonic).
    ``quiet``: the writers hold from just before it until the lease has run out."""
    await asyncio.sleep(0.5)
    if quiet:
        await workload.hold_writers()
    began = time.monotonic()
    await asyncio.to_thread(begin)
    if quiet:
        await asyncio.sleep(TTL + 0.3)
        workload.holding = False
        await asyncio.sleep(TTL - 0.3)
    else:
        await asyncio.sleep(2 * TTL)
    await asyncio.to_thread(end)
    return began


def answered_by(history: History, pid: int) -> list[Op]:
    return [op for op in history.ops if op.ok and op.answered_by == pid]


def assert_one_takeover(workload: Workload, log: list[int], cluster: Cluster) -> set[int]:
    """The history is linearizable, node 0 answered before the fault and one other
    node after it, and no request was answered by node 0 once that node had answered
    one sent before it; both sockets were closed and then served by the new owner.
    Returns the new owner's pid (a set of one)."""
    history = workload.history
    owner, one, two = cluster.nodes[:3]
    summary = history.summary()
    problems = check(history, log) + owners(history, log)
    assert problems == [], f"{problems} {summary}"
    assert answered_by(history, owner.pid), summary
    new_owners = {op.answered_by for op in history.ops if op.ok} - {owner.pid}
    assert len(new_owners) == 1, new_owners
    assert new_owners <= {one.pid, two.pid}, new_owners
    assert summary["writes_ok"] > 100, summary
    assert summary["reads_ok"] > 100, summary
    assert all(n >= 1 for n in workload.closes.values()), workload.closes
    for via in workload.sockets:
        served = [op for op in history.reads if op.via == via and op.ok]
        assert served[-1].answered_by in new_owners, via
    return new_owners


QUIET = pytest.mark.parametrize("quiet", [False, True], ids=["writing", "quiet"])
"""``quiet``: the writers hold from just before the fault until the owner's lease has run
out (then write through whichever node takes the actor), so that the owner has no write
pending: the only requests waiting for it are the reads its sockets carry. (A stale
write reaching it first would be refused by the fence, which drops the instance and
fails the reads with it.)"""


@QUIET
async def test_a_paused_owner_answers_nothing_after_its_lease_is_taken(
    cluster: Cluster, quiet: bool
) -> None:
    """Node 0 is stopped (SIGSTOP) for 2 × TTL, then continued: everything queued for
    it meanwhile (forwarded writes, reads on its sockets) finds the actor given up."""
    owner = cluster.nodes[0]
    paused = 0.0

    async def pause(workload: Workload) -> None:
        nonlocal paused
        paused = await for_two_ttls(workload, quiet, owner.pause, owner.resume)
        await asyncio.sleep(1.5)

    workload, log = await run_with(cluster, pause)
    assert_one_takeover(workload, log, cluster)
    # Nothing sent while it was paused was answered by it.
    assert [op for op in answered_by(workload.history, owner.pid) if op.invoked > paused] == []


@QUIET
async def test_an_owner_cut_off_from_postgresql_stops_serving_and_rejoins(
    cluster: Cluster, quiet: bool
) -> None:
    """Node 0 keeps its sockets but its link to PostgreSQL goes dark (the proxy swallows
    every byte): it stops answering for the actor within the TTL (``quiet``: it answers
    reads from memory only while it trusts its lease, which ends before another node
    may take the actor), another node takes the actor over, and when the link returns
    node 0 is a live node again and its socket is served through it."""
    proxy: TcpProxy = cluster.proxies[0]  # type: ignore[attr-defined]
    marks: dict[str, float] = {}

    async def cut_off(workload: Workload) -> None:
        marks["cut"] = await for_two_ttls(workload, quiet, proxy.stall, proxy.resume)
        marks["healed"] = time.monotonic()
        async with asyncio.timeout(15):
            while "node-0" not in {n["node_id"] for n in await live_nodes(cluster)}:
                await asyncio.sleep(0.1)
        marks["rejoined"] = time.monotonic()
        async with asyncio.timeout(15):
            while not any(
                op.ok and op.via == "socket on node-0" and op.invoked > marks["rejoined"]
                for op in workload.history.reads
            ):
                await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)

    workload, log = await run_with(cluster, cut_off)
    assert_one_takeover(workload, log, cluster)
    # The last request node 0 answered was sent within the TTL of the cut (its answer
    # reaches the client a little later, on a loaded machine).
    last = max(op.invoked for op in answered_by(workload.history, cluster.nodes[0].pid))
    assert last - marks["cut"] < TTL, (
        f"node 0 answered a request sent {last - marks['cut']:.2f} s after the cut"
    )


async def live_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    return await asyncio.to_thread(cluster.live_nodes)


SOAK_FAULTS = 12


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_history_stays_linearizable_through_pauses_kills_and_cut_offs(
    cluster: Cluster,
) -> None:
    """The soak (about a minute): SOAK_FAULTS faults in turn on whichever node answers
    for the actor: SIGSTOP for 2 × TTL, kill -9 then restart, and its link to PostgreSQL
    cut for 2 × TTL; 1.5 s of load between faults. The actor moves back and forth, so
    only the linearizability check applies (not owners())."""
    proxies: list[TcpProxy] = cluster.proxies  # type: ignore[attr-defined]
    done: list[str] = []

    def holder(workload: Workload) -> ClusterNode:
        recent = [op for op in workload.history.ops if op.ok][-50:]
        pids = {op.answered_by for op in recent}
        for node in cluster.nodes:
            if node.running and node.pid in pids:
                return node
        return cluster.nodes[0]

    async def faults(workload: Workload) -> None:
        for index in range(SOAK_FAULTS):
            await asyncio.sleep(1.5)
            node = holder(workload)
            kind = ("pause", "kill", "cut")[index % 3]
            if kind == "pause":
                await for_two_ttls(workload, False, node.pause, node.resume)
            elif kind == "cut":
                proxy = proxies[cluster.nodes.index(node)]
                await for_two_ttls(workload, False, proxy.stall, proxy.resume)
            else:
                await asyncio.to_thread(node.kill)
                await asyncio.sleep(2 * TTL)
                await asyncio.to_thread(node.restart)
            done.append(f"{kind} {node.node_id}")
        await asyncio.sleep(1.5)

    workload, log = await run_with(cluster, faults)
    summary = workload.history.summary()
    problems = check(workload.history, log)
    assert problems == [], f"{problems} {summary} after {done}"
    assert len(done) == SOAK_FAULTS
    assert summary["writes_ok"] > 1000, summary
    print(f"soak: {done}; {summary}; {len(log)} writes applied")

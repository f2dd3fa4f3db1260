"""Three real nodes on one PostgreSQL survive ``kill -9``, SIGSTOP and a database restart.

The seed's progress workload runs with its sends spread over all three nodes and a
subscriber on one of them, while each node in turn is killed with SIGKILL and started
again; beside it two plain-protocol subscribers (JSON, no resume, as the official client
speaks), one moving to the next node whenever its socket closes and one staying on a
node that lives through the owner's death, must see no event twice and none out of order
(issue 33's done-when). Job ``i`` carries ``8**i``, so the final ``sum`` says how many
times each job was applied (one base-8 digit per job), as in ``tests/scenarios/crash``.
Sends whose outcome is unknown (their node died, or the owner stopped answering) are
re-sent afterwards only if their job is missing from the sum.

Beside it: a paused owner fenced, alarms and delayed sends of a killed node taken once
by a survivor when due, keyed sends retried after the owner's kill applied once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets.asyncio.client

from perdure.client import ActorError, AsyncActorHandle, AsyncClient, TransportError, create_client
from tests.support.admin_api import actor_details
from tests.support.cluster import Balancer, Cluster, ClusterNode
from tests.support.lost_answers import LoseAnswerAfter
from tests.support.plain_subscriber import OfficialSubscriber, PlainSubscriber
from tests.support.postgres import control_local_postgres, require_local_postgres, wait_postgres
from tests.support.progress import drained
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

JOBS = 2000
SENDERS = 24
BASE = 8
TTL = 2.0  # seconds: a killed node's actors are taken over after this
TAKEOVER_LIMIT = 10.0
# Errors after which a send's outcome is unknown (retried later if its job is missing).
_UNKNOWN = {"owner_unreachable", "owner_no_answer", "unavailable", "stopping", "internal_error"}


StartCluster = Callable[..., list[ClusterNode]]


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """Start ``size`` nodes (3 by default) on a fresh schema; all killed, the schema
    dropped, at the end of the test. Their steps note side effects in one file."""
    clusters: list[Cluster] = []

    def start(size: int = 3) -> list[ClusterNode]:
        cluster = Cluster(
            "tests.scenarios.cluster.app:registry",
            size,
            base_dir=tmp_path,
            lease_ttl=TTL,
            env={"PERDURE_SIDE_EFFECTS": str(tmp_path / "side-effects.txt")},
        )
        clusters.append(cluster)
        return cluster.start().nodes

    yield start
    for cluster in clusters:
        cluster.close()


# What a call may meet while a node dies or its actor moves: retried, not failed.
NODE_ERRORS = (TransportError, ActorError)


def digits(total: int) -> list[int]:
    return [(total // BASE**index) % BASE for index in range(JOBS)]


async def takeover_seconds(handles: list[AsyncActorHandle], killed: int) -> float:
    """How long until a survivor answers for the actor after node ``killed`` died."""
    started = time.monotonic()
    survivors = [h for i, h in enumerate(handles) if i != killed]
    async with asyncio.timeout(TAKEOVER_LIMIT + 20):
        while True:
            for handle in survivors:
                try:
                    await handle.getState()
                    return time.monotonic() - started
                except (TransportError, ActorError):
                    await asyncio.sleep(0.05)


def side_effect_runs(path: Path) -> Counter[int]:
    runs: Counter[int] = Counter()
    for line in path.read_text().splitlines():
        value = line.split()[0]
        if value.isdigit():
            runs[int(value).bit_length() // 3] += 1
    return runs


@pytest.mark.parametrize(
    "with_official",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["plain", "official"],
)
async def test_three_nodes_survive_each_node_killed_in_turn(
    tmp_path: Path, start_cluster: StartCluster, with_official: bool
) -> None:
    """``with_official`` (a slow run: a ``node`` process more on two cores): the official
    RivetKit client follows the events through node 3 as well, and must see none twice
    or out of order. Its CPU slows the actor, so senders may meet the queue's limit
    (``queue.full``: refused, nothing stored; the job is sent again at the end like an
    unknown one)."""
    nodes = await asyncio.to_thread(start_cluster)
    seed = int(os.environ.get("PERDURE_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    kill_points = sorted(rng.sample(range(200, JOBS - 200), 3))
    takeovers: list[float] = []
    unknown: set[int] = set()
    clients = [create_client(node.url, max_reconnect_delay=0.5) for node in nodes]
    try:
        for client in clients:
            await client.__aenter__()
        handles = [c.progressActor.get_or_create(["cluster"]) for c in clients]
        await handles[0].getState()  # the actor wakes on node 1, the first to be killed
        conn = handles[1].connect()  # the subscriber's node dies too, second
        events: list[tuple[str, int, int]] = []
        conn.on(
            "progressUpdated", lambda p: events.append((p["stage"], p["completed"], p["total"]))
        )
        await conn.wait_open(timeout=20)
        # Plain-protocol subscribers (JSON, no resume, as the official client speaks):
        # one moves to the next node whenever its socket closes, one stays on node 3
        # (killed last: it lives through the owner's death and the actor's move) and
        # leaves it only when it is dead.
        urls = [node.url for node in nodes]
        plain = {
            "moving": PlainSubscriber(
                urls,
                "progressActor",
                "cluster",
                "progressUpdated",
                lambda index, failed: (index + 1) % 3,
                start=0,
            ),
            "staying": PlainSubscriber(
                urls,
                "progressActor",
                "cluster",
                "progressUpdated",
                lambda index, failed: (index + 1) % 3 if failed else index,
                start=2,
            ),
        }
        for subscriber in plain.values():
            await subscriber.start().wait_open()
        # The official client through node 3 too (it reconnects there by itself).
        official = None
        if with_official:
            official = OfficialSubscriber(urls[2], "progressActor", "cluster", "progressUpdated")
            await asyncio.to_thread(official.start)

        jobs = list(range(JOBS))
        codes: list[str] = []  # the codes of errors answered to sends
        sent = 0
        kills = list(enumerate(kill_points))
        killing = asyncio.Lock()

        async def kill_and_restart(index: int) -> None:
            node = nodes[index]
            await asyncio.to_thread(node.kill)
            takeovers.append(await takeover_seconds(handles, index))
            await asyncio.to_thread(node.restart)

        async def sender(k: int) -> None:
            nonlocal sent
            while jobs:
                job = jobs.pop()
                handle = handles[(k + job) % len(handles)]
                try:
                    await handle.send("jobs", {"value": BASE**job})
                except TransportError:
                    unknown.add(job)
                    continue
                except ActorError as exc:
                    codes.append(exc.code)
                    unknown.add(job)
                    continue
                sent += 1
                if kills and sent >= kills[0][1] and not killing.locked():
                    index, _ = kills.pop(0)
                    async with killing:
                        await kill_and_restart(index)

        async with asyncio.timeout(240):
            await asyncio.gather(*(sender(k) for k in range(SENDERS)))
            # A kill point passed while another kill was under way: kill that node now.
            while kills:
                index, _ = kills.pop(0)
                await kill_and_restart(index)
        state = await drained(handles, timeout=90, retry_on=NODE_ERRORS)
        counts = digits(state["sum"])
        for job in sorted(j for j in unknown if counts[j] == 0):
            await handles[job % 3].send("jobs", {"value": BASE**job})
        state = await drained(handles, timeout=90, retry_on=NODE_ERRORS)
        await conn.dispose()
        for subscriber in plain.values():
            await subscriber.stop()
        if official is not None:
            await asyncio.to_thread(official.stop)
    finally:
        for client in clients:
            await client.__aexit__(None, None, None)
        for node in nodes:
            node.kill()

    context = f"seed={seed} kills={kill_points} unknown={len(unknown)} takeovers={takeovers}"
    allowed = _UNKNOWN | ({"full"} if with_official else set())
    assert set(codes) <= allowed, f"a send failed for another reason: {Counter(codes)}"
    counts = digits(state["sum"])
    assert counts == [1] * JOBS, f"jobs applied other than once ({context})"
    assert state["progress"] == {"stage": "completed", "completed": JOBS, "total": JOBS}
    assert [node.starts for node in nodes] == [2, 2, 2]
    assert len(takeovers) == 3
    assert max(takeovers) <= TAKEOVER_LIMIT, context
    runs = side_effect_runs(tmp_path / "side-effects.txt")
    assert set(runs) == set(range(JOBS))
    repeated = [job for job, count in runs.items() if count > 1]
    assert len(repeated) <= 3, f"{repeated} ({context})"  # at most one step per kill
    assert len(events) == len(set(events)), f"an event was delivered twice ({context})"
    assert len(events) >= JOBS // 2, f"only {len(events)} events ({context})"
    received = {name: subscriber.events for name, subscriber in plain.items()}
    if official is not None:
        received["official"] = official.events
    for name, got in received.items():
        # (total, completed) grows with every event the actor emits: strictly increasing
        # means each event at most once, in order (a plain client misses those emitted
        # while it reconnects).
        seen = [(args[0]["total"], args[0]["completed"]) for args in got]
        twice = len(seen) - len(set(seen))
        assert twice == 0, f"{name}: {twice} of {len(seen)} events twice ({context})"
        assert seen == sorted(seen), f"{name}: events out of order ({context})"
    for name, subscriber in plain.items():
        print(f"{name}: {len(subscriber.events)} events, sockets on nodes {subscriber.opened}")
        assert len(subscriber.events) >= JOBS // 2, f"{name}: too few events ({context})"
        assert len(subscriber.opened) >= 2, f"{name} never reconnected ({context})"
    if official is not None:
        # It reconnects (to node 3) after the owner's death closed its socket there; it
        # gives up (idle) when node 3 itself dies, as its reconnects to a dead endpoint
        # fail: what it received until then is checked above.
        print(
            f"official: {len(official.events)} events, statuses {official.statuses}, "
            f"errors {official.errors}"
        )
        assert official.statuses.count("connected") >= 2, official.statuses
        assert official.events, "the official client received no event"


async def test_a_paused_owner_is_fenced_and_drops_the_actor(start_cluster: StartCluster) -> None:
    nodes = await asyncio.to_thread(start_cluster, 2)
    owner, other = nodes
    try:
        async with create_client(owner.url) as on_owner, create_client(other.url) as on_other:
            first = on_owner.progressActor.get_or_create(["paused"])
            await first.send("jobs", {"value": 1})
            assert owner.process is not None
            os.kill(owner.process.pid, signal.SIGSTOP)
            try:
                handle = on_other.progressActor.get_or_create(["paused"])
                outcomes: list[str] = []
                for job in range(1, 6):
                    try:
                        await handle.send("jobs", {"value": BASE**job})
                        outcomes.append("ok")
                    except ActorError as exc:
                        outcomes.append(exc.code)
            finally:
                os.kill(owner.process.pid, signal.SIGCONT)
            # The resumed node notices it can no longer trust its lease and drops the actor.
            await wait_for_log(owner, "could not heartbeat in time", 10)
            state = await drained([handle, first], timeout=90, retry_on=NODE_ERRORS)
    finally:
        for node in nodes:
            node.kill()
    assert set(outcomes) <= {"ok"} | _UNKNOWN, outcomes
    counts = [(state["sum"] // BASE**i) % BASE for i in range(6)]
    # Every acknowledged send applied exactly once; an unknown one at most once.
    for job, outcome in zip(range(1, 6), outcomes, strict=True):
        assert counts[job] == 1 if outcome == "ok" else counts[job] <= 1, (outcomes, counts)
    assert counts[0] == 1
    assert outcomes.count("ok") >= 4, outcomes  # only the send in flight at the pause fails


async def test_alarms_of_a_killed_node_fire_once_on_another(
    tmp_path: Path, start_cluster: StartCluster
) -> None:
    nodes = await asyncio.to_thread(start_cluster)
    keys = [f"alarm-{i}" for i in range(6)]
    try:
        async with create_client(nodes[0].url) as client:
            for key in keys:
                await client.alarmActor.get_or_create([key]).arm(1.5)
        await asyncio.to_thread(nodes[0].kill)  # every alarm actor lives on node 1
        async with create_client(nodes[1].url) as client:
            async with asyncio.timeout(30):
                for key in keys:
                    handle = client.alarmActor.get_or_create([key])
                    while await fires_or_zero(handle) < 1:
                        await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # a second fire would show by now
            fires = [await client.alarmActor.get_or_create([key]).fires() for key in keys]
    finally:
        for node in nodes:
            node.kill()
    assert fires == [1] * len(keys)
    lines = (tmp_path / "side-effects.txt").read_text().splitlines()
    fired = Counter(line.split()[1] for line in lines if line.startswith("fire "))
    assert sorted(fired.values()) == [1] * len(keys)
    killed_pid = str(nodes[0].process.pid if nodes[0].process else "")
    assert all(line.split()[2] != killed_pid for line in lines if line.startswith("fire "))


async def fires_or_zero(handle: AsyncActorHandle) -> int:
    try:
        return int(await handle.fires())
    except (TransportError, ActorError):
        return 0


async def test_nodes_recover_by_themselves_after_postgresql_restarts(
    start_cluster: StartCluster,
) -> None:
    require_local_postgres()
    nodes = await asyncio.to_thread(start_cluster)
    try:
        async with create_client(nodes[0].url) as client:
            handle = client.progressActor.get_or_create(["pg-restart"])
            await handle.send("jobs", {"value": 1})
            await drained([handle], timeout=90, retry_on=NODE_ERRORS)
            await asyncio.to_thread(control_local_postgres, "restart")
            await wait_postgres()
            attempts = []
            async with asyncio.timeout(60):
                for index, node in enumerate(nodes, start=1):
                    async with create_client(node.url) as per_node:
                        on_node = per_node.progressActor.get_or_create(["pg-restart"])
                        for attempt in range(1000):
                            try:
                                await on_node.send("jobs", {"value": BASE**index})
                                attempts.append(attempt)
                                break
                            except (TransportError, ActorError):
                                await asyncio.sleep(0.25)
            state = await drained([handle], timeout=90, retry_on=NODE_ERRORS)
            alive = [node.running for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    assert alive == [True, True, True]  # no node died of the outage
    assert len(attempts) == 3  # every node answered again
    digits = [(state["sum"] // BASE**i) % BASE for i in range(4)]
    assert digits[0] == 1  # the job before the restart, once
    assert all(count >= 1 for count in digits[1:]), digits  # (a retried send may repeat)


async def wait_for_log(node: ServerProcess, text: str, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while text not in node.log():
            await asyncio.sleep(0.1)


# -- idempotency keys (docs/idempotency.md): retried after the owner's kill -9 ------------

RETRIES = 3
# The keyed failover check sends this many (the suite's bounded run: 800; the issue's
# 2,000, reported in bench/README.md: PERDURE_KEYED_JOBS=2000).
KEYED_JOBS = int(os.environ.get("PERDURE_KEYED_JOBS", "800"))


async def test_a_keyed_send_retried_after_the_owners_kill_is_applied_once(
    tmp_path: Path, start_cluster: StartCluster
) -> None:
    """The owner applies the send and dies before its answer arrives (the transport
    kills it, then reports a broken connection); the client's retry goes through HAProxy
    to a survivor, which takes the actor over, finds the key's record and answers."""
    nodes = await asyncio.to_thread(start_cluster)
    owner = nodes[0]
    lost = LoseAnswerAfter("/queue/", owner.kill)
    with Balancer.in_front_of(nodes, base_dir=tmp_path) as balancer:
        try:
            async with create_client(owner.url) as direct:
                await direct.progressActor.get_or_create(["keyed"]).getState()  # on node 0
            async with AsyncClient(balancer.url, transport=lost, retries=RETRIES) as client:  # type: ignore[arg-type]
                handle = client.progressActor.get_or_create(["keyed"])
                async with asyncio.timeout(60):
                    await handle.send("jobs", {"value": BASE**1})
                    await handle.send("jobs", {"value": BASE**2}, idempotency_key="job-2")
                    await handle.send("jobs", {"value": BASE**2}, idempotency_key="job-2")
                state = await drained([handle], timeout=90, retry_on=NODE_ERRORS)
        finally:
            for node in nodes:
                node.kill()
    assert not owner.running
    assert len(lost.keys) == 4
    assert lost.keys[0] is not None
    assert lost.keys[0] == lost.keys[1]  # the retry carried the first try's key
    assert digits(state["sum"])[:3] == [0, 1, 1]  # each job applied once


# The full-size figure (11 s); test_a_keyed_send_retried_after_the_owners_kill_is_applied_once
# keeps a keyed retry across an owner's kill in the suite.
@pytest.mark.slow
async def test_keyed_retries_leave_no_unknown_outcome_when_each_node_is_killed(
    tmp_path: Path, start_cluster: StartCluster
) -> None:
    """The failover check with the client's automatic retry: KEYED_JOBS sends through
    HAProxy while each node is killed once and restarted; every send is answered (no
    unknown outcome) and applied exactly once, with nothing re-sent afterwards."""
    nodes = await asyncio.to_thread(start_cluster)
    seed = int(os.environ.get("PERDURE_CRASH_SEED") or random.randrange(1 << 30))
    margin = KEYED_JOBS // 10
    kill_points = sorted(random.Random(seed).sample(range(margin, KEYED_JOBS - margin), 3))
    failures: list[BaseException] = []
    with Balancer.in_front_of(nodes, base_dir=tmp_path) as balancer:
        try:
            async with create_client(nodes[0].url) as direct:
                await direct.progressActor.get_or_create(["keyed-failover"]).getState()
            async with create_client(balancer.url, retries=RETRIES) as client:
                handle = client.progressActor.get_or_create(["keyed-failover"])
                jobs = list(range(KEYED_JOBS))
                sent = 0
                kills = list(enumerate(kill_points))
                killing = asyncio.Lock()

                async def kill_and_restart(index: int) -> None:
                    await asyncio.to_thread(nodes[index].kill)
                    await takeover_seconds([handle, handle], 1)
                    await asyncio.to_thread(nodes[index].restart)

                async def sender() -> None:
                    nonlocal sent
                    while jobs:
                        job = jobs.pop()
                        try:
                            await handle.send("jobs", {"value": BASE**job})
                        except (TransportError, ActorError) as exc:
                            failures.append(exc)
                            continue
                        sent += 1
                        if kills and sent >= kills[0][1] and not killing.locked():
                            index, _ = kills.pop(0)
                            async with killing:
                                await kill_and_restart(index)

                async with asyncio.timeout(240):
                    await asyncio.gather(*(sender() for _ in range(SENDERS)))
                    while kills:
                        await kill_and_restart(kills.pop(0)[0])
                state = await drained([handle], timeout=90, retry_on=NODE_ERRORS)
        finally:
            for node in nodes:
                node.kill()
    context = f"seed={seed} kills={kill_points}"
    assert failures == [], f"{len(failures)} unknown outcomes ({context}): {failures[:3]}"
    assert [node.starts for node in nodes] == [2, 2, 2]
    counts = digits(state["sum"])
    assert counts[:KEYED_JOBS] == [1] * KEYED_JOBS, f"jobs applied other than once ({context})"
    assert set(counts[KEYED_JOBS:]) <= {0}
    done = {"stage": "completed", "completed": KEYED_JOBS, "total": KEYED_JOBS}
    assert state["progress"] == done


# -- delayed sends (docs/queues.md): due after the owner's kill -9 ----------------------

# Seconds: past the takeover (the TTL, then the keyed retry), so that a survivor holds
# the message, hidden, before it is due.
DELAY = 5.0


async def test_a_delayed_send_is_taken_once_when_due_after_the_owners_kill(
    tmp_path: Path, start_cluster: StartCluster
) -> None:
    """Two mailboxes live on node 0, each sent a message due in DELAY seconds: one
    through node 1 (forwarded to the owner); the other keyed through HAProxy, its answer
    lost as node 0 is killed, so the client retries it with its key and a survivor takes
    the mailbox over and answers from the key's record. Nobody calls the first again:
    its alarm wakes it on a survivor. Each takes its message once, not before it is due."""
    nodes = await asyncio.to_thread(start_cluster)
    owner, other, watcher = nodes
    owner_pid = owner.pid
    lost = LoseAnswerAfter("/queue/", owner.kill)
    with Balancer.in_front_of(nodes, base_dir=tmp_path) as balancer:
        try:
            async with create_client(owner.url) as direct:
                for key in ("alarmed", "retried"):
                    await direct.mailbox.get_or_create([key]).got()  # awake on node 0
            async with create_client(other.url) as on_other:
                alarmed = on_other.mailbox.get_or_create(["alarmed"])
                await alarmed.send("jobs", "alarmed", delay=DELAY)
                ids = {"alarmed": await alarmed.resolve()}
            async with AsyncClient(balancer.url, transport=lost, retries=RETRIES) as client:  # type: ignore[arg-type]
                retried = client.mailbox.get_or_create(["retried"])
                ids["retried"] = await retried.resolve()
                async with asyncio.timeout(30):
                    assert await retried.send("jobs", "retried", delay=DELAY) is None
                answered_at = time.time() * 1000
            due = {key: await _due_at(watcher.url, actor_id) for key, actor_id in ids.items()}
            assert answered_at < due["retried"], "the retry was answered after the message's due"

            try:
                async with asyncio.timeout(DELAY + 30):
                    while not all([await _got(watcher.url, a) for a in ids.values()]):
                        await asyncio.sleep(0.1)
            except TimeoutError:
                seen = {key: await actor_details(watcher.url, a) for key, a in ids.items()}
                raise AssertionError(f"not taken in time (logs in {tmp_path}): {seen}") from None
            await asyncio.sleep(1.0)  # a second delivery would show by now
            await asyncio.to_thread(owner.restart)
            got = {key: await _got(watcher.url, actor_id) for key, actor_id in ids.items()}
            queues = [(await actor_details(watcher.url, a))["queue"] for a in ids.values()]
        finally:
            for node in nodes:
                node.kill()
    assert not lost.armed
    assert len(lost.keys) == 2
    assert lost.keys[0] is not None
    assert lost.keys[0] == lost.keys[1]  # the retry carried the first try's key
    for key, taken in got.items():
        assert [item["body"] for item in taken] == [key], got  # taken once
        assert taken[0]["at"] >= due[key], (key, taken, due)  # not before it was due
        assert taken[0]["pid"] != owner_pid  # by a survivor
    assert queues == [[], []]


async def _due_at(url: str, actor_id: str) -> int:
    (message,) = (await actor_details(url, actor_id))["queue"]
    due_at: int = message["due_at"]
    return due_at


async def _got(url: str, actor_id: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = (await actor_details(url, actor_id))["state"]["got"]
    return got


async def test_a_socket_opened_through_a_survivor_just_after_the_owners_kill_waits_for_it(
    start_cluster: StartCluster,
) -> None:
    """A socket opened through node 2 just after node 1, which holds the actor, was
    killed: node 2 still lists node 1, so it tries to pipe the socket there and is
    refused. It looks again, avoiding node 1, which waits for node 1's lease to lapse
    and takes the actor over: the client gets Init, then events. The old code answered
    an Error frame (actor.owner_unreachable), which the official client takes as final:
    it stopped reconnecting."""
    owner, survivor = await asyncio.to_thread(start_cluster, 2)
    try:
        async with create_client(owner.url) as on_owner:
            await on_owner.progressActor.get_or_create(["piped"]).getState()  # on node 1
        await asyncio.to_thread(owner.kill)
        url = survivor.url.replace("http://", "ws://", 1) + (
            "/gateway/progressActor/connect?rvt-method=getOrCreate&rvt-key=piped"
        )
        async with websockets.asyncio.client.connect(
            url, subprotocols=["rivet", "rivet_encoding.json"], open_timeout=5
        ) as ws:
            first = json.loads(await asyncio.wait_for(ws.recv(), TTL + 10))["body"]
            assert first["tag"] == "Init", first
            request = {"eventName": "progressUpdated", "subscribe": True}
            await ws.send(json.dumps({"body": {"tag": "SubscriptionRequest", "val": request}}))
            async with create_client(survivor.url) as on_survivor:
                await on_survivor.progressActor.get_or_create(["piped"]).send("jobs", {"value": 1})
            event = json.loads(await asyncio.wait_for(ws.recv(), 10))["body"]
    finally:
        for node in (owner, survivor):
            node.kill()
    assert event["tag"] == "Event", event
    assert event["val"]["name"] == "progressUpdated"

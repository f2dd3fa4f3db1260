"""Several runtimes on one store act as one server: placement, forwarding, leases, drain.

Two cluster nodes run in this process on one shared store (memory, and PostgreSQL). Each
node's app is a real ``create_app``; the nodes reach each other through the real
forwarding client and endpoint, over httpx's in-process ASGI transport instead of
sockets. Real processes, ``kill -9`` and SIGSTOP are in ``tests/scenarios/cluster``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from perdure import ActorRuntime, actor, queue, setup
from perdure.errors import PerdureError
from perdure.runtime.cluster.member import NodeConfig
from perdure.server import create_app
from perdure.server.cluster.peers import HttpPeers
from perdure.store import MemoryStore
from perdure.store.base import Store
from perdure.store.encoding import decode_value
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres

FIRES: list[str] = []


async def _work(c: Any) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["count"] += message.body
        await message.complete(c.state["count"])


def _fail(c: Any) -> None:
    raise PerdureError("nope", code="refused", group="user")


def _tick(c: Any, fire: Any) -> None:
    FIRES.append(c.actor_id)


async def _arm(c: Any, delay: float) -> None:
    await c.schedule.after(delay, "tick")


counter = actor(
    state={"count": 0},
    queues={"jobs": queue(int)},
    run=_work,
    actions={
        "add": lambda c, n: _add(c, n),
        "get": lambda c: c.state["count"],
        "fail": _fail,
        "tick": _tick,
        "arm": _arm,
        "caller": lambda c, key: c.client().counter.get_or_create([key]).add(10),
    },
)


def _add(c: Any, n: int) -> int:
    c.state["count"] += n
    return int(c.state["count"])


registry = setup(use={"counter": counter})


class _SharedStore(MemoryStore):
    """One memory store for two runtimes: each runtime closes it when it stops."""

    async def close(self) -> None:
        return


def _make_store(kind: str) -> tuple[Callable[[], Store], Callable[[], None]]:
    if kind == "memory":
        shared = _SharedStore()
        return (lambda: shared), (lambda: None)
    require_postgres()
    schema = new_schema_name()
    return (lambda: postgres_store(schema)), (lambda: drop_schema(schema))


class Nodes:
    """Nodes ``a`` and ``b`` on one store, forwarding to each other in process."""

    def __init__(self, make_store: Callable[[], Store], ttl_ms: int) -> None:
        self.runtimes: dict[str, ActorRuntime] = {}
        apps: dict[str, httpx.AsyncBaseTransport] = {}
        for name in ("a", "b"):
            config = NodeConfig(name, f"http://node-{name}", lease_ttl_ms=ttl_ms)
            runtime = ActorRuntime(registry, make_store(), node=config)
            apps[f"http://node-{name}"] = httpx.ASGITransport(app=create_app(runtime))
            self.runtimes[name] = runtime
        for runtime in self.runtimes.values():
            assert runtime.cluster is not None
            runtime.cluster.peers = HttpPeers(runtime.cluster, mounts=apps)

    def __getitem__(self, name: str) -> ActorRuntime:
        return self.runtimes[name]

    async def start(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.start()
        for runtime in self.runtimes.values():
            assert runtime.cluster is not None
            await runtime.cluster.refresh()  # each knows the other at once

    async def stop(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.stop()


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def nodes(request: pytest.FixtureRequest) -> AsyncIterator[Nodes]:
    make_store, cleanup = _make_store(request.param)
    cluster = Nodes(make_store, ttl_ms=3000)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()
        cleanup()


async def test_an_actor_lives_where_it_was_first_asked_and_other_nodes_forward(
    nodes: Nodes,
) -> None:
    on_a = nodes["a"].client().counter.get_or_create(["x"])
    on_b = nodes["b"].client().counter.get_or_create(["x"])
    assert await on_a.add(1) == 1
    assert await on_b.add(2) == 3  # forwarded to a: the count is one
    assert await on_b.get() == 3
    actor_id = (await nodes["a"].dispatch.find("counter", ["x"])).actor_id  # type: ignore[union-attr]
    assert nodes["a"].is_live(actor_id)
    assert not nodes["b"].is_live(actor_id)  # no ping-pong: it stays where it woke
    lease = await nodes["a"].store.get_lease(actor_id)
    assert lease is not None
    assert lease.node_id == "a"


async def test_queue_sends_errors_and_actor_calls_cross_nodes(nodes: Nodes) -> None:
    await nodes["a"].client().counter.get_or_create(["q"]).get()  # lives on a
    on_b = nodes["b"].client().counter.get_or_create(["q"])
    result = await on_b.send("jobs", 5, wait=True, timeout=10)
    assert (result.status, result.response) == ("completed", 5)
    with pytest.raises(PerdureError) as caught:
        await on_b.fail()
    assert (caught.value.group, caught.value.code, caught.value.message) == (
        "user",
        "refused",
        "nope",
    )
    # An actor on b calls one that lives on a through its own client (c.client()).
    await nodes["b"].client().counter.get_or_create(["caller"]).get()
    assert await nodes["b"].client().counter.get_or_create(["caller"]).caller("q") == 15


async def test_sleep_releases_the_lease_and_the_next_node_takes_the_actor(nodes: Nodes) -> None:
    handle = nodes["a"].client().counter.get_or_create(["s"])
    await handle.add(1)
    summary = await nodes["a"].dispatch.find("counter", ["s"])
    assert summary is not None
    await nodes["b"].dispatch.ref(summary.actor_id).sleep()  # forwarded to a
    assert not nodes["a"].is_live(summary.actor_id)
    assert await nodes["a"].store.get_lease(summary.actor_id) is None
    assert await nodes["b"].client().counter.get_or_create(["s"]).add(1) == 2
    assert nodes["b"].is_live(summary.actor_id)
    lease = await nodes["b"].store.get_lease(summary.actor_id)
    assert lease is not None
    assert lease.node_id == "b"


async def test_a_taken_over_actor_fences_the_old_instance_and_the_call_moves(
    nodes: Nodes,
) -> None:
    a, b = nodes["a"], nodes["b"]
    await a.client().counter.get_or_create(["lost"]).add(1)
    summary = await a.dispatch.find("counter", ["lost"])
    assert summary is not None
    actor_id = summary.actor_id
    far = 2**50  # long after a's heartbeat: as if a had been cut off that long
    await b.store.acquire_lease(actor_id, "b", 60_000, now=far)
    b_generation = (await b.store.get_actor(actor_id)).generation  # type: ignore[union-attr]
    # a still has the instance (it never learnt): its write is refused by the fence, a
    # drops the instance, and the call (not applied) goes to the actor's new node, once.
    assert await a.dispatch.ref(actor_id).call("add", [5]) == 6
    await _until(lambda: not a.is_live(actor_id))
    assert await _count(b, actor_id) == 6
    record = await b.store.get_actor(actor_id)
    assert record is not None
    assert record.generation > b_generation  # b took it (b's acquire at `far` aside)


async def _count(runtime: ActorRuntime, actor_id: str) -> int:
    record = await runtime.store.get_actor(actor_id)
    assert record is not None
    assert record.state is not None
    return int(decode_value(record.state)["count"])


async def test_a_node_that_cannot_renew_stops_trusting_its_leases(nodes: Nodes) -> None:
    a = nodes["a"]
    await a.client().counter.get_or_create(["mute"]).add(1)
    summary = await a.dispatch.find("counter", ["mute"])
    assert summary is not None
    assert a.cluster is not None
    # No more heartbeats (as if the database were unreachable): the watchdog drops the
    # actor before its lease (3 s) can expire in the store.
    for task in a.cluster._tasks[:1]:
        task.cancel()
    await _until(lambda: not a.is_live(summary.actor_id), timeout=5)
    lease = await a.store.get_lease(summary.actor_id)
    assert lease is not None
    assert lease.node_id == "a"


async def test_a_connection_gets_no_stale_answer_once_the_lease_is_not_trusted(
    nodes: Nodes,
) -> None:
    """A node resumed after a pause past its lease may read a request from an open socket
    before its watchdog has dropped the actor; by then another node may own it. The
    socket's call must not be answered from memory (a read commits nothing, so no fence
    would refuse it): it is refused, and the actor given up."""
    a, b = nodes["a"], nodes["b"]
    handle = a.client().counter.get_or_create(["paused-socket"])
    await handle.add(1)
    conn = await handle.connect()
    actor_id = conn.actor_id
    assert actor_id is not None
    assert a.cluster is not None
    for task in a.cluster._tasks:  # a is "paused": no heartbeat, no watchdog yet
        task.cancel()
    a.cluster._node_trusted_until = 0.0
    a.cluster._held[actor_id].trusted_until = 0.0
    await b.store.acquire_lease(actor_id, "b", 60_000, now=2**50)  # b took it over
    assert await b.dispatch.ref(actor_id).call("add", [5]) == 6
    with pytest.raises(PerdureError) as refused:
        await conn.get()  # the old code answered 1, from a's memory
    assert refused.value.code == "unavailable"
    assert not a.is_live(actor_id)
    assert await b.dispatch.ref(actor_id).call("get", []) == 6


async def test_a_key_destroyed_on_one_node_is_created_afresh_through_another(
    nodes: Nodes,
) -> None:
    """b remembers the key's id (no store read per request); a destroys the actor; the
    next getOrCreate through b creates a new actor instead of answering not_found."""
    a, b = nodes["a"], nodes["b"]
    assert await a.client().counter.get_or_create(["doomed"]).add(1) == 1  # lives on a
    assert await b.client().counter.get_or_create(["doomed"]).add(1) == 2  # forwarded
    first = await b.client().counter.get_or_create(["doomed"]).resolve()
    assert b.remembers("counter", ["doomed"])
    await a.dispatch.ref(first).destroy()
    assert await b.client().counter.get_or_create(["doomed"]).add(5) == 5
    second = await b.client().counter.get_or_create(["doomed"]).resolve()
    assert second != first
    assert await a.client().counter.get_or_create(["doomed"]).add(1) == 6


async def test_drain_hands_the_actors_over_at_once(nodes: Nodes) -> None:
    a, b = nodes["a"], nodes["b"]
    await a.client().counter.get_or_create(["d"]).add(4)
    await a.stop()
    assert [n.node_id for n in await b.store.list_nodes()] == ["b"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await b.client().counter.get_or_create(["d"]).add(1) == 5
    assert loop.time() - started < 2.0  # well under the 3 s lease TTL: released, not expired


async def test_an_alarm_of_a_drained_node_fires_once_on_another(nodes: Nodes) -> None:
    a, b = nodes["a"], nodes["b"]
    FIRES.clear()
    handle = a.client().counter.get_or_create(["alarm"])
    await handle.arm(0.6)
    summary = await a.dispatch.find("counter", ["alarm"])
    assert summary is not None
    await a.stop()
    await _until(lambda: FIRES.count(summary.actor_id) >= 1, timeout=10)
    await asyncio.sleep(0.5)
    assert FIRES.count(summary.actor_id) == 1
    assert b.is_live(summary.actor_id)


async def test_an_alarm_of_an_actor_held_by_a_live_node_is_left_to_it(nodes: Nodes) -> None:
    """b's alarm scheduler sees the due alarm of an actor awake on a, and leaves it to a
    (whose own timer fires it) without trying to take it: taking it is a write in b's
    writer that locks the actor's row and waits for a's commits on it, holding up every
    commit of b queued behind it (the cluster's p99 stall). The old code tried."""
    a, b = nodes["a"], nodes["b"]
    FIRES.clear()
    taken_by_b: list[str] = []
    acquire = b.store.acquire_lease

    async def counting(actor_id: str, node_id: str, *args: Any, **kwargs: Any) -> Any:
        if node_id == "b":
            taken_by_b.append(actor_id)
        return await acquire(actor_id, node_id, *args, **kwargs)

    b.store.acquire_lease = counting  # type: ignore[method-assign]
    handle = a.client().counter.get_or_create(["held-alarm"])
    await handle.arm(1.2)  # past b's next look at the store (once a second at least)
    actor_id = await handle.resolve()
    await _until(lambda: FIRES.count(actor_id) >= 1)
    assert taken_by_b == []
    assert a.is_live(actor_id)


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def test_the_forward_endpoint_needs_the_cluster_secret_when_one_is_set() -> None:
    import cbor2

    config = NodeConfig("solo", "http://solo", lease_ttl_ms=3000, secret="s3cret")
    runtime = ActorRuntime(registry, MemoryStore(), node=config)
    app = create_app(runtime)
    await runtime.start()
    try:
        actor = await runtime.dispatch.create("counter", ["secret"])
        body = cbor2.dumps({"actor": actor.actor_id, "op": "call", "action": "add", "args": [2]})
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://solo") as http:
            refused = await http.post("/.perdure/forward", content=body)
            wrong = await http.post(
                "/.perdure/forward", content=body, headers={"x-perdure-cluster-secret": "no"}
            )
            served = await http.post(
                "/.perdure/forward", content=body, headers={"x-perdure-cluster-secret": "s3cret"}
            )
        assert (refused.status_code, wrong.status_code) == (403, 403)
        assert cbor2.loads(refused.content)["error"]["code"] == "forbidden"
        assert served.status_code == 200
        assert cbor2.loads(served.content)["result"] == 2
        assert await runtime.client().counter.get(["secret"]).get() == 2  # applied once
    finally:
        await runtime.stop()


async def test_without_a_configured_secret_the_forward_route_wants_the_agreed_one() -> None:
    """An embedded node with no secret of its own (``NodeConfig.secret`` is None) agrees
    on one with its store as it starts: its forward route refuses a request without it,
    with another one, and every request before the node has agreed on one."""
    import cbor2

    runtime = ActorRuntime(registry, MemoryStore(), node=NodeConfig("solo", "http://solo"))
    app = create_app(runtime)
    transport = httpx.ASGITransport(app=app)
    assert runtime.cluster is not None
    async with httpx.AsyncClient(transport=transport, base_url="http://solo") as http:
        destroy = cbor2.dumps({"actor": "x", "op": "$destroy"})
        early = await http.post("/.perdure/forward", content=destroy)
        # Not started: no secret yet, no peer trusted. The door refuses every request
        # until the runtime has started (server.not_started), the forward route too.
        assert early.status_code == 503, early.content
        assert b"not_started" in early.content
        await runtime.start()
        try:
            secret = runtime.cluster.secret
            assert secret is not None
            assert len(secret) >= 40
            actor = await runtime.dispatch.create("counter", ["agreed"])
            destroy = cbor2.dumps({"actor": actor.actor_id, "op": "$destroy"})
            for headers in ({}, {"x-perdure-cluster-secret": secret[:-1]}):
                refused = await http.post("/.perdure/forward", content=destroy, headers=headers)
                assert refused.status_code == 403, refused.content
                assert cbor2.loads(refused.content)["error"]["code"] == "forbidden"
            assert await runtime.dispatch.get(actor.actor_id) is not None  # it survived
            call = {"actor": actor.actor_id, "op": "call", "action": "add", "args": [3]}
            served = await http.post(
                "/.perdure/forward",
                content=cbor2.dumps(call),
                headers={"x-perdure-cluster-secret": secret},
            )
            assert served.status_code == 200
            assert cbor2.loads(served.content)["result"] == 3
        finally:
            await runtime.stop()


async def test_nodes_on_one_store_agree_on_a_secret_and_refuse_another() -> None:
    """Two nodes without a configured secret share the one the first made; a node given
    a secret of its own refuses to join before it registers, and so the store lists it
    not."""
    from perdure.errors import ClusterSecretMismatch

    shared = _SharedStore()
    first = ActorRuntime(registry, shared, node=NodeConfig("a", "http://node-a"))
    second = ActorRuntime(registry, shared, node=NodeConfig("b", "http://node-b"))
    stranger = ActorRuntime(
        registry, shared, node=NodeConfig("c", "http://node-c", secret="not-the-one")
    )
    await first.start()
    await second.start()
    try:
        assert first.cluster is not None
        assert second.cluster is not None
        assert first.cluster.secret is not None
        assert first.cluster.secret == second.cluster.secret
        with pytest.raises(ClusterSecretMismatch, match="start it without --cluster-secret"):
            await stranger.start()
        assert [node.node_id for node in await shared.list_nodes()] == ["a", "b"]
    finally:
        await second.stop()
        await first.stop()


async def test_management_routes_act_on_an_actor_held_by_another_node(nodes: Nodes) -> None:
    a, b = nodes["a"], nodes["b"]
    await a.client().counter.get_or_create(["managed"]).add(1)
    summary = await a.dispatch.find("counter", ["managed"])
    assert summary is not None
    assert b.cluster is not None
    peers = b.cluster.peers
    transport = httpx.ASGITransport(app=create_app(b))
    b.cluster.peers = peers  # keep the in-process links to a (create_app makes real ones)
    async with httpx.AsyncClient(transport=transport, base_url="http://node-b") as http:
        listed = (await http.get("/actors", params={"name": "counter"})).json()
        deleted = await http.delete(f"/actors/{summary.actor_id}")
    assert summary.actor_id in [actor["actor_id"] for actor in listed["actors"]]
    assert deleted.status_code == 200
    assert not a.is_live(summary.actor_id)  # destroyed where it lived, on_destroy there
    assert await b.dispatch.get(summary.actor_id) is None


async def test_the_forward_endpoint_refuses_bad_requests_with_a_code() -> None:
    import cbor2

    config = NodeConfig("solo", "http://solo", lease_ttl_ms=3000)
    runtime = ActorRuntime(registry, MemoryStore(), node=config)
    app = create_app(runtime)
    await runtime.start()
    assert runtime.cluster is not None
    assert runtime.cluster.secret is not None
    peer = {"x-perdure-cluster-secret": runtime.cluster.secret}  # the secret agreed on
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://solo", headers=peer
        ) as http:
            answers = [
                cbor2.loads((await http.post("/.perdure/forward", content=body)).content)
                for body in (
                    b"\xff not cbor",
                    cbor2.dumps([1, 2]),
                    cbor2.dumps({"actor": "x", "op": "explode"}),
                    cbor2.dumps({"actor": "x", "op": "call", "action": "get", "args": []}),
                )
            ]
    finally:
        await runtime.stop()
    codes = [answer["error"]["code"] for answer in answers]
    assert codes == ["invalid_request", "invalid_request", "invalid_request", "not_found"]


async def test_the_admin_api_repairs_an_actor_held_by_another_node(nodes: Nodes) -> None:
    from perdure.server.edge.admin_access import AdminAccess

    a, b = nodes["a"], nodes["b"]
    handle = a.client().counter.get_or_create(["inspected"])
    await handle.arm(3600)
    summary = await a.dispatch.find("counter", ["inspected"])
    assert summary is not None
    assert b.cluster is not None
    peers = b.cluster.peers
    app = create_app(b, admin=AdminAccess(token="t"))
    b.cluster.peers = peers  # keep the in-process links to a (create_app makes real ones)
    headers = {"authorization": "Bearer t"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://node-b", headers=headers
    ) as http:
        details = (await http.get(f"/admin/actors/{summary.actor_id}")).json()
        assert details["actor"]["awake"] is True  # on a: b sees its lease
        [schedule] = details["schedules"]
        cancelled = await http.delete(
            f"/admin/actors/{summary.actor_id}/schedules/{schedule['id']}"
        )
        assert cancelled.status_code == 200, cancelled.text
        called = await http.post(
            f"/admin/actors/{summary.actor_id}/actions/add", json={"args": [4]}
        )
        assert called.json() == {"output": 4}
        after = (await http.get(f"/admin/actors/{summary.actor_id}")).json()
    assert after["schedules"] == []
    assert after["state"] == {"count": 4}
    assert a.is_live(summary.actor_id)
    assert not b.is_live(summary.actor_id)  # the operations ran on a, where it lives

"""The per-client caps' counts and buckets (perdure.server.edge.client_caps), and the
creation rate where a request creates an actor, in process (the open streams and sockets
over a real server: tests/scenarios/edge/test_client_caps.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from perdure import actor, setup
from perdure.errors import ClientCapReached
from perdure.runtime import ClusterMember
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.server import create_app
from perdure.server.cluster.pipe import FORWARDED_HEADER, SECRET_HEADER
from perdure.server.edge import client_caps
from perdure.server.edge.client_caps import ClientCaps, ClientLimits
from perdure.server.edge.refusals import EdgeRefusals
from perdure.store import MemoryStore

pytestmark = pytest.mark.timeout(20)


def scope(host: str | None = "192.0.2.1", **headers: str) -> dict[str, Any]:
    return {
        "type": "http",
        "client": None if host is None else (host, 40000),
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
    }


def member(secret: str) -> ClusterMember:
    """A cluster node as the caps see it: its agreed secret."""
    return cast(ClusterMember, SimpleNamespace(secret=secret))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- settings ---------------------------------------------------------------------------


def test_defaults_cap_streams_and_sockets_and_leave_creation_alone() -> None:
    caps = ClientCaps()
    assert (caps.max_streams, caps.max_websockets, caps.creation_rate) == (64, 256, 0)
    assert ClientLimits(caps).creations is None
    assert ClientCaps(creation_rate=2.5).burst == 3
    assert ClientCaps(creation_rate=0.1).burst == 1
    assert ClientCaps(creation_rate=5, creation_burst=20).burst == 20


@pytest.mark.parametrize(
    "settings",
    [
        {"max_streams": -1},
        {"max_websockets": 1.5},
        {"max_streams": True},
        {"creation_burst": -2},
        {"creation_rate": -1},
        {"creation_rate": float("inf")},
        {"creation_rate": float("nan")},
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ClientCaps(**settings)


# -- open streams and sockets -----------------------------------------------------------


def test_past_the_cap_an_address_is_refused_until_one_closes() -> None:
    refusals = EdgeRefusals()
    limits = ClientLimits(ClientCaps(max_streams=2), refusals)
    held = [limits.open_stream(scope()), limits.open_stream(scope())]
    with pytest.raises(ClientCapReached) as refused:
        limits.open_stream(scope())
    error = refused.value
    assert (error.identifier, error.status, error.retry_after) == (
        "request.too_many_streams",
        429,
        1,
    )
    assert error.metadata == {"limit": 2}
    assert refusals.counts == {"request.too_many_streams": 1}
    # Another address has its own count; sockets are counted apart from streams.
    other = limits.open_stream(scope("192.0.2.2"))
    limits.open_websocket(scope())
    limits.close_stream(held.pop())
    held.append(limits.open_stream(scope()))
    for address in [*held, other]:
        limits.close_stream(address)
    assert limits.streams.open == {}  # an address with nothing open is dropped


def test_socket_refusal_names_connections() -> None:
    limits = ClientLimits(ClientCaps(max_websockets=1), EdgeRefusals())
    held = limits.open_websocket(scope())
    with pytest.raises(ClientCapReached) as refused:
        limits.open_websocket(scope())
    assert refused.value.identifier == "request.too_many_connections"
    limits.close_websocket(held)
    limits.close_websocket(limits.open_websocket(scope()))
    assert limits.websockets.open == {}


def test_zero_counts_nothing() -> None:
    limits = ClientLimits(ClientCaps(max_streams=0, max_websockets=0))
    for _ in range(1000):
        assert limits.open_stream(scope()) is None
        assert limits.open_websocket(scope()) is None
    assert limits.streams.open == limits.websockets.open == {}
    limits.close_stream(None)


def test_without_a_client_address_every_request_shares_one_count() -> None:
    limits = ClientLimits(ClientCaps(max_streams=1))
    assert limits.open_stream(scope(None)) == ""
    with pytest.raises(ClientCapReached):
        limits.open_stream(scope(None))


def test_what_a_peer_node_hands_on_is_not_counted() -> None:
    limits = ClientLimits(ClientCaps(max_websockets=1), cluster=member("s3cret"))
    peer = scope(**{FORWARDED_HEADER: "node-b", SECRET_HEADER: "s3cret"})
    assert [limits.open_websocket(peer) for _ in range(5)] == [None] * 5
    # Without the secret, it is a client like any other (the route refuses it).
    impostor = scope(**{FORWARDED_HEADER: "node-b", SECRET_HEADER: "guess"})
    assert limits.open_websocket(impostor) == "192.0.2.1"
    with pytest.raises(ClientCapReached):
        limits.open_websocket(impostor)
    # A server that is no cluster node believes no such header.
    alone = ClientLimits(ClientCaps(max_websockets=1))
    alone.open_websocket(scope(**{FORWARDED_HEADER: "node-b"}))
    with pytest.raises(ClientCapReached):
        alone.open_websocket(scope(**{FORWARDED_HEADER: "node-b"}))


# -- the creation rate ------------------------------------------------------------------


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    clock = Clock()
    refusals = EdgeRefusals()
    limits = ClientLimits(ClientCaps(creation_rate=2, creation_burst=3), refusals, clock=clock)
    take = limits.creation_gate(scope())
    assert take is not None
    for _ in range(3):
        take()
    with pytest.raises(ClientCapReached) as refused:
        take()
    error = refused.value
    assert (error.identifier, error.status, error.retry_after) == (
        "request.creation_rate_limited",
        429,
        1,
    )
    assert error.metadata == {"limit": 2, "burst": 3}
    assert refusals.counts == {"request.creation_rate_limited": 1}
    clock.now += 0.5  # one more token
    take()
    with pytest.raises(ClientCapReached):
        take()
    # Other addresses have buckets of their own.
    other = limits.creation_gate(scope("192.0.2.9"))
    assert other is not None
    other()


def test_retry_after_says_when_a_token_is_due() -> None:
    limits = ClientLimits(ClientCaps(creation_rate=0.1), clock=Clock())
    take = limits.creation_gate(scope())
    assert take is not None
    take()
    with pytest.raises(ClientCapReached) as refused:
        take()
    assert refused.value.retry_after == 10


def test_idle_buckets_are_dropped() -> None:
    clock = Clock()
    limits = ClientLimits(ClientCaps(creation_rate=1, creation_burst=2), clock=clock)
    buckets = limits.creations
    assert buckets is not None
    for index in range(100):
        buckets.take(f"10.0.0.{index}")
    assert len(buckets.table) == 100
    clock.now += 2  # a whole refill: every bucket is full again, the same as none
    buckets.take("10.0.1.1")
    assert list(buckets.table) == ["10.0.1.1"]


def test_the_bucket_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_caps, "MAX_BUCKETS", 50)
    limits = ClientLimits(ClientCaps(creation_rate=1), clock=Clock())
    buckets = limits.creations
    assert buckets is not None
    for index in range(500):
        buckets.take(f"10.0.{index // 256}.{index % 256}")
    assert len(buckets.table) == 50
    assert "10.0.1.243" in buckets.table  # the most recent stay


def test_no_gate_without_a_rate_or_for_a_peer() -> None:
    assert ClientLimits().creation_gate(scope()) is None
    limits = ClientLimits(ClientCaps(creation_rate=1), cluster=member("s"))
    assert limits.creation_gate(scope(**{FORWARDED_HEADER: "b", SECRET_HEADER: "s"})) is None
    assert limits.creation_gate(scope()) is not None


# -- where requests create actors (in process) ------------------------------------------


@pytest.fixture
async def runtime() -> AsyncIterator[ActorRuntime]:
    registry = setup(use={"thing": actor(state={}, actions={"ping": lambda c: "pong"})})
    runtime = ActorRuntime(registry, MemoryStore())
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


def _client(runtime: ActorRuntime, caps: ClientCaps, peer: str) -> httpx.AsyncClient:
    app = create_app(runtime, caps=caps, metrics=False)
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:6420")


async def _ping(http: httpx.AsyncClient, key: str, method: str = "getOrCreate") -> str:
    """The gateway's answer to ``ping`` on ``thing[key]``: ``ok`` or the error code."""
    response = await http.post(
        f"/gateway/thing/action/ping?rvt-method={method}&rvt-key={key}", json={"args": []}
    )
    if response.status_code == 200:
        return "ok"
    assert response.status_code == 429 or method != "getOrCreate", response.text
    return str(response.json()["code"])


async def test_only_a_request_that_creates_takes_from_the_rate(runtime: ActorRuntime) -> None:
    caps = ClientCaps(creation_rate=0.01, creation_burst=2)
    async with _client(runtime, caps, "192.0.2.1") as http:
        assert [await _ping(http, key) for key in ("a", "b")] == ["ok", "ok"]
        refused = await http.post(
            "/gateway/thing/action/ping?rvt-method=getOrCreate&rvt-key=c", json={"args": []}
        )
        assert refused.status_code == 429
        assert refused.headers["x-rivet-error"] == "request.creation_rate_limited"
        assert refused.headers["retry-after"] == "100"
        assert await runtime.dispatch.find("thing", "c") is None  # nothing was created
        # Existing actors stay reachable by getOrCreate, get and id.
        assert [await _ping(http, key) for key in ("a", "b", "a")] == ["ok"] * 3
        assert await _ping(http, "a", "get") == "ok"
        # create and the management API share the address's bucket.
        assert await _ping(http, "d", "create") == "creation_rate_limited"
        put = await http.put("/actors", json={"name": "thing", "key": "e"})
        assert (put.status_code, put.headers["retry-after"]) == (429, "100")
        assert put.json()["code"] == "creation_rate_limited"
        existing = await http.put("/actors", json={"name": "thing", "key": "a"})
        assert existing.status_code == 200
        assert existing.json()["created"] is False
        post = await http.post("/actors", json={"name": "thing", "key": "f"})
        assert post.status_code == 429
    async with _client(runtime, caps, "192.0.2.2") as other:
        assert await _ping(other, "g") == "ok"  # another address, another bucket
    # The in-process client is not limited.
    for key in "hijk":
        assert await runtime.client().thing.get_or_create(key).ping() == "pong"


async def test_the_management_api_creates_within_the_rate(runtime: ActorRuntime) -> None:
    caps = ClientCaps(creation_rate=0.01, creation_burst=1)
    async with _client(runtime, caps, "192.0.2.3") as http:
        created = await http.post("/actors", json={"name": "thing", "key": "m"})
        assert created.status_code == 200, created.text
        again = await http.put("/actors", json={"name": "thing", "key": "n"})
        assert again.status_code == 429

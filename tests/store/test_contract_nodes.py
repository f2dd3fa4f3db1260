"""The membership part of the store contract (perdure.store.base), run against every
backend: registering, heartbeating, listing and deregistering nodes, and the live-lease
count of each node.

As in test_contract_leases.py, times passed as ``now`` are far in the past of the real
clock (the store's own clock sees them as expired) or relative to each other.
"""

from __future__ import annotations

from typing import Any

import pytest

from perdure.errors import ActorOwnedElsewhere
from perdure.store import NodeRecord, Store
from perdure.store._shared import wall_clock_ms

from .test_contract import NOW, record
from .test_contract_leases import LONG, PAST

ADDRESS = "http://10.0.0.5:6420"


# --- registering, heartbeating, listing -------------------------------------------------


async def test_registered_nodes_are_listed_by_id_while_live(store: Store) -> None:
    two = await store.register_node("n2", "http://n2:6420", 2_000, now=NOW)
    one = await store.register_node("n1", ADDRESS, 1_000, now=NOW)
    assert one == NodeRecord("n1", ADDRESS, NOW, NOW, NOW + 1_000)
    assert (one.draining, one.actors) == (False, 0)
    assert two == NodeRecord("n2", "http://n2:6420", NOW, NOW, NOW + 2_000)
    assert await store.list_nodes(now=NOW + 999) == [one, two]
    # Dead once expires_at is reached, on the caller's clock …
    assert await store.list_nodes(now=NOW + 1_000) == [two]
    assert await store.list_nodes(now=NOW + 2_000) == []
    assert await store.list_nodes(now=NOW + 2_000, include_dead=True) == [one, two]
    # … and on the store's own, where NOW is long past.
    assert await store.list_nodes() == []
    assert await store.list_nodes(include_dead=True) == [one, two]
    live = await store.register_node("n0", ADDRESS, LONG)
    assert live.started_at == live.heartbeat_at
    assert abs(live.started_at - wall_clock_ms()) < 60_000
    assert live.expires_at == live.heartbeat_at + LONG
    assert await store.list_nodes() == [live]


async def test_registering_again_replaces_the_node(store: Store) -> None:
    await store.register_node("n1", ADDRESS, 1_000, now=NOW)
    await store.heartbeat_node("n1", 1_000, draining=True, now=NOW + 100)
    again = await store.register_node("n1", "http://10.0.0.6:6420", 5_000, now=NOW + 200)
    assert again == NodeRecord("n1", "http://10.0.0.6:6420", NOW + 200, NOW + 200, NOW + 5_200)
    assert not again.draining
    assert await store.list_nodes(now=NOW + 300, include_dead=True) == [again]


async def test_a_heartbeat_extends_the_node_and_sets_draining(store: Store) -> None:
    await store.register_node("n1", ADDRESS, 1_000, now=NOW)
    beat = await store.heartbeat_node("n1", 2_000, now=NOW + 900)
    assert beat == NodeRecord("n1", ADDRESS, NOW, NOW + 900, NOW + 2_900)
    assert await store.list_nodes(now=NOW + 1_500) == [beat]  # dead without the heartbeat
    draining = await store.heartbeat_node("n1", 2_000, draining=True, now=NOW + 1_000)
    assert draining == NodeRecord("n1", ADDRESS, NOW, NOW + 1_000, NOW + 3_000, draining=True)
    assert await store.list_nodes(now=NOW + 1_500) == [draining]
    back = await store.heartbeat_node("n1", 2_000, now=NOW + 1_100)
    assert back is not None
    assert not back.draining
    live = await store.heartbeat_node("n1", LONG)
    assert live is not None
    assert abs(live.heartbeat_at - wall_clock_ms()) < 60_000
    assert live.expires_at == live.heartbeat_at + LONG
    assert await store.list_nodes() == [live]


async def test_a_heartbeat_of_an_unknown_node_answers_none_and_registers_nothing(
    store: Store,
) -> None:
    assert await store.heartbeat_node("ghost", 1_000, now=NOW) is None
    assert await store.heartbeat_node("ghost", 1_000, draining=True) is None
    assert await store.list_nodes(include_dead=True) == []


async def test_deregistering_removes_the_node(store: Store) -> None:
    await store.register_node("n1", ADDRESS, LONG)
    two = await store.register_node("n2", ADDRESS, LONG)
    await store.deregister_node("n1")
    assert await store.list_nodes(include_dead=True) == [two]
    await store.deregister_node("n1")  # twice is fine
    await store.deregister_node("ghost")
    assert await store.heartbeat_node("n1", LONG) is None  # so the node registers again
    one = await store.register_node("n1", ADDRESS, LONG)
    assert await store.list_nodes() == [one, two]


async def test_ttls_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.register_node("n1", ADDRESS, 0)
    await store.register_node("n1", ADDRESS, 1_000, now=NOW)
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.heartbeat_node("n1", -5)
    [node] = await store.list_nodes(include_dead=True)
    assert node.expires_at == NOW + 1_000  # the refused heartbeat changed nothing


# --- each node's actors -----------------------------------------------------------------


async def test_listed_nodes_count_the_actors_they_own(store: Store) -> None:
    for actor_id in ("a1", "a2", "a3", "a4", "a5"):
        await store.create_actor(record(actor_id))
    for node_id in ("n1", "n2", "n3"):
        await store.register_node(node_id, ADDRESS, LONG)
    await store.acquire_lease("a1", "n1", LONG)
    _, a2 = await store.acquire_lease("a2", "n1", LONG)
    await store.acquire_lease("a3", "n1", 1_000, now=PAST)  # its own expiry long past
    await store.acquire_lease("a4", "n2", LONG)
    await store.acquire_lease("a5", "gone", 1_000, now=PAST)  # a node that is not registered

    async def counts(**options: Any) -> dict[str, int]:
        return {node.node_id: node.actors for node in await store.list_nodes(**options)}

    # A heartbeating node holds its leases whatever their own expiry: a3 counts.
    assert await counts() == {"n1": 3, "n2": 1, "n3": 0}
    await store.release_lease(a2)
    await store.delete_actor("a1")
    assert await counts() == {"n1": 1, "n2": 1, "n3": 0}
    await store.acquire_lease("a5", "n2", LONG)  # the unregistered owner's lease lapsed
    assert await counts() == {"n1": 1, "n2": 2, "n3": 0}
    await store.heartbeat_node("n2", 1_000, now=NOW)  # n2 is dead, its rows still name it
    assert await counts() == {"n1": 1, "n3": 0}
    assert await counts(include_dead=True) == {"n1": 1, "n2": 2, "n3": 0}
    # A directory read without counts (what a node does every heartbeat) counts nothing.
    assert await counts(include_dead=True, count_actors=False) == {"n1": 0, "n2": 0, "n3": 0}


async def test_a_heartbeating_node_keeps_its_leases_past_their_own_expiry(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.register_node("n1", ADDRESS, 10_000, now=NOW)
    _, lease = await store.acquire_lease("a1", "n1", 1_000, now=NOW)
    # Past the lease's own expiry, the node's heartbeat keeps others out.
    with pytest.raises(ActorOwnedElsewhere) as refused:
        await store.acquire_lease("a1", "n2", LONG, now=NOW + 5_000)
    assert refused.value.metadata["expires_at"] == NOW + 10_000  # when it may lapse
    await store.heartbeat_node("n1", 10_000, now=NOW + 9_000)  # still alive: held on
    with pytest.raises(ActorOwnedElsewhere):
        await store.acquire_lease("a1", "n2", LONG, now=NOW + 15_000)
    # The node stops heartbeating: its leases lapse with its heartbeat.
    _, taken = await store.acquire_lease("a1", "n2", LONG, now=NOW + 19_000)
    assert taken.generation == lease.generation + 1
    assert await store.get_lease("a1") == taken


async def test_a_lone_server_cannot_claim_an_actor_of_a_heartbeating_node(store: Store) -> None:
    await store.create_actor(record("a1"))
    await store.register_node("n1", ADDRESS, LONG)  # on the store's clock: alive
    await store.acquire_lease("a1", "n1", 1_000, now=PAST)  # its own expiry long past
    with pytest.raises(ActorOwnedElsewhere):
        await store.claim_actor("a1")
    await store.deregister_node("n1")  # gone: nothing keeps the actor any more
    claimed = await store.claim_actor("a1")
    assert claimed is not None
    assert await store.get_lease("a1") is None


async def test_a_node_announces_its_code_version(store: Store) -> None:
    """The version a node registers with (issue 33) is listed, kept by heartbeats, and
    replaced when the node registers again (a restart on new code)."""
    node = await store.register_node("n1", ADDRESS, 60_000, code_version="v1")
    await store.register_node("n2", ADDRESS, 60_000)
    assert node.code_version == "v1"
    await store.heartbeat_node("n1", 60_000, draining=True)
    listed = {n.node_id: n.code_version for n in await store.list_nodes()}
    assert listed == {"n1": "v1", "n2": None}
    await store.register_node("n1", ADDRESS, 60_000, code_version="v2")
    assert [n.code_version for n in await store.list_nodes()] == ["v2", None]

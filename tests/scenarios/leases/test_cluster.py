"""Dead letters in a cluster (two real nodes on one PostgreSQL schema): listed, requeued
and dropped through the admin API of a node that does not own the actor. The listing
reads the shared store; requeue and drop are forwarded to the owner, whose live queue
then has the message back (or not)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from perdure.client import Client
from tests.support.cluster import Cluster

from .test_dead_letters_admin import _two_dead_letters

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def test_dead_letters_through_a_node_that_does_not_own_the_actor(tmp_path: Path) -> None:
    env = {"PERDURE_LEASE_S": "30"}
    with Cluster("tests.support.apps.leases:registry", 2, base_dir=tmp_path, env=env) as cluster:
        owner, other = cluster.nodes
        actor_id = _two_dead_letters(owner.url, "clustered")  # it lives on the owner
        base = f"{other.url}/admin/actors/{actor_id}/dead-letters"
        with httpx.Client(timeout=20) as http:
            listed = http.get(base).json()["dead_letters"]
            assert [(letter["id"], letter["attempts"]) for letter in listed] == [(1, 3), (2, 3)]
            requeued = http.post(f"{base}/1/requeue").json()
            assert requeued == {"requeued": {"id": 1, "queue": "jobs", "attempts": 0}}
            with Client(owner.url) as client:
                worker = client.worker.get_or_create("clustered")
                assert worker.take() == {"id": 1, "body": {"n": 1}, "attempts": 1}
                worker.complete(1)
            assert http.delete(f"{base}/2").json() == {}
            assert http.get(base).json() == {"dead_letters": []}
            refused = http.delete(f"{base}/2")
            assert (refused.status_code, refused.json()["code"]) == (404, "dead_letter_not_found")
        # The actor never moved: the other node forwarded to its owner.
        rows = {node["node_id"]: node["actors"] for node in cluster.live_nodes()}
        assert rows == {owner.node_id: 1, other.node_id: 0}

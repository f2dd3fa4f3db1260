"""The operator's view of a real cluster: ``perdure nodes`` and ``/metadata`` name the nodes
(the node flags of ``perdure serve`` are checked in tests/cli/test_app_nodes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.cluster import Cluster

pytestmark = pytest.mark.postgres


def test_nodes_and_metadata_name_the_nodes(tmp_path: Path) -> None:
    with Cluster("tests.scenarios.cluster.app:registry", 2, base_dir=tmp_path) as cluster:
        first, second = cluster.nodes
        meta = httpx.get(f"{second.url}/metadata", timeout=5).json()
        from perdure.registry import registry_digest
        from tests.scenarios.cluster.app import registry

        version = registry_digest(registry)  # each node announces its code's version
        assert meta["node"] == {
            "id": second.node_id,
            "address": second.url,
            "code_version": version,
        }
        health = httpx.get(f"{first.url}/health", timeout=5).json()
        assert health["node"]["id"] == first.node_id
        # An actor woken through the first node is counted there.
        httpx.post(
            f"{first.url}/gateway/alarmActor/action/fires?rvt-method=getOrCreate&rvt-key=k",
            json={"args": []},
            timeout=10,
        ).raise_for_status()
        listed = cluster.live_nodes()
        assert [(n["node_id"], n["actors"], n["alive"]) for n in listed] == [
            (first.node_id, 1, True),
            (second.node_id, 0, True),
        ]
        text = cluster.nodes_command()
        assert f"{first.node_id}  {first.url}  live  code {version}  1 actor(s)" in text
        assert {n["code_version"] for n in listed} == {version}
        second.kill()
        dead = cluster.nodes_command("--all", "--json")
        rows = {row["node_id"]: row for row in map(json.loads, dead.splitlines())}
        assert set(rows) == {first.node_id, second.node_id}  # killed: listed until it expires

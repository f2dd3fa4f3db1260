"""The operator's view of a cluster: ``perdure nodes``, ``/metadata``, and the node flags."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest

from perdure.cli.app import CliError, _node_config, _parser, main
from tests.support.cluster import Cluster

pytestmark = pytest.mark.postgres


def serve_args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", "app:registry", *argv])


def test_node_defaults_suit_one_host() -> None:
    args = serve_args("--host", "0.0.0.0", "--port", "7001")
    node = _node_config(args, "postgresql://db/x")
    assert node is not None
    assert node.address == "http://127.0.0.1:7001"
    assert node.node_id.endswith("-7001")
    assert node.lease_ttl_ms == 5000


def test_node_flags_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_NODE_ID", "from-env")
    args = serve_args("--advertise", "http://10.0.0.5:6420/", "--lease-ttl", "2.5")
    node = _node_config(args, "postgresql://db/x")
    assert node is not None
    assert (node.node_id, node.address, node.lease_ttl_ms) == (
        "from-env",
        "http://10.0.0.5:6420",
        2500,
    )
    assert _node_config(serve_args(), "/data/perdure.db") is None  # SQLite: no cluster
    with pytest.raises(CliError, match="need a PostgreSQL store"):
        _node_config(serve_args("--node-id", "a"), "/data/perdure.db")
    with pytest.raises(CliError, match="http:// or https://"):
        _node_config(serve_args("--advertise", "10.0.0.5:6420"), "postgresql://db/x")
    with pytest.raises(CliError, match="at least 300 ms"):
        _node_config(serve_args("--lease-ttl", "0.1"), "postgresql://db/x")


def test_sqlite_refuses_node_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "tests.server_app:registry", "--data", str(tmp_path), "--node-id", "a"]
    assert main(argv) == 2
    assert "need a PostgreSQL store" in capsys.readouterr().err


def test_nodes_and_metadata_name_the_nodes(tmp_path: Path) -> None:
    with Cluster("tests.failover_app:registry", 2, base_dir=tmp_path) as cluster:
        first, second = cluster.nodes
        meta = httpx.get(f"{second.url}/metadata", timeout=5).json()
        assert meta["node"] == {"id": second.node_id, "address": second.url}
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
        assert f"{first.node_id}  {first.url}  live  1 actor(s)" in text
        second.kill()
        dead = cluster.nodes_command("--all", "--json")
        rows = {row["node_id"]: row for row in map(json.loads, dead.splitlines())}
        assert set(rows) == {first.node_id, second.node_id}  # killed: listed until it expires

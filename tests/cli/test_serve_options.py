"""The node flags of ``perdure serve`` (``perdure.cli.app``): their defaults and checks (the
operator's view of a real cluster, ``perdure nodes`` and ``/metadata``, is
tests/scenarios/cluster/test_cli_nodes.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from perdure.cli.app import CliError, _parser, main
from perdure.cli.serve_options import node_config

pytestmark = pytest.mark.postgres


def serve_args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", "app:registry", *argv])


def test_node_defaults_suit_one_host() -> None:
    args = serve_args("--host", "0.0.0.0", "--port", "7001")
    node = node_config(args, "postgresql://db/x")
    assert node is not None
    assert node.address == "http://127.0.0.1:7001"
    assert node.node_id.endswith("-7001")
    assert node.lease_ttl_ms == 5000


def test_node_flags_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_NODE_ID", "from-env")
    args = serve_args("--advertise", "http://10.0.0.5:6420/", "--lease-ttl", "2.5")
    node = node_config(args, "postgresql://db/x")
    assert node is not None
    assert (node.node_id, node.address, node.lease_ttl_ms) == (
        "from-env",
        "http://10.0.0.5:6420",
        2500,
    )
    assert node_config(serve_args(), "/data/perdure.db") is None  # SQLite: no cluster
    with pytest.raises(CliError, match="need a PostgreSQL store"):
        node_config(serve_args("--node-id", "a"), "/data/perdure.db")
    with pytest.raises(CliError, match="http:// or https://"):
        node_config(serve_args("--advertise", "10.0.0.5:6420"), "postgresql://db/x")
    with pytest.raises(CliError, match="at least 300 ms"):
        node_config(serve_args("--lease-ttl", "0.1"), "postgresql://db/x")


def test_sqlite_refuses_node_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "serve",
        "tests.support.apps.server:registry",
        "--data",
        str(tmp_path),
        "--node-id",
        "a",
    ]
    assert main(argv) == 2
    assert "need a PostgreSQL store" in capsys.readouterr().err


def test_the_cluster_secret_is_the_flag_or_the_environment_never_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PERDURE_CLUSTER_SECRET", raising=False)
    token = "a-client-token-0123456789"
    # Without one the nodes agree on a secret through the store (cli/cluster_secret.py):
    # the client token, which every client has, does not stand in for it.
    node = node_config(serve_args("--token", token), "postgresql://db/x")
    assert node is not None
    assert node.secret is None
    node = node_config(serve_args("--cluster-secret", "s3cret"), "postgresql://db/x")
    assert node is not None
    assert node.secret == "s3cret"
    monkeypatch.setenv("PERDURE_CLUSTER_SECRET", "from-env")
    node = node_config(serve_args("--token", token), "postgresql://db/x")
    assert node is not None
    assert node.secret == "from-env"
    with pytest.raises(CliError, match="printable ASCII"):
        node_config(serve_args("--cluster-secret", "two\nlines"), "postgresql://db/x")

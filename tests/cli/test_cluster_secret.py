"""The cluster's secret from the command line (perdure.cli.cluster_secret): what
``perdure serve`` agrees on before it serves, and ``perdure reset-cluster-secret``. The
refusal of a real node with another secret is in
tests/scenarios/cluster/test_cluster_secret.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from perdure.cli.app import main
from perdure.cli.cluster_secret import agreed_node
from perdure.errors import ClusterSecretMismatch
from perdure.runtime import NodeConfig
from perdure.store import ClusterSecret
from tests.support.cluster import store_url
from tests.support.postgres import drop_schema, new_schema_name, postgres_store, require_postgres
from tests.support.server import free_port

pytestmark = pytest.mark.postgres

NODE = NodeConfig("node-a", "http://127.0.0.1:6421")


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema (a cluster's database), dropped afterwards."""
    require_postgres()
    name = new_schema_name()
    try:
        yield name
    finally:
        drop_schema(name)


def _kept(schema: str) -> ClusterSecret:
    async def read() -> ClusterSecret:
        store = postgres_store(schema)
        await store.open()
        try:
            return await store.keep_cluster_secret(ClusterSecret(secret="probe"))
        finally:
            await store.close()

    return asyncio.run(asyncio.wait_for(read(), 20))


def test_a_node_without_a_secret_gets_the_one_its_cluster_agreed_on(schema: str) -> None:
    url = store_url(schema)
    first = agreed_node(NODE, url, 5.0)
    assert first.secret is not None
    assert len(first.secret) >= 40
    assert (first.node_id, first.address) == (NODE.node_id, NODE.address)
    assert agreed_node(NodeConfig("node-b", "http://127.0.0.1:6422"), url, 5.0) == (
        NodeConfig("node-b", "http://127.0.0.1:6422", secret=first.secret)
    )
    assert _kept(schema) == ClusterSecret(secret=first.secret)
    with pytest.raises(ClusterSecretMismatch):
        agreed_node(NodeConfig("node-c", "http://c", secret="mine"), url, 5.0)


def test_a_reset_lets_the_next_node_set_the_secret(
    schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url(schema)
    agreed_node(NODE, url, 5.0)  # agreed, with no flag
    configured = NodeConfig("node-a", "http://127.0.0.1:6421", secret="the-new-secret")
    with pytest.raises(ClusterSecretMismatch, match="perdure reset-cluster-secret"):
        agreed_node(configured, url, 5.0)
    assert main(["reset-cluster-secret", "--store", url]) == 0
    assert "forgotten" in capsys.readouterr().out
    assert agreed_node(configured, url, 5.0).secret == "the-new-secret"
    kept = _kept(schema)
    assert kept.secret is None  # configured: only its digest is kept
    assert kept.digest is not None
    assert "the-new-secret" not in kept.digest
    with pytest.raises(ClusterSecretMismatch, match="start it with the same --cluster-secret"):
        agreed_node(NODE, url, 5.0)
    assert main(["reset-cluster-secret", "--store", url]) == 0
    assert main(["reset-cluster-secret", "--store", url]) == 0
    assert "keeps no cluster secret" in capsys.readouterr().out


def test_a_store_that_does_not_answer_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()  # nothing listens there
    code = main(
        [
            "serve",
            "examples.app:registry",
            "--port",
            "0",
            "--store",
            f"postgresql://root@127.0.0.1:{port}/test",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("perdure: error: cannot agree on the cluster's secret: ")
    assert "check --store" in err
    assert "Traceback" not in err

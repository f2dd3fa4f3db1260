"""The nodes of a real cluster always authenticate each other (issue 29, item 3).

- Started with no secret flag, the nodes agree on a secret through the database: the
  forward route refuses whoever does not present it (an actor survives a forged
  ``$destroy``), and calls forwarded between the nodes still work.
- A node given another secret than its cluster's (or none where the cluster's was set
  with ``--cluster-secret``) exits with status 1 and a message naming the flag, and never
  registers.
- Nodes given the same ``--cluster-secret`` work as before, and the database keeps only
  a digest of it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import cbor2
import httpx
import psycopg
import pytest
from psycopg import sql

from tests.support.cluster import Cluster, ClusterNode
from tests.support.postgres import POSTGRES_URL

pytestmark = [pytest.mark.cluster, pytest.mark.postgres, pytest.mark.timeout(180)]

REGISTRY = "tests.scenarios.cluster.app:registry"
WAIT = 10.0
SECRET_HEADER = "x-perdure-cluster-secret"


def _secret_rows(schema: str) -> list[tuple[Any, ...]]:
    """The cluster_secret table's ``(secret, digest)`` rows."""
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn.execute("SELECT secret, digest FROM cluster_secret").fetchall()


def _forward(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    """``POST url/.perdure/forward`` with a CBOR body: ``(status, decoded answer)``."""
    response = httpx.post(
        f"{url}/.perdure/forward",
        content=cbor2.dumps(body),
        headers={"content-type": "application/cbor", **(headers or {})},
        timeout=WAIT,
    )
    return response.status_code, cbor2.loads(response.content)


def _call(url: str, target: str, action: str, query: str = "") -> httpx.Response:
    return httpx.post(
        f"{url}/gateway/{target}/action/{action}{query}", json={"args": []}, timeout=WAIT
    )


def _owner_counts(cluster: Cluster) -> list[tuple[str, int]]:
    return [(node["node_id"], node["actors"]) for node in cluster.live_nodes()]


def test_without_secret_flags_the_forward_route_is_closed_to_strangers(tmp_path: Path) -> None:
    with Cluster(REGISTRY, 2, base_dir=tmp_path) as cluster:
        first, second = cluster.urls
        key = f"k-{uuid.uuid4().hex[:12]}"
        created = _call(first, "alarmActor", "fires", f"?rvt-method=getOrCreate&rvt-key={key}")
        assert created.status_code == 200, created.text
        actor_id = created.headers["x-rivet-actor"]  # awake on node 0
        destroy = {"actor": actor_id, "op": "$destroy"}
        for url in (first, second):
            for headers in ({}, {SECRET_HEADER: "a-guess"}, {SECRET_HEADER: ""}):
                status, answer = _forward(url, destroy, headers)
                assert status == 403, answer
                assert (answer["error"]["group"], answer["error"]["code"]) == (
                    "actor",
                    "forbidden",
                )

        # The actor survived, and a call reaching node 1 is forwarded to node 0.
        answered = _call(second, actor_id, "fires")
        assert answered.status_code == 200, answered.text + cluster.logs()
        assert answered.json()["output"] == 0
        assert _owner_counts(cluster) == [("node-0", 1), ("node-1", 0)]
        # The nodes agreed on one random secret, kept in the database; the route serves
        # whoever presents it (a node).
        [(agreed, digest)] = _secret_rows(cluster.schema)
        assert digest is None
        assert len(agreed) >= 40
        status, answer = _forward(
            first,
            {"actor": actor_id, "op": "call", "action": "fires", "args": []},
            {SECRET_HEADER: agreed},
        )
        assert (status, answer.get("result")) == (200, 0), answer


@pytest.mark.parametrize(
    ("cluster_args", "intruder_args", "says"),
    [
        pytest.param(
            [],
            ["--cluster-secret", "my-own-secret"],
            "start it without --cluster-secret and PERDURE_CLUSTER_SECRET",
            id="agreed-cluster-flagged-node",
        ),
        pytest.param(
            ["--cluster-secret", "the-cluster-secret"],
            ["--cluster-secret", "not-the-cluster-secret"],
            "is not the secret this cluster's nodes were started with",
            id="wrong-flag",
        ),
        pytest.param(
            ["--cluster-secret", "the-cluster-secret"],
            [],
            "start it with the same --cluster-secret",
            id="missing-flag",
        ),
    ],
)
def test_a_node_with_another_secret_refuses_to_join(
    tmp_path: Path, cluster_args: list[str], intruder_args: list[str], says: str
) -> None:
    with Cluster(REGISTRY, 1, base_dir=tmp_path, extra_args=cluster_args) as cluster:
        intruder = ClusterNode(
            REGISTRY,
            tmp_path / "intruder",
            store=cluster.store,
            node_id="intruder",
            extra_args=intruder_args,
        )
        try:
            with pytest.raises(RuntimeError, match="exited early"):
                intruder.start()  # bounded: START_TIMEOUT
        finally:
            intruder.kill()
        assert intruder.process is not None
        assert intruder.process.returncode == 1, intruder.log()
        log = intruder.log()
        assert "perdure: error: " in log
        assert says in log
        assert "Traceback" not in log
        # Never registered, not even as a dead node.
        assert [node["node_id"] for node in _all_nodes(cluster)] == ["node-0"]
        # The cluster's secret is as it was.
        [(secret, _digest)] = _secret_rows(cluster.schema)
        assert (secret is None) == bool(cluster_args)


def _all_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    """Every node registered and not deregistered, live or dead (``perdure nodes --all``)."""
    return [json.loads(line) for line in cluster.nodes_command("--all", "--json").splitlines()]


def test_nodes_with_the_same_secret_flag_work_and_the_database_keeps_a_digest(
    tmp_path: Path,
) -> None:
    secret = f"configured-{uuid.uuid4().hex}"
    with Cluster(
        REGISTRY, 2, base_dir=tmp_path, extra_args=["--cluster-secret", secret]
    ) as cluster:
        first, second = cluster.urls
        key = f"k-{uuid.uuid4().hex[:12]}"
        created = _call(first, "alarmActor", "fires", f"?rvt-method=getOrCreate&rvt-key={key}")
        assert created.status_code == 200, created.text
        actor_id = created.headers["x-rivet-actor"]
        answered = _call(second, actor_id, "fires")  # forwarded to node 0
        assert answered.status_code == 200, answered.text + cluster.logs()
        assert _owner_counts(cluster) == [("node-0", 1), ("node-1", 0)]
        status, _ = _forward(first, {"actor": actor_id, "op": "$destroy"})
        assert status == 403
        # Only a salted digest is kept: not the secret, in that table or anywhere else.
        [(kept, digest)] = _secret_rows(cluster.schema)
        assert kept is None
        assert digest.startswith("pbkdf2-sha256$")
        assert secret not in digest
        assert secret not in _dump_text(cluster.schema)


def _dump_text(schema: str) -> str:
    """Every text value of every table in ``schema``, joined (what a database reader sees)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            ).fetchall()
        ]
        parts = []
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} AS t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            parts.extend(row[0] for row in conn.execute(query).fetchall())
    return "\n".join(parts)

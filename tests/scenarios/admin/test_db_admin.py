"""An actor's SQL database through the admin API (``/admin/actors/{id}/db/…``) and
``perdure db``, on a real server (SQLite): its tables with their schema, paged rows and
read-only queries, read from the store as committed; a statement that writes is refused
(``db.read_only``) and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from perdure.client import Client
from tests.scenarios.cli.conftest import Cli
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(
        "tests.support.apps.db_view:storage",
        tmp_path_factory.mktemp("db-admin"),
        extra_args=["--log-level", "warning"],
    )
    process.start()
    try:
        with Client(process.url) as client:
            notes = client.notes.get_or_create("n")
            for index in range(5):
                notes.add(f"<b>note {index}</b>", index / 2)
        yield process
    finally:
        process.kill()


def _actor_id(server: ServerProcess) -> str:
    with Client(server.url) as client:
        return str(client.notes.get_or_create("n").resolve())


def _get(server: ServerProcess, path: str, **params: Any) -> httpx.Response:
    actor = _actor_id(server)
    return httpx.get(f"{server.url}/admin/actors/{actor}/db{path}", params=params, timeout=10)


def _query(server: ServerProcess, sql: str, *params: Any) -> httpx.Response:
    actor = _actor_id(server)
    body = {"sql": sql, "params": list(params)}
    return httpx.post(f"{server.url}/admin/actors/{actor}/db/query", json=body, timeout=10)


def test_tables_rows_and_queries(server: ServerProcess) -> None:
    tables = _get(server, "/tables").json()["tables"]
    assert [(t["name"], t["type"]) for t in tables] == [("notes", "table")]
    assert [(c["name"], c["type"], c["pk"]) for c in tables[0]["columns"]] == [
        ("id", "INTEGER", 1),
        ("body", "TEXT", 0),
        ("n", "REAL", 0),
    ]
    page = _get(server, "/tables/notes/rows", offset=1, limit=2).json()
    assert page["columns"] == ["id", "body", "n"]
    assert page["rows"] == [[2, "<b>note 1</b>", 0.5], [3, "<b>note 2</b>", 1.0]]
    assert (page["total"], page["offset"]) == (5, 1)
    found = _query(server, "SELECT count(*) AS c, max(n) AS m FROM notes WHERE id > ?", 2)
    assert found.json() == {"columns": ["c", "m"], "rows": [[3, 2.0]]}


def test_refusals_change_nothing(server: ServerProcess) -> None:
    for sql in ("DELETE FROM notes", "PRAGMA user_version = 7", "ATTACH 'x.db' AS x"):
        refused = _query(server, sql)
        assert refused.status_code == 400, refused.text
        assert (refused.json()["group"], refused.json()["code"]) == ("db", "read_only")
    assert _query(server, "SELECT count(*) FROM notes").json()["rows"] == [[5]]
    many = _query(
        server, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    )
    assert many.json()["code"] == "too_many_rows"
    assert _get(server, "/tables/nope/rows").json()["code"] == "no_such_table"
    missing = httpx.get(f"{server.url}/admin/actors/no-such/db/tables", timeout=10)
    assert missing.status_code == 404
    paths = httpx.get(f"{server.url}/admin/openapi.json", timeout=10).json()["paths"]
    assert {"/admin/actors/{actor_id}/db/tables", "/admin/actors/{actor_id}/db/query"} <= set(paths)


def test_the_db_command(server: ServerProcess) -> None:
    cli = Cli(server.url)
    assert cli.ok("db", "notes", "n").splitlines() == [
        "table notes (id INTEGER PRIMARY KEY, body TEXT, n REAL)"
    ]
    rows = cli.ok("db", "notes", "n", "--rows", "notes", "--limit", "2").splitlines()
    assert rows == [
        "id\tbody\tn",
        "1\t<b>note 0</b>\t0.0",
        "2\t<b>note 1</b>\t0.5",
        "(2 of 5 rows from offset 0)",
    ]
    out = cli.ok(
        "db", "notes", "n", "--query", "SELECT body FROM notes WHERE id = ?", "--param", "3"
    )
    assert out.splitlines() == ["body", "<b>note 2</b>", "(1 row)"]
    answer = json.loads(cli.ok("db", "notes", "n", "--query", "SELECT 1 AS one", "--json"))
    assert answer == {"columns": ["one"], "rows": [[1]]}
    assert "(db.read_only)" in cli.fails("db", "notes", "n", "--query", "DELETE FROM notes")

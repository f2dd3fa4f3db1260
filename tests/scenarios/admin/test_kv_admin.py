"""An actor's KV records through the admin API (``GET /admin/actors/{id}/kv``) and
``perdure kv``, on a real server (SQLite): paged in key order with a cursor, by string
prefix, bytes keys shown as ``["$Uint8Array", base64]``, and refused with coded errors
for a wrong actor or cursor."""

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
        "tests.support.apps.kv:registry",
        tmp_path_factory.mktemp("kv-admin"),
        extra_args=["--log-level", "warning"],
    )
    process.start()
    try:
        with Client(process.url) as client:
            kv = client.kvActor.get_or_create("shop")
            for index in range(7):
                kv.putText(f"item:{index}", f"value {index}")
            kv.putText("other", "x")
            kv.putBytes(b"\x00\xff", {"blob": True})
        yield process
    finally:
        process.kill()


def _page(server: ServerProcess, actor_id: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.url}/admin/actors/{actor_id}/kv", params=params, timeout=10)


def _actor_id(server: ServerProcess) -> str:
    with Client(server.url) as client:
        return str(client.kvActor.get_or_create("shop").resolve())


def test_pages_in_key_order_with_a_cursor(server: ServerProcess) -> None:
    actor_id = _actor_id(server)
    first = _page(server, actor_id, limit=4).json()
    # The bytes key first (bytes keys sort before string keys), then the strings.
    assert [r["key"] for r in first["records"]] == [
        ["$Uint8Array", "AP8="],
        "item:0",
        "item:1",
        "item:2",
    ]
    assert first["records"][0]["value"] == {"blob": True}
    assert first["records"][1] == {"key": "item:0", "value": "value 0", "size": 8}
    keys: list[Any] = [r["key"] for r in first["records"]]
    cursor = first["next"]
    while cursor is not None:
        page = _page(server, actor_id, limit=4, after=cursor).json()
        keys += [r["key"] for r in page["records"]]
        cursor = page["next"]
    assert keys[1:] == [f"item:{i}" for i in range(7)] + ["other"]
    by_prefix = _page(server, actor_id, prefix="item:", limit=500).json()
    assert [r["key"] for r in by_prefix["records"]] == [f"item:{i}" for i in range(7)]
    assert by_prefix["next"] is None


def test_refusals(server: ServerProcess) -> None:
    missing = _page(server, "no-such-actor")
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found"
    bad = _page(server, _actor_id(server), after="not hex")
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid_request"


def test_the_kv_command(server: ServerProcess) -> None:
    cli = Cli(server.url)
    out = cli.ok("kv", "kvActor", "shop", "--prefix", "item:", "--limit", "3")
    lines = out.splitlines()
    assert lines[:3] == [
        '"item:0"  "value 0"  (8 bytes)',
        '"item:1"  "value 1"  (8 bytes)',
        '"item:2"  "value 2"  (8 bytes)',
    ]
    assert lines[3].startswith("more: --after ")
    cursor = lines[3].split()[-1]
    rest = cli.ok("kv", "kvActor", "shop", "--prefix", "item:", "--after", cursor, "--json")
    assert [r["key"] for r in json.loads(rest)["records"]] == [f"item:{i}" for i in range(3, 7)]
    assert "no KV records" in cli.ok("kv", "kvActor", "shop", "--prefix", "none:")

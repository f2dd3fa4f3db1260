"""``/actors`` management routes, ``/metadata`` and ``/health``."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator

import cbor2
import httpx
import pytest

from .helpers import call, state_of
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


async def test_health_and_metadata(server: ServerProcess, client: httpx.AsyncClient) -> None:
    health = await client.get(f"{server.url}/health")
    assert health.json()["status"] == "ok"
    metadata = (await client.get(f"{server.url}/metadata", params={"namespace": "default"})).json()
    assert metadata["runtime"] == "perdure"
    assert set(metadata["actorNames"]) == {"counter", "greeter", "worker", "limits"}
    # The official client switches endpoints when this is present; it must not be.
    assert "clientEndpoint" not in metadata


async def test_put_gets_or_creates(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    body = {
        "name": "counter",
        "key": f"{key}/a\\/b",
        "runner_name_selector": "default",
        "crash_policy": "sleep",
    }
    first = await client.put(f"{server.url}/actors", params={"namespace": "default"}, json=body)
    assert first.status_code == 200, first.text
    actor = first.json()["actor"]
    assert first.json()["created"] is True
    assert (actor["name"], actor["key"]) == ("counter", f"{key}/a\\/b")
    assert isinstance(actor["create_ts"], int)
    second = await client.put(f"{server.url}/actors", json=body)
    assert second.json() == {"actor": actor, "created": False}
    # The gateway reaches the same actor by id; by key, parts joined with commas.
    via_id = await call(client, server, actor["actor_id"], "getState", [], None, None)
    assert via_id.status_code == 200
    via_key = await call(client, server, "counter", "getState", [], f"{key},a/b", "get")
    assert via_key.headers["x-rivet-actor"] == actor["actor_id"]


async def test_put_with_input(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    encoded = base64.b64encode(cbor2.dumps({"greeting": "hey"})).decode()
    made = await client.put(
        f"{server.url}/actors", json={"name": "greeter", "key": key, "input": encoded}
    )
    assert made.status_code == 200, made.text
    response = await call(client, server, "greeter", "greet", ["x"], key, "get")
    assert response.json() == {"output": "hey, x"}


async def test_put_refuses_comma_in_key_part(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    response = await client.put(f"{server.url}/actors", json={"name": "counter", "key": f"{key},x"})
    assert response.status_code == 400
    assert response.json()["code"] == "ambiguous_key"


async def test_post_creates_and_refuses_duplicates(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    made = await client.post(f"{server.url}/actors", json={"name": "counter", "key": key})
    assert made.status_code == 200, made.text
    again = await client.post(f"{server.url}/actors", json={"name": "counter", "key": key})
    assert again.status_code == 400
    assert again.headers["x-rivet-error"] == "actor.duplicate_key"


async def test_list_by_name_key_and_ids(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    made = (await client.post(f"{server.url}/actors", json={"name": "counter", "key": key})).json()
    actor_id = made["actor"]["actor_id"]
    by_key = await client.get(f"{server.url}/actors", params={"name": "counter", "key": key})
    assert [a["actor_id"] for a in by_key.json()["actors"]] == [actor_id]
    by_ids = await client.get(f"{server.url}/actors", params={"actor_ids": f"{actor_id},nope"})
    assert [a["actor_id"] for a in by_ids.json()["actors"]] == [actor_id]
    missing = await client.get(f"{server.url}/actors", params={"name": "counter", "key": "x" + key})
    assert missing.json()["actors"] == []
    by_name = await client.get(f"{server.url}/actors", params={"name": "counter", "limit": "1000"})
    assert actor_id in {a["actor_id"] for a in by_name.json()["actors"]}
    names = await client.get(f"{server.url}/actors/names")
    assert set(names.json()["names"]) == {"counter", "greeter", "worker", "limits"}


async def test_delete_destroys(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    response = await call(client, server, "counter", "increment", [1], key)
    actor_id = response.headers["x-rivet-actor"]
    deleted = await client.delete(f"{server.url}/actors/{actor_id}")
    assert deleted.status_code == 200, deleted.text
    gone = await call(client, server, "counter", "getState", [], key, "get")
    assert gone.status_code == 404
    again = await client.delete(f"{server.url}/actors/{actor_id}")
    assert again.status_code == 404
    # A new actor may take the key afterwards, with fresh state.
    await call(client, server, "counter", "increment", [2], key)
    assert (await state_of(client, server, key))["count"] == 2


async def test_management_errors_are_json(server: ServerProcess, client: httpx.AsyncClient) -> None:
    unknown = await client.put(f"{server.url}/actors", json={"name": "nope", "key": "a"})
    assert unknown.status_code == 400
    assert unknown.json()["code"] == "unknown_name"
    broken = await client.put(
        f"{server.url}/actors", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400
    assert broken.json()["code"] == "invalid_request"
    route = await client.get(f"{server.url}/nowhere")
    assert route.status_code == 404
    assert route.headers["x-rivet-error"] == "actor.route_not_found"


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data; boundary=x", None])
async def test_a_creation_body_must_say_it_is_json(
    server: ServerProcess, client: httpx.AsyncClient, content_type: str | None
) -> None:
    """What a form or a no-cors fetch can send is refused before anything is read."""
    key = f"typed-{uuid.uuid4().hex[:8]}"
    body = json.dumps({"name": "counter", "key": key}).encode()
    headers = {} if content_type is None else {"content-type": content_type}
    for verb in ("PUT", "POST"):
        response = await client.request(verb, f"{server.url}/actors", content=body, headers=headers)
        assert response.status_code == 415, response.text
        assert response.headers["x-rivet-error"] == "request.unsupported_media_type"
        assert response.json()["metadata"]["accepted"] == [
            "application/cbor",
            "application/json",
            "application/octet-stream",
        ]
    listed = await client.get(f"{server.url}/actors", params={"name": "counter", "key": key})
    assert listed.json()["actors"] == []

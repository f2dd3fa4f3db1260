"""Stateless HTTP actions through the gateway, in json, cbor and bare."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import cbor2
import httpx
import pytest

from perdure.protocol.codec import decode_http, encode_http
from perdure.protocol.messages import HttpActionRequest, HttpActionResponse

from .helpers import BARE_HEADERS, call, count_actors, gateway, state_of
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


async def test_json_action_round_trip_with_actor_headers(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    first = await call(client, server, "counter", "increment", [5], key)
    assert first.status_code == 200, first.text
    assert first.json() == {"output": 5}
    assert first.headers["content-type"] == "application/json"
    assert first.headers["x-rivet-actor-key"] == key
    assert first.headers["x-rivet-actor-generation"] == "1"
    actor_id = first.headers["x-rivet-actor"]
    second = await call(client, server, "counter", "increment", [2], key)
    assert second.json() == {"output": 7}
    assert second.headers["x-rivet-actor"] == actor_id


async def test_cbor_action(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    url = gateway(server, "counter", "action/echo", key)
    value = {"n": 2**70, "b": b"\x00\x01", "s": "é"}
    response = await client.post(
        url,
        content=cbor2.dumps({"args": [value]}),
        headers={"x-rivet-encoding": "cbor", "content-type": "application/octet-stream"},
    )
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "application/octet-stream"
    assert cbor2.loads(response.content) == {"output": value}


async def test_bare_action(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    url = gateway(server, "counter", "action/increment", key)
    body = encode_http(HttpActionRequest([3]), "bare")
    response = await client.post(url, content=body, headers=BARE_HEADERS)
    assert response.status_code == 200, response.content
    assert decode_http(response.content, "bare", HttpActionResponse).output == 3


async def test_user_error_keeps_code_message_and_metadata(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    response = await call(client, server, "counter", "fail", [], key)
    assert response.status_code == 500
    assert response.headers["x-rivet-error"] == "user.not_today"
    body = response.json()
    assert body["group"] == "user"
    assert body["code"] == "not_today"
    assert body["message"] == "Not allowed today."
    assert body["metadata"] == {"why": "test"}
    assert body["actor"]["actorId"] == response.headers["x-rivet-actor"]


async def test_unexpected_exception_is_generic_on_the_wire_and_detailed_in_the_log(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    response = await call(client, server, "counter", "crash", [], key)
    assert response.status_code == 500
    body = response.json()
    assert (body["group"], body["code"]) == ("actor", "internal_error")
    assert "secret" not in response.text
    assert "secret internal detail" in server.log()


async def test_get_of_missing_key_is_404_and_creates_nothing(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    before = await count_actors(client, server, "counter")
    response = await call(client, server, "counter", "getState", [], key, "get")
    assert response.status_code == 404
    assert response.headers["x-rivet-error"] == "actor.not_found"
    assert response.json()["code"] == "not_found"
    assert await count_actors(client, server, "counter") == before


async def test_create_of_existing_key_fails(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    created = await call(client, server, "counter", "increment", [1], key, "create")
    assert created.status_code == 200, created.text
    again = await call(client, server, "counter", "increment", [1], key, "create")
    assert again.status_code == 400
    assert again.json()["code"] == "duplicate_key"
    assert await state_of(client, server, key) == {"count": 1, "slept": 0}


async def test_direct_form_reaches_the_actor_by_id(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    first = await call(client, server, "counter", "increment", [4], key)
    actor_id = first.headers["x-rivet-actor"]
    direct = await call(client, server, actor_id, "getState", [], None, None)
    assert direct.status_code == 200, direct.text
    assert direct.json() == {"output": {"count": 4, "slept": 0}}
    with_token = await call(client, server, f"{actor_id}@some-token", "getState", [], None, None)
    assert with_token.json() == direct.json()
    missing = await call(client, server, "0" * 30, "getState", [], None, None)
    assert missing.status_code == 404


async def test_name_without_method_is_a_clear_400(
    server: ServerProcess, client: httpx.AsyncClient
) -> None:
    response = await call(client, server, "counter", "getState", [], None, None)
    assert response.status_code == 400
    assert response.json()["code"] == "missing_method"


async def test_input_is_given_to_create_state(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    encoded = base64.urlsafe_b64encode(cbor2.dumps({"greeting": "hi"})).rstrip(b"=").decode()
    response = await call(
        client, server, "greeter", "greet", ["bob"], key, **{"rvt-input": encoded}
    )
    assert response.json() == {"output": "hi, bob"}
    # The input only matters at creation.
    other = base64.urlsafe_b64encode(cbor2.dumps({"greeting": "yo"})).rstrip(b"=").decode()
    again = await call(client, server, "greeter", "greet", ["al"], key, **{"rvt-input": other})
    assert again.json() == {"output": "hi, al"}


async def test_conn_params_header_reaches_the_action_and_before_connect(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    url = gateway(server, "counter", "action/whoami", key)
    params = '{"user": "ana"}'
    ok = await client.post(url, json={"args": []}, headers={"x-rivet-conn-params": params})
    assert ok.json() == {"output": {"params": {"user": "ana"}, "state": {"user": "ana"}}}
    bad = await client.post(
        url, json={"args": []}, headers={"x-rivet-conn-params": '{"token":"bad"}'}
    )
    assert bad.json()["code"] == "forbidden"
    assert bad.headers["x-rivet-error"] == "user.forbidden"


async def test_comma_key_split_like_the_original_and_ambiguity_refused(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    two_parts = await call(client, server, "counter", "increment", [1], f"{key},b")
    assert two_parts.headers["x-rivet-actor-key"] == f"{key}/b"
    # An actor whose single key part contains the comma, made through the escaped form…
    made = await client.post(f"{server.url}/actors", json={"name": "counter", "key": f"{key},b"})
    assert made.status_code == 200, made.text
    # …makes the comma-joined query ambiguous: refused instead of guessing.
    again = await call(client, server, "counter", "getState", [], f"{key},b", "get")
    assert again.status_code == 400
    assert again.json()["code"] == "ambiguous_key"


async def test_unicode_key_header_is_percent_encoded(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    response = await call(client, server, "counter", "increment", [1], f"{key}-ü")
    assert response.status_code == 200, response.text
    assert response.headers["x-rivet-actor-key"] == f"{key}-%C3%BC"

"""``POST /gateway/{name}/queue/{queue}``: durable sends, waiting for completion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import cbor2
import httpx
import pytest

from .helpers import CBOR_HEADERS, call, count_actors, gateway
from .process import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as http:
        yield http


async def _send(
    client: httpx.AsyncClient, server: ServerProcess, name: str, queue: str, key: str, **body: Any
) -> httpx.Response:
    url = gateway(server, name, f"queue/{queue}", key)
    return await client.post(url, json={"name": queue, **body})


async def test_send_and_wait_for_completion(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    done = await _send(client, server, "worker", "jobs", key, body=5, wait=True, timeout=5000)
    assert done.status_code == 200, done.text
    assert done.json() == {"status": "completed", "response": 10}
    assert done.headers["x-rivet-actor-key"] == key
    state = await call(client, server, "worker", "getState", [], key, "get")
    assert state.json() == {"output": {"done": 5}}


async def test_send_without_waiting(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    sent = await _send(client, server, "worker", "typed", key, body=3, wait=False)
    assert sent.status_code == 200, sent.text
    assert sent.json()["status"] == "completed"


async def test_wait_times_out_as_a_normal_answer(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    # Nothing consumes `typed`: the wait ends with timedOut, not an error.
    sent = await _send(client, server, "worker", "typed", key, body=1, wait=True, timeout=200)
    assert sent.status_code == 200, sent.text
    assert sent.json()["status"] == "timedOut"


async def test_cbor_queue_send(server: ServerProcess, client: httpx.AsyncClient, key: str) -> None:
    url = gateway(server, "worker", "queue/jobs", key)
    body = cbor2.dumps({"name": "jobs", "body": 4, "wait": True, "timeout": 5000})
    sent = await client.post(url, content=body, headers=CBOR_HEADERS)
    assert sent.status_code == 200, sent.content
    assert cbor2.loads(sent.content)["response"] == 8


@pytest.mark.parametrize(
    ("name", "queue", "body", "identifier"),
    [
        ("worker", "nosuch", 1, "queue.invalid_name"),
        ("worker", "typed", "not a number", "actor.invalid_message"),
        ("greeter", "jobs", 1, "queue.not_configured"),
    ],
)
async def test_bad_queue_sends_store_nothing(
    server: ServerProcess,
    client: httpx.AsyncClient,
    key: str,
    name: str,
    queue: str,
    body: Any,
    identifier: str,
) -> None:
    before = await count_actors(client, server, name)
    sent = await _send(client, server, name, queue, key, body=body)
    assert sent.status_code == 400, sent.text
    assert sent.headers["x-rivet-error"] == identifier
    assert await count_actors(client, server, name) == before

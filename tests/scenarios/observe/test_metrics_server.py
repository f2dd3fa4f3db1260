"""``/metrics`` on a real ``perdure serve`` process, over HTTP and WebSocket.

Who may scrape (the admin access rule: loopback, or the admin token), what a WebSocket
client's connection and events show, and ``--no-metrics`` / ``PERDURE_METRICS=0``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.scenarios.server.helpers import action_frame, open_socket, receive, subscribe_frame
from tests.support.scrape import scrape
from tests.support.server import ServerProcess
from tests.support.wait import eventually

REGISTRY = "tests.support.apps.metrics:registry"
TOKEN = "metrics-test-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with the default access rule: loopback clients may scrape."""
    proc = ServerProcess(REGISTRY, tmp_path_factory.mktemp("metrics")).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def test_a_websocket_client_its_connection_and_events(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    key = f"ws-{uuid.uuid4().hex[:8]}"
    ws = await open_socket(server, "counter", key)
    try:
        assert (await receive(ws))["tag"] == "Init"
        await ws.send(subscribe_frame("pinged"))
        await ws.send(action_frame(1, "ping", ["hello"]))
        tags = {(await receive(ws))["tag"], (await receive(ws))["tag"]}
        assert tags == {"ActionResponse", "Event"}
        samples = await scrape(http, f"{server.url}/metrics")
        assert samples.get("perdure_connections", actor="counter") == 1
        assert samples.get("perdure_actions_total", actor="counter", action="ping") == 1
        pinged = {"actor": "counter", "event": "pinged"}
        assert samples.get("perdure_events_sent_total", **pinged) == 1
        assert samples.get("perdure_event_recipients_total", **pinged) == 1
        assert samples.get("perdure_actors_awake", actor="counter") == 1
    finally:
        await ws.close()

    async def closed() -> bool:
        samples = await scrape(http, f"{server.url}/metrics")
        return samples.get("perdure_connections", actor="counter") == 0

    await eventually(closed, what="the connection gauge back at 0")


async def test_http_actions_and_queue_sends(server: ServerProcess, http: httpx.AsyncClient) -> None:
    key = f"http-{uuid.uuid4().hex[:8]}"
    query = f"rvt-method=getOrCreate&rvt-key={key}"
    before = await scrape(http, f"{server.url}/metrics")
    refused = await http.post(
        f"{server.url}/gateway/counter/action/refuse?{query}", json={"args": []}
    )
    assert refused.status_code == 500
    for value in range(4):
        sent = await http.post(
            f"{server.url}/gateway/jobs/queue/jobs?{query}",
            json={"name": "jobs", "body": {"value": value}, "wait": False},
        )
        assert sent.status_code == 200, sent.text
    queue = {"actor": "jobs", "queue": "jobs"}
    errors = {"actor": "counter", "action": "refuse", "code": "user.refused"}

    async def consumed() -> bool:
        samples = await scrape(http, f"{server.url}/metrics")
        total = "perdure_queue_messages_consumed_total"
        return samples.get(total, **queue) - before.get(total, **queue) == 4

    await eventually(consumed, what="4 messages consumed")
    samples = await scrape(http, f"{server.url}/metrics")
    sent_total = "perdure_queue_messages_sent_total"
    assert samples.get(sent_total, **queue) - before.get(sent_total, **queue) == 4
    errors_total = "perdure_action_errors_total"
    assert samples.get(errors_total, **errors) - before.get(errors_total, **errors) == 1
    assert samples.get("perdure_store_commits_total") > before.get("perdure_store_commits_total")


async def test_an_admin_token_guards_metrics(tmp_path: Path, http: httpx.AsyncClient) -> None:
    proc = ServerProcess(REGISTRY, tmp_path / "data", extra_args=["--admin-token", TOKEN])
    proc.start()
    try:
        # With a token, loopback is no exemption: a proxy on the same host is loopback too.
        bare = await http.get(f"{proc.url}/metrics")
        assert bare.status_code == 401
        body = bare.json()
        assert (body["group"], body["code"]) == ("admin", "unauthorized")
        assert set(body) >= {"group", "code", "message"}
        assert bare.headers["x-rivet-error"] == "admin.unauthorized"
        wrong = await http.get(f"{proc.url}/metrics", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        samples = await scrape(http, f"{proc.url}/metrics", authorization=f"Bearer {TOKEN}")
        assert ("perdure_actors_awake", frozenset({("actor", "counter")})) in samples.values
    finally:
        proc.kill()


@pytest.mark.parametrize(
    ("extra_args", "env"),
    [(["--no-metrics"], {}), ([], {"PERDURE_METRICS": "0"})],
    ids=["flag", "env"],
)
async def test_metrics_turned_off(
    tmp_path: Path, http: httpx.AsyncClient, extra_args: list[str], env: dict[str, str]
) -> None:
    proc = ServerProcess(REGISTRY, tmp_path / "data", extra_args=extra_args, env=env)
    proc.start()
    try:
        response = await http.get(f"{proc.url}/metrics")
        assert response.status_code == 404
        assert response.json()["code"] == "route_not_found"
        # The rest of the server is unaffected.
        assert (await http.get(f"{proc.url}/health")).status_code == 200
    finally:
        proc.kill()

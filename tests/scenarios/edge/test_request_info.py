"""``c.request``: the client request's headers, origin and address in
``on_before_connect`` and in actions over HTTP and WebSocket; ``None`` for calls that no
client request made (a schedule fire)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from perdure.client import Client
from tests.support.server import ServerProcess

from .access_server import access_server, new_key

WAIT = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # The page's origin the tests send is allowed: a default server refuses other sites'
    # pages (docs/edge.md, CORS).
    data = tmp_path_factory.mktemp("request")
    with access_server(data, "--cors-origin", "http://page.test", token=None) as process:
        yield process


def test_http_action_and_its_connect_hook_see_the_request(server: ServerProcess) -> None:
    key = new_key()
    with httpx.Client(timeout=WAIT) as client:
        response = client.post(
            f"{server.url}/gateway/guarded/action/whoami?rvt-method=getOrCreate&rvt-key={key}",
            json={"args": []},
            headers={"x-test-marker": "http-1", "origin": "http://page.test"},
        )
    assert response.status_code == 200, response.text
    seen = response.json()["output"]
    for place in ("action", "connect"):
        assert seen[place]["marker"] == "http-1"
        assert seen[place]["origin"] == "http://page.test"
        assert seen[place]["client_host"] == "127.0.0.1"
        assert seen[place]["transport"] == "http"


def test_websocket_actions_see_the_opening_request(server: ServerProcess) -> None:
    key = new_key()
    with (
        Client(server.url, headers={"x-test-marker": "ws-1"}) as client,
        client.guarded.get_or_create(key).connect() as conn,
    ):
        first = conn.action("whoami")
        second = conn.action("whoami")
    for seen in (first, second):
        assert seen["action"]["transport"] == "websocket"
        assert seen["action"]["client_host"] == "127.0.0.1"
        assert seen["connect"]["transport"] == "websocket"
    assert first["action"]["user_agent"] is not None


def test_a_schedule_fire_has_no_request(server: ServerProcess) -> None:
    key = new_key()
    with Client(server.url) as client:
        handle = client.guarded.get_or_create(key)
        handle.action("schedule_probe")
        deadline = time.monotonic() + WAIT
        while (probe := handle.action("probe")) is None:
            assert time.monotonic() < deadline, "the scheduled action never ran"
            time.sleep(0.05)
    assert probe == {"request": None, "done": True}

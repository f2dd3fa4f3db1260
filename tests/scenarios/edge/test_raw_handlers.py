"""Raw handlers (``on_request``, ``on_websocket``) through a real ``perdure serve``: the
query and direct gateway forms, waking, activity, durability before the response, error
bodies, and the 404 of an actor without the hooks."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import cbor2
import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from perdure import actor, setup
from perdure.errors import DefinitionError
from tests.support.server import ServerProcess

WAIT = 10.0
REGISTRY = "tests.scenarios.edge.raw_app:registry"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(REGISTRY, tmp_path_factory.mktemp("raw")).start()
    try:
        yield process
    finally:
        process.kill()


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:12]}"


def _query(key: str, method: str = "getOrCreate") -> str:
    return f"rvt-method={method}&rvt-key={key}"


def _actor_id(server: ServerProcess, key: str) -> str:
    with httpx.Client(timeout=WAIT) as client:
        response = client.get(f"{server.url}/gateway/rawy/request/state?{_query(key)}")
    assert response.status_code == 200, response.text
    return response.headers["x-rivet-actor"]


def test_query_form_creates_the_actor_and_the_hook_sees_path_query_body(
    server: ServerProcess,
) -> None:
    key = _key()
    with httpx.Client(timeout=WAIT) as client:
        response = client.put(
            f"{server.url}/gateway/rawy/request/some/where?a=1&{_query(key)}&b=two",
            content=b"payload",
        )
    assert response.status_code == 201, response.text
    assert response.content == b"payload"
    assert response.headers["x-path"] == "/some/where"
    assert response.headers["x-query"] == "a=1&b=two"  # no rvt-* parameter
    assert response.headers["x-method"] == "PUT"
    assert response.headers["x-rivet-actor"]


def test_direct_form_reaches_the_same_actor(server: ServerProcess) -> None:
    key = _key()
    actor_id = _actor_id(server, key)
    with httpx.Client(timeout=WAIT) as client:
        response = client.post(f"{server.url}/gateway/{actor_id}/request/bump", json={"by": 5})
        text = client.get(f"{server.url}/gateway/{actor_id}/request/text")
    assert response.status_code == 200, response.text
    assert response.json()["count"] == 5
    assert text.text == "plain text"


def test_a_raw_answer_runs_in_a_sandbox_of_its_own_unless_the_actor_decides(
    server: ServerProcess,
) -> None:
    """Raw answers share the inspector's origin: by default a page an actor serves runs
    sandboxed (an opaque origin of its own) and is not sniffed; an actor that sets a
    policy itself keeps it. The admin API's JSON is never sniffed either."""
    key = _key()
    with httpx.Client(timeout=WAIT) as client:
        page = client.get(f"{server.url}/gateway/rawy/request/page?{_query(key)}")
        own = client.get(f"{server.url}/gateway/rawy/request/own-policy?{_query(key)}")
        admin = client.get(f"{server.url}/admin/actors")
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["x-content-type-options"] == "nosniff"
    policy = page.headers["content-security-policy"]
    assert policy.startswith("sandbox ")
    assert "allow-same-origin" not in policy
    assert own.headers["content-security-policy"] == "default-src 'self'"
    assert own.headers["x-content-type-options"] == "nosniff"
    assert admin.status_code == 200, admin.text
    assert admin.headers["x-content-type-options"] == "nosniff"


def test_a_raw_request_wakes_a_sleeping_actor(server: ServerProcess) -> None:
    key = _key()
    actor_id = _actor_id(server, key)
    with httpx.Client(timeout=WAIT) as client:
        first = client.get(f"{server.url}/gateway/{actor_id}/request/state").json()
        time.sleep(1.0)  # sleep_timeout is 0.3 s
        second = client.get(f"{server.url}/gateway/{actor_id}/request/state").json()
    assert second["wakes"] == first["wakes"] + 1


def test_the_actor_does_not_sleep_during_a_request(server: ServerProcess) -> None:
    key = _key()
    actor_id = _actor_id(server, key)
    with httpx.Client(timeout=WAIT) as client:
        before = client.get(f"{server.url}/gateway/{actor_id}/request/state").json()
        slow = client.get(f"{server.url}/gateway/{actor_id}/request/slow?seconds=1.0")
    assert slow.status_code == 200, slow.text
    assert slow.json() == {"count": 1, "wakes": before["wakes"]}  # same life, not re-woken


@pytest.mark.parametrize("encoding", ["json", "cbor"])
def test_a_user_error_is_its_code(server: ServerProcess, encoding: str) -> None:
    with httpx.Client(timeout=WAIT) as client:
        response = client.get(
            f"{server.url}/gateway/rawy/request/teapot?{_query(_key())}",
            headers={"x-rivet-encoding": encoding},
        )
    assert response.status_code == 500
    body = response.json() if encoding == "json" else cbor2.loads(response.content)
    assert (body["group"], body["code"]) == ("user", "teapot")
    assert body["message"] == "No coffee here."
    assert body["metadata"] == {"brew": "tea"}
    assert response.headers["x-rivet-error"] == "user.teapot"


def test_a_failing_handler_is_an_internal_error(server: ServerProcess) -> None:
    with httpx.Client(timeout=WAIT) as client:
        response = client.get(f"{server.url}/gateway/rawy/request/boom?{_query(_key())}")
    assert response.status_code == 500
    body = response.json()
    assert (body["group"], body["code"]) == ("actor", "internal_error")
    assert "a bug" not in response.text  # the bug's text stays in the server log


def test_an_actor_without_the_hook_answers_404_and_is_not_created(
    server: ServerProcess,
) -> None:
    key = _key()
    with httpx.Client(timeout=WAIT) as client:
        response = client.get(f"{server.url}/gateway/plain/request/x?{_query(key)}")
        found = client.get(f"{server.url}/actors", params={"name": "plain", "key": key})
    assert response.status_code == 404
    assert response.json()["code"] == "route_not_found"
    assert found.json()["actors"] == []


def test_a_raw_websocket_serves_frames_and_state(server: ServerProcess) -> None:
    key = _key()
    url = server.url.replace("http", "ws")
    with connect(f"{url}/gateway/rawy/websocket/room?{_query(key)}", open_timeout=WAIT) as ws:
        assert ws.recv(timeout=WAIT) == "hello /room"
        ws.send("hi")
        assert ws.recv(timeout=WAIT) == "echo hi"
        ws.send("bump")
        assert ws.recv(timeout=WAIT) == "count 1"
        time.sleep(0.8)  # longer than sleep_timeout: an open socket keeps the actor awake
        ws.send("bump")
        assert ws.recv(timeout=WAIT) == "count 2"
    actor_id = _actor_id(server, key)
    with httpx.Client(timeout=WAIT) as client:
        state = client.get(f"{server.url}/gateway/{actor_id}/request/state").json()
    assert state["count"] == 2
    assert state["wakes"] == 1


def test_a_raw_websocket_failure_closes_with_the_error_code(server: ServerProcess) -> None:
    url = server.url.replace("http", "ws")
    with connect(f"{url}/gateway/rawy/websocket?{_query(_key())}", open_timeout=WAIT) as ws:
        assert ws.recv(timeout=WAIT) == "hello /"
        ws.send("fail")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=WAIT)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, "user.refused")


def test_a_raw_websocket_without_the_hook_is_closed_404(server: ServerProcess) -> None:
    url = server.url.replace("http", "ws")
    with (
        connect(f"{url}/gateway/plain/websocket?{_query(_key())}", open_timeout=WAIT) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        ws.recv(timeout=WAIT)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "actor.route_not_found")


def test_state_is_durable_before_the_response(tmp_path_factory: pytest.TempPathFactory) -> None:
    process = ServerProcess(REGISTRY, tmp_path_factory.mktemp("raw-durable")).start()
    key = _key()
    try:
        with httpx.Client(timeout=WAIT) as client:
            bumped = client.post(
                f"{process.url}/gateway/rawy/request/bump?{_query(key)}", json={"by": 7}
            )
            assert bumped.json()["count"] == 7
            process.kill()  # kill -9 right after the response
            process.restart()
            state = client.get(f"{process.url}/gateway/rawy/request/state?{_query(key, 'get')}")
        assert state.status_code == 200, state.text
        assert state.json()["count"] == 7
    finally:
        process.kill()


def test_raw_routes_require_the_server_token(tmp_path_factory: pytest.TempPathFactory) -> None:
    token = "raw-test-token-0123456789"
    data = tmp_path_factory.mktemp("raw-token")
    process = ServerProcess(REGISTRY, data, extra_args=["--token", token]).start()
    url = f"{process.url}/gateway/rawy/request/state?{_query(_key())}"
    try:
        with httpx.Client(timeout=WAIT) as client:
            refused = client.get(url)
            allowed = client.get(url, headers={"authorization": f"Bearer {token}"})
        assert refused.status_code == 401, refused.text
        assert allowed.status_code == 200, allowed.text
        ws_url = url.replace("http", "ws", 1).replace("/request/", "/websocket/")
        with connect(ws_url, open_timeout=WAIT) as ws:
            ws.recv(timeout=WAIT)  # the Error frame
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=WAIT)
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "auth.unauthorized")
    finally:
        process.kill()


@pytest.mark.parametrize(
    ("hook", "names"), [("on_request", "request"), ("on_websocket", "websocket")]
)
def test_a_raw_hook_with_the_wrong_arity_is_refused(hook: str, names: str) -> None:
    with pytest.raises(DefinitionError, match=f"`{hook}` must accept 2 .*\\(c, {names}\\)"):
        setup(use={"bad": actor(state={}, **{hook: lambda c: None})})

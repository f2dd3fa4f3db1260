"""perdure's app mounted at a prefix, in process (docs/embedding.md): where the door reads
the path, what it refuses before the runtime has started, and the access rules, links,
redirects and cookie under the prefix. The real-process tests are in
tests/scenarios/embed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from perdure import actor, setup
from perdure.runtime import ActorRuntime
from perdure.server import PerdureApp, create_app
from perdure.server.edge.admin_access import AdminAccess
from perdure.server.edge.mount import enter, link_root, raw_route_path, route_path
from perdure.store import MemoryStore

pytestmark = pytest.mark.timeout(20)
TOKEN = "client-token-0123456789"
ADMIN_TOKEN = "admin-token-0123456789"


def _scope(path: str, raw: bytes | None, root: str) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "path": path, "root_path": root}
    if raw is not None:
        scope["raw_path"] = raw
    enter(scope)
    return scope


@pytest.mark.parametrize(
    ("path", "raw", "root", "below", "raw_below", "link"),
    [
        # At the root: nothing is recorded, everything reads as it always did.
        ("/gateway/a/action/b", b"/gateway/a/action/b", "", "/gateway/a/action/b", None, ""),
        ("/p/gateway/a%2Fb", b"/p/gateway/a%2Fb", "/p", "/gateway/a%2Fb", b"/gateway/a%2Fb", "/p"),
        # Two segments, a trailing slash on root_path, an encoded character in the prefix.
        ("/a b/c/ui/", b"/a%20b/c/ui/", "/a b/c/", "/ui/", b"/ui/", "/a%20b/c"),
        ("/p", b"/p", "/p", "/", b"/", "/p"),
        # A server that leaves the prefix out of the path: the path is already below it,
        # and links spell the prefix from root_path.
        ("/gateway/x", b"/gateway/x", "/my app", "/gateway/x", b"/gateway/x", "/my%20app"),
        # A prefix that looks like `//host` never makes a link to another site.
        (
            "//evil.example/ui/",
            b"//evil.example/ui/",
            "//evil.example",
            "/ui/",
            b"/ui/",
            "/evil.example",
        ),
    ],
)
def test_the_path_below_the_mount_and_the_prefix_of_links(
    path: str, raw: bytes, root: str, below: str, raw_below: bytes | None, link: str
) -> None:
    scope = _scope(path, raw, root)
    assert route_path(scope) == below
    assert raw_route_path(scope) == (raw if raw_below is None else raw_below)
    assert link_root(scope) == link


def _registry() -> Any:
    return setup(use={"thing": actor(state={"n": 0}, actions={"ping": lambda c: "pong"})})


def _host(perdure_app: PerdureApp) -> Starlette:
    """A host app that mounts perdure and does not give it its lifespan."""
    return Starlette(routes=[Mount("/perdure", app=perdure_app)])


async def test_before_the_runtime_starts_every_route_answers_not_started() -> None:
    perdure_app = create_app(ActorRuntime(_registry(), MemoryStore()))
    transport = httpx.ASGITransport(app=_host(perdure_app))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for path in ("/perdure/health", "/perdure/gateway/thing/action/ping", "/perdure/ui/"):
            answer = await http.get(path)
            assert answer.status_code == 503
            assert answer.headers["x-rivet-error"] == "server.not_started"
            assert "lifespan" in answer.json()["message"]
        async with perdure_app.lifespan():  # what the host's lifespan would have done
            assert (await http.get("/perdure/health")).status_code == 200


async def test_a_websocket_before_the_runtime_starts_is_closed_with_the_error() -> None:
    perdure_app = create_app(ActorRuntime(_registry(), MemoryStore()))
    sent = await _open_websocket(_host(perdure_app), "/perdure/gateway/thing/connect")
    assert sent[0]["type"] == "websocket.accept"
    body = json.loads(sent[1]["text"])["body"]
    assert body["tag"] == "Error"
    assert (body["val"]["group"], body["val"]["code"]) == ("server", "not_started")
    assert sent[2] == {"type": "websocket.close", "code": 1011, "reason": "server.not_started"}


async def _open_websocket(app: Starlette, path: str) -> list[dict[str, Any]]:
    """Open a WebSocket on ``app`` (the host's prefix in ``path``) as a server would,
    in JSON; what the app sent until it closed the socket."""
    closed = asyncio.Event()
    sent: list[dict[str, Any]] = []
    opening = [{"type": "websocket.connect"}]

    async def receive() -> dict[str, Any]:
        if opening:
            return opening.pop()
        await closed.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))
        if message["type"] == "websocket.close":
            closed.set()

    scope = {
        "type": "websocket",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"rvt-method=getOrCreate&rvt-key=a",
        "headers": [],
        "subprotocols": ["rivet", "rivet_encoding.json"],
        "client": ("127.0.0.1", 40000),
    }
    await asyncio.wait_for(app(scope, receive, send), 5)
    return sent


@pytest.fixture
async def mounted() -> AsyncIterator[httpx.AsyncClient]:
    """perdure with a client token and an admin token, mounted at /perdure and started."""
    admin = AdminAccess(token=ADMIN_TOKEN)
    perdure_app = create_app(ActorRuntime(_registry(), MemoryStore()), token=TOKEN, admin=admin)
    transport = httpx.ASGITransport(app=_host(perdure_app), client=("127.0.0.1", 40000))
    async with (
        perdure_app.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
    ):
        yield http


async def test_the_token_guards_the_gateway_and_leaves_the_probes_open(
    mounted: httpx.AsyncClient,
) -> None:
    assert (await mounted.get("/perdure/health")).status_code == 200
    ping = "/perdure/gateway/thing/action/ping"
    query = "?rvt-method=getOrCreate&rvt-key=a"
    refused = await mounted.post(ping + query, json={"args": []})
    assert refused.headers["x-rivet-error"] == "auth.unauthorized"
    answer = await mounted.post(f"{ping}{query}&rvt-token={TOKEN}", json={"args": []})
    assert answer.json() == {"output": "pong"}
    actor_id = answer.headers["x-rivet-actor"]
    # The direct form's token sits in the path's target segment, below the prefix.
    direct = f"/perdure/gateway/{actor_id}@{TOKEN}/action/ping"
    assert (await mounted.post(direct, json={"args": []})).json() == {"output": "pong"}


async def test_signing_in_to_the_inspector_stays_under_the_prefix(
    mounted: httpx.AsyncClient,
) -> None:
    page = await mounted.get("/perdure/ui/actors/x")
    assert page.status_code == 401  # the sign-in page, back to where it was asked for
    assert 'action="/perdure/ui/login"' in page.text
    assert 'name="next" value="/perdure/ui/actors/x"' in page.text
    signed_in = await mounted.post(
        "/perdure/ui/login", data={"token": ADMIN_TOKEN, "next": "/perdure/ui/actors/x"}
    )
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/perdure/ui/actors/x"
    assert "Path=/perdure/" in signed_in.headers["set-cookie"]
    # A target outside perdure's inspector is not followed.
    elsewhere = await mounted.post("/perdure/ui/login", data={"token": ADMIN_TOKEN, "next": "/x"})
    assert elsewhere.headers["location"] == "/perdure/ui/"
    assert (await mounted.get("/perdure/ui")).headers["location"] == "/perdure/ui/"
    signed_out = await mounted.post("/perdure/ui/logout")
    assert signed_out.headers["location"] == "/perdure/ui/login"

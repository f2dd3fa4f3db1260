"""The server token (``perdure serve --token``): required on every client route, in
each form the official client sends it; refused with perdure's error body and a code;
the Python clients send it; nothing is applied for a refused request."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import cbor2
import httpx
import pytest
from websockets.asyncio.client import connect

from perdure.client import ActorError, AsyncClient, Client
from tests.support.server import REPO_ROOT, ServerProcess

from .access_server import ADMIN_TOKEN, TOKEN, access_server, new_key

WAIT = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with access_server(tmp_path_factory.mktemp("token"), "--admin-token", ADMIN_TOKEN) as process:
        yield process


def _action_url(server: ServerProcess, key: str, action: str = "whoami", **query: str) -> str:
    params = "&".join(f"{name}={quote(value)}" for name, value in query.items())
    suffix = f"&{params}" if params else ""
    return (
        f"{server.url}/gateway/guarded/action/{action}?rvt-method=getOrCreate&rvt-key={key}{suffix}"
    )


def _error(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) >= {"group", "code", "message"}, body
    return response.status_code, f"{body['group']}.{body['code']}"


async def _actor_count(client: httpx.AsyncClient, server: ServerProcess, key: str) -> int:
    response = await client.get(
        f"{server.url}/actors",
        params={"name": "guarded", "key": key},
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200, response.text
    return len(response.json()["actors"])


async def test_every_client_route_needs_the_token(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        routes = [
            client.post(_action_url(server, key), json={"args": []}),
            client.get(f"{server.url}/metadata"),
            client.get(f"{server.url}/actors", params={"name": "guarded"}),
            client.put(f"{server.url}/actors", json={"name": "guarded", "key": key}),
            client.get(f"{server.url}/no-such-route"),
        ]
        for response in await asyncio.gather(*routes):
            assert _error(response) == (401, "auth.unauthorized"), response.url
            assert response.headers["x-rivet-error"] == "auth.unauthorized"
        # The probes stay open.
        assert (await client.get(f"{server.url}/health")).status_code == 200
        # Nothing was created by the refused requests.
        assert await _actor_count(client, server, key) == 0


async def test_a_wrong_token_is_forbidden_and_applies_nothing(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        wrong = "not-the-token-0123456789"
        response = await client.post(
            _action_url(server, key), json={"args": []}, headers={"x-rivet-token": wrong}
        )
        assert _error(response) == (403, "auth.forbidden")
        bearer = await client.get(
            f"{server.url}/metadata", headers={"authorization": f"Bearer {wrong}"}
        )
        assert _error(bearer) == (403, "auth.forbidden")
        # In the request's encoding, like every error body.
        cbor = await client.post(
            _action_url(server, key),
            content=cbor2.dumps({"args": []}),
            headers={"x-rivet-encoding": "cbor", "x-rivet-token": wrong},
        )
        assert cbor.status_code == 403
        assert cbor2.loads(cbor.content)["code"] == "forbidden"
        assert await _actor_count(client, server, key) == 0


async def test_each_form_of_the_official_client_is_accepted(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        header = await client.post(
            _action_url(server, key), json={"args": []}, headers={"x-rivet-token": TOKEN}
        )
        assert header.status_code == 200, header.text
        actor_id = header.headers["x-rivet-actor"]
        query = await client.post(
            _action_url(server, key, **{"rvt-token": TOKEN}), json={"args": []}
        )
        assert query.status_code == 200, query.text
        direct = await client.post(
            f"{server.url}/gateway/{actor_id}@{TOKEN}/action/whoami", json={"args": []}
        )
        assert direct.status_code == 200, direct.text
        bearer = await client.get(
            f"{server.url}/metadata", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert bearer.status_code == 200
        # The admin token opens the client routes too; the server token not the admin API.
        admin = await client.post(
            _action_url(server, key), json={"args": []}, headers={"x-rivet-token": ADMIN_TOKEN}
        )
        assert admin.status_code == 200, admin.text
        refused = await client.get(
            f"{server.url}/admin/actors", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert refused.status_code == 401


async def test_websocket_needs_the_token(server: ServerProcess) -> None:
    key = new_key()
    base = server.url.replace("http://", "ws://", 1)
    url = f"{base}/gateway/guarded/connect?rvt-method=getOrCreate&rvt-key={key}"
    async with connect(url, subprotocols=["rivet", "rivet_encoding.json"]) as ws:  # type: ignore[list-item]
        frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]
        assert frame["tag"] == "Error"
        assert (frame["val"]["group"], frame["val"]["code"]) == ("auth", "unauthorized")
        await asyncio.wait_for(ws.wait_closed(), WAIT)
        assert ws.close_code == 1008
        assert ws.close_reason == "auth.unauthorized"
    # The token in the URL, or in the subprotocol of the direct /connect.
    async with connect(
        f"{url}&rvt-token={TOKEN}",
        subprotocols=["rivet", "rivet_encoding.json"],  # type: ignore[list-item]
    ) as ws:
        init = json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]
        assert init["tag"] == "Init"
        actor_id = init["val"]["actorId"]
    protocols = ["rivet", "rivet_encoding.json", "rivet_target.actor", f"rivet_actor.{actor_id}"]
    async with connect(
        f"{base}/connect",
        subprotocols=[*protocols, f"rivet_token.{TOKEN}"],  # type: ignore[list-item]
    ) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]["tag"] == "Init"
    async with connect(
        f"{base}/connect",
        subprotocols=[*protocols, "rivet_token.wrong-token-0123456789"],  # type: ignore[list-item]
    ) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]
        assert frame["val"]["code"] == "forbidden"


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
def test_sync_client_sends_the_token(server: ServerProcess, encoding: str) -> None:
    key = new_key()
    with Client(server.url, token=TOKEN, encoding=encoding) as client:  # type: ignore[arg-type]
        handle = client.guarded.get_or_create(key)
        assert handle.action("whoami")["action"]["transport"] == "http"
        with handle.connect() as conn:
            news: list[str] = []
            conn.on("news", news.append)
            assert conn.action("ping") == "pong"
            assert conn.action("whoami")["action"]["transport"] == "websocket"
        actor_id = handle.resolve()
        assert client.guarded.get_for_id(actor_id).action("ping") == "pong"
    with Client(server.url, encoding=encoding) as client:  # type: ignore[arg-type]
        with pytest.raises(ActorError) as refused:
            client.guarded.get_or_create(key).action("whoami")
        assert (refused.value.group, refused.value.code) == ("auth", "unauthorized")


async def test_async_client_sends_the_token(server: ServerProcess) -> None:
    key = new_key()
    async with AsyncClient(server.url, token=TOKEN) as client:
        handle = client.guarded.get_or_create(key)
        assert (await handle.action("whoami"))["action"]["transport"] == "http"
        conn = handle.connect()
        try:
            assert await conn.action("ping") == "pong"
        finally:
            await conn.dispose()
    async with AsyncClient(server.url, token="wrong-token-0123456789") as client:
        with pytest.raises(ActorError) as refused:
            await client.guarded.get_or_create(key).action("whoami")
        assert refused.value.code == "forbidden"


def test_serve_refuses_a_weak_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "perdure",
            "serve",
            "tests.scenarios.edge.access_app:registry",
            "--data",
            str(tmp_path),
            "--token",
            "short",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "at least 16 characters" in result.stderr


async def test_with_a_token_alone_the_admin_surface_wants_it_from_everyone(
    tmp_path: Path,
) -> None:
    """``--token`` without ``--admin-token``: the admin API, the inspector, its feed and
    /metrics want the token too, from loopback as from anywhere, whatever the Host (a
    proxy on the same host makes every request look local); the probes stay open."""
    with access_server(tmp_path / "data") as server:
        port = server.url.rpartition(":")[2]
        local_hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
        routes = ["/admin/actors", "/admin/actors/x/feed", "/admin/actors/x/db/tables", "/metrics"]
        async with httpx.AsyncClient(timeout=WAIT) as client:
            for host in local_hosts:
                for path in routes:
                    refused = await client.get(server.url + path, headers={"host": host})
                    assert _error(refused) == (401, "admin.unauthorized"), (host, path)
                ui = await client.get(server.url + "/ui/", headers={"host": host})
                assert ui.status_code == 401, ui.text  # the sign-in page
                assert "password" in ui.text
            bearer = {"authorization": f"Bearer {TOKEN}"}
            listed = await client.get(f"{server.url}/admin/actors", headers=bearer)
            assert listed.status_code == 200, listed.text
            metrics = await client.get(f"{server.url}/metrics", headers=bearer)
            assert metrics.status_code == 200, metrics.text
            # A page without an origin of its own (a sandboxed frame, a data: page) is
            # refused even with the token.
            sandboxed = await client.get(
                f"{server.url}/admin/actors", headers={**bearer, "origin": "null"}
            )
            assert _error(sandboxed) == (403, "admin.forbidden")
            for probe in ("/health", "/ready"):
                assert (await client.get(server.url + probe)).status_code == 200

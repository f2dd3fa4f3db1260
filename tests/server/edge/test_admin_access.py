"""Who may use the admin surface: loopback without a token, anyone with it, no other site."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from perdure import actor, setup
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.server import create_app
from perdure.server.edge.admin_access import AdminAccess, admin_token
from perdure.store import MemoryStore

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def runtime() -> AsyncIterator[ActorRuntime]:
    registry = setup(use={"thing": actor(state={}, actions={"ping": lambda c: "pong"})})
    runtime = ActorRuntime(registry, MemoryStore())
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


def _client(runtime: ActorRuntime, access: AdminAccess, peer: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(runtime, admin=access), client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:6420")


async def _status(client: httpx.AsyncClient, **headers: str) -> tuple[int, str]:
    """The status, and the error's ``group.code`` (``ok`` for an answer)."""
    response = await client.get("/admin/overview", headers=headers)
    body = response.json()
    if response.status_code == 200:
        return 200, "ok" if body.get("runtime") == "perdure" else "unexpected body"
    return response.status_code, f"{body.get('group')}.{body.get('code')}"


async def test_without_a_token_only_loopback_clients_naming_loopback_get_in(
    runtime: ActorRuntime,
) -> None:
    async with _client(runtime, AdminAccess(), "127.0.0.1") as local:
        assert (await local.get("/admin/overview")).status_code == 200
        # DNS rebinding: a hostile name pointed at 127.0.0.1.
        assert await _status(local, host="evil.example:6420") == (403, "admin.forbidden")
    async with _client(runtime, AdminAccess(), "::1") as local6:
        assert (await local6.get("/admin/overview")).status_code == 200
    async with _client(runtime, AdminAccess(), "10.1.2.3") as remote:
        assert await _status(remote) == (403, "admin.forbidden")


async def test_with_a_token_every_address_needs_it(runtime: ActorRuntime) -> None:
    access = AdminAccess(token="s3cret")
    for peer in ("127.0.0.1", "10.1.2.3"):
        async with _client(runtime, access, peer) as client:
            assert await _status(client) == (401, "admin.unauthorized")
            assert await _status(client, authorization="Bearer nope") == (401, "admin.unauthorized")
            ok = await client.get("/admin/overview", headers={"authorization": "Bearer s3cret"})
            assert ok.status_code == 200
            client.cookies.set("perdure_admin", "s3cret")
            assert (await client.get("/admin/overview")).status_code == 200


async def test_other_sites_pages_are_refused_even_on_loopback(runtime: ActorRuntime) -> None:
    async with _client(runtime, AdminAccess(), "127.0.0.1") as client:
        assert await _status(client, origin="http://evil.example") == (403, "admin.forbidden")
        assert await _status(client, **{"sec-fetch-site": "cross-site"}) == (403, "admin.forbidden")
        assert await _status(client, origin="http://127.0.0.1:6420") == (200, "ok")
        assert await _status(client, **{"sec-fetch-site": "same-origin"}) == (200, "ok")


async def test_the_admin_surface_can_be_turned_off(runtime: ActorRuntime) -> None:
    async with _client(runtime, AdminAccess(enabled=False), "127.0.0.1") as client:
        assert await _status(client) == (403, "admin.disabled")


@pytest.mark.parametrize("token", ["short", "sixteen chars ok", "semi;colon-0123456789", "é" * 20])
def test_a_token_that_would_not_survive_a_header_or_cookie_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="at least 16 characters"):
        admin_token(token)


def test_perdure_serve_refuses_a_bad_token_before_starting() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "perdure", "serve", "tests.support.apps.admin:registry"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PERDURE_ADMIN_TOKEN": "too short"},
    )
    assert result.returncode == 2
    assert "an admin token is at least 16 characters" in result.stderr
    assert admin_token("Zm9v-YmFy_YmF6.cXV4~") == "Zm9v-YmFy_YmF6.cXV4~"

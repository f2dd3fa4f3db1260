"""Per-connection limits (actions in flight, subscriptions, message size) and the
``can_subscribe``/``can_publish`` hooks: each refusal a coded error, nothing applied,
the connection still usable where the protocol allows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from perdure.client import ActorError, AsyncClient
from tests.scenarios.server.helpers import (
    action_frame,
    closed,
    init,
    open_socket,
    receive,
    subscribe_frame,
)
from tests.support.server import ServerProcess

from .access_server import access_server, new_key

WAIT = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # tests.scenarios.edge.access_app allows 2 actions in flight and 2 subscriptions per connection.
    with access_server(tmp_path_factory.mktemp("limits"), token=None) as process:
        yield process


def _code(frame: dict[str, Any]) -> str:
    assert frame["tag"] == "Error", frame
    return f"{frame['val']['group']}.{frame['val']['code']}"


async def _answers(ws: Any, count: int) -> dict[int, dict[str, Any]]:
    """The next ``count`` answers to actions, by action id."""
    found: dict[int, dict[str, Any]] = {}
    while len(found) < count:
        frame = await receive(ws, WAIT)
        action_id = frame["val"].get("id", frame["val"].get("actionId"))
        if frame["tag"] in ("ActionResponse", "Error") and action_id is not None:
            found[int(action_id[1] if isinstance(action_id, list) else action_id)] = frame
    return found


async def test_actions_in_flight_beyond_the_limit_are_refused(server: ServerProcess) -> None:
    async with await open_socket(server, "guarded", new_key()) as ws:  # type: ignore[arg-type]
        await init(ws)
        for action_id in (1, 2, 3):
            await ws.send(action_frame(action_id, "slow", [0.5]))
        answers = await _answers(ws, 3)
        assert _code(answers[3]) == "actor.overloaded"
        assert answers[3]["val"]["metadata"]["capacity"] == 2
        assert answers[1]["tag"] == answers[2]["tag"] == "ActionResponse"
        # Once they are done, the connection takes actions again.
        await ws.send(action_frame(4, "slow", [0]))
        assert (await _answers(ws, 1))[4]["tag"] == "ActionResponse"


async def test_subscriptions_beyond_the_limit_are_refused(server: ServerProcess) -> None:
    async with await open_socket(server, "guarded", new_key()) as ws:  # type: ignore[arg-type]
        await init(ws)
        for event in ("news", "alerts", "updates"):
            await ws.send(subscribe_frame(event))
        refusal = await receive(ws, WAIT)
        assert _code(refusal) == "actor.too_many_subscriptions"
        assert refusal["val"]["metadata"] == {"event": "updates", "limit": 2}
        # Still open, and the accepted subscription receives its events.
        await ws.send(action_frame(1, "ping", []))
        tags = {(await receive(ws, WAIT))["tag"] for _ in range(2)}
        assert tags == {"Event", "ActionResponse"}


async def test_can_subscribe_refuses_with_auth_forbidden(server: ServerProcess) -> None:
    key = new_key()
    async with await open_socket(server, "guarded", key) as ws:  # type: ignore[arg-type]
        await init(ws)
        await ws.send(subscribe_frame("secret_news"))
        refusal = await receive(ws, WAIT)
        assert _code(refusal) == "auth.forbidden"
        assert refusal["val"]["metadata"] == {"event": "secret_news"}
        assert refusal["val"]["actionId"] is None
        await ws.send(action_frame(1, "ping", []))
        assert (await receive(ws, WAIT))["tag"] == "ActionResponse"  # no event: not subscribed
    admin = {"role": "admin"}
    async with await open_socket(server, "guarded", key, params=admin) as ws:  # type: ignore[arg-type]
        await init(ws)
        await ws.send(subscribe_frame("secret_news"))
        await ws.send(action_frame(1, "ping", []))
        assert (await receive(ws, WAIT))["tag"] == "ActionResponse"


async def test_python_client_sees_a_refused_subscription(server: ServerProcess) -> None:
    async with AsyncClient(server.url) as client:
        conn = client.guarded.get_or_create(new_key()).connect()
        errors: list[Exception] = []
        conn.on_error(errors.append)
        try:
            conn.on("secret_news", lambda *args: None)
            assert await conn.action("ping") == "pong"
            async with asyncio.timeout(WAIT):
                while not errors:
                    await asyncio.sleep(0.02)
        finally:
            await conn.dispose()
    assert isinstance(errors[0], ActorError)
    assert (errors[0].group, errors[0].code) == ("auth", "forbidden")


async def test_can_publish_refuses_a_queue_send(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        base = f"{server.url}/gateway/guarded/queue"
        query = f"?rvt-method=getOrCreate&rvt-key={key}"
        body = {"body": 1, "name": "secret_jobs", "wait": False}
        refused = await client.post(f"{base}/secret_jobs{query}", json=body)
        assert refused.status_code == 403
        assert (refused.json()["group"], refused.json()["code"]) == ("auth", "forbidden")
        allowed = await client.post(
            f"{base}/secret_jobs{query}",
            json=body,
            headers={"x-rivet-conn-params": '{"role": "admin"}'},
        )
        assert allowed.status_code == 200, allowed.text
        plain = await client.post(f"{base}/jobs{query}", json={**body, "name": "jobs"})
        assert plain.status_code == 200, plain.text


async def test_an_oversize_frame_closes_with_a_clear_reason(server: ServerProcess) -> None:
    async with await open_socket(server, "guarded", new_key()) as ws:  # type: ignore[arg-type]
        await init(ws)
        await ws.send(action_frame(1, "slow", ["x" * 70_000]))
        assert _code(await receive(ws, WAIT)) == "message.incoming_too_long"
        assert await closed(ws, WAIT) == (1011, "message.incoming_too_long")

"""The lifecycle as rivetkit's own driver tests see it (issue 34), over a real server:
``run`` starts before the first action, a stop runs ``on_sleep`` with raw sockets open
and lets ``wait_until`` work reach its connection before closing, a call that waits for
a start is served before a destroy, an alarm does not hold an idle actor awake,
``c.state`` without state, ``c.set_prevent_sleep``, ``run_stop_timeout``, per-event and
per-queue access hooks, and ``on_state_change`` once per action (kept on purpose)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from perdure.client import create_client
from tests.scenarios.server.helpers import (
    call,
    gateway,
    init,
    open_socket,
    receive,
    subscribe_frame,
)
from tests.support.apps.lifecycle import SLEEP_TIMEOUT
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(60)
WAIT = 5.0


def new_key() -> str:
    return uuid.uuid4().hex[:12]


async def output(client: httpx.AsyncClient, server: ServerProcess, *args: Any) -> Any:
    response = await call(client, server, *args)
    assert response.status_code == 200, response.text
    return response.json()["output"]


async def test_run_has_started_when_the_first_action_is_served(server: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        state = await output(client, server, "ticker", "get_state", [], new_key())
    # The action that created the actor already sees run's first steps (rivetkit's order).
    assert state["run_started"] is True
    assert state["ticks"] >= 1


async def test_sleep_with_a_raw_socket_open_runs_on_sleep_then_closes_it(
    server: ServerProcess,
) -> None:
    key = new_key()
    url = gateway(server, "sleeper", "websocket/", key).replace("http://", "ws://", 1)
    async with (
        httpx.AsyncClient(timeout=WAIT) as client,
        connect(url, open_timeout=WAIT) as ws,
    ):
        assert await asyncio.wait_for(ws.recv(), WAIT) == "connected"
        started = asyncio.get_running_loop().time()
        await output(client, server, "sleeper", "trigger_sleep", [], key)
        # on_sleep runs at once (not after the 15 s grace period), with the socket open:
        # its message after 100 ms arrives, then the stop closes the socket.
        assert await asyncio.wait_for(ws.recv(), WAIT) == "sleeping 1"
        await asyncio.wait_for(ws.wait_closed(), WAIT)
        assert ws.close_reason == "actor.sleeping"
        assert asyncio.get_running_loop().time() - started < WAIT
        counts = await output(client, server, "sleeper", "counts", [], key)
    assert counts == {"starts": 2, "sleeps": 1}


async def test_wait_until_work_reaches_its_connection_before_the_sleep_closes_it(
    server: ServerProcess,
) -> None:
    async with create_client(server.url) as client:
        conn = client.sleeper.get_or_create([new_key()]).connect()
        got: list[Any] = []
        conn.on("sleeping", got.append)
        await conn.wait_open(WAIT)
        await conn.trigger_sleep()
        await eventually(lambda: got == [1], timeout=WAIT, what="the goodbye")
        await conn.dispose()


async def test_a_call_waiting_for_a_start_is_served_before_a_destroy(
    server: ServerProcess,
) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        await output(client, server, "slowStart", "sleep", [], key)  # created, then asleep
        actor_id = await _resolve(client, server, "slowStart", key)
        # The destroy action wakes the actor (on_wake takes 300 ms); a ping comes while
        # it starts. rivetkit serves the ping, then destroys; perdure answered the ping
        # actor.aborted (the destroy claimed the stop first).
        destroy = asyncio.create_task(call(client, server, "slowStart", "destroy", [], key))
        await asyncio.sleep(0.1)
        ping = await call(client, server, "slowStart", "ping", [], key)
        assert ping.status_code == 200, ping.text
        assert ping.json()["output"] == "pong"
        assert (await destroy).status_code == 200
        await eventually(
            lambda: (server.data_dir.parent / f"destroyed-{actor_id}").exists(),
            timeout=WAIT,
            what="on_destroy",
        )
        gone = await call(client, server, "slowStart", "ping", [], key, "get")
        assert gone.status_code == 404, gone.text


async def _resolve(client: httpx.AsyncClient, server: ServerProcess, name: str, key: str) -> str:
    """The actor's id once it exists (the management API, as the official client)."""

    async def lookup() -> str | None:
        response = await client.get(f"{server.url}/actors", params={"name": name, "key": key})
        actors = response.json()["actors"] if response.status_code == 200 else []
        return actors[0]["actor_id"] if actors else None

    found: list[str] = []

    async def exists() -> bool:
        actor_id = await lookup()
        if actor_id:
            found.append(actor_id)
        return bool(actor_id)

    await eventually(exists, timeout=WAIT, interval=0.01, what="the actor")
    return found[0]


@pytest.mark.parametrize(
    ("due_after_timeout", "counts"),
    [
        # Due after the idle timeout: it sleeps then, and the alarm wakes it.
        (0.25, {"starts": 2, "sleeps": 1}),
        # Due before: the fire is activity, so it stays awake.
        (-0.25, {"starts": 1, "sleeps": 0}),
    ],
)
async def test_an_alarm_does_not_hold_an_idle_actor_awake(
    server: ServerProcess, due_after_timeout: float, counts: dict[str, int]
) -> None:
    key = new_key()
    due_ms = int((SLEEP_TIMEOUT + due_after_timeout) * 1000)
    async with httpx.AsyncClient(timeout=WAIT) as client:
        await output(client, server, "sleeper", "alarm_in", [due_ms], key)
        await asyncio.sleep(SLEEP_TIMEOUT + 0.2)
        assert await output(client, server, "sleeper", "counts", [], key) == counts


async def test_state_of_an_actor_without_state_is_refused_with_a_code(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        response = await call(client, server, "stateless", "read_state", [], new_key())
    assert response.status_code == 500, response.text
    body = response.json()
    assert (body["group"], body["code"]) == ("actor", "state_not_enabled")


async def test_set_prevent_sleep_holds_the_actor_awake_until_cleared(
    server: ServerProcess,
) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        assert await output(client, server, "sleeper", "prevent", [True], key) is True
        await asyncio.sleep(SLEEP_TIMEOUT + 0.25)
        assert await output(client, server, "sleeper", "counts", [], key) == {
            "starts": 1,
            "sleeps": 0,
        }
        assert await output(client, server, "sleeper", "prevent", [False], key) is False
        await asyncio.sleep(SLEEP_TIMEOUT + 0.25)
        counts = await output(client, server, "sleeper", "counts", [], key)
    assert counts == {"starts": 2, "sleeps": 1}


async def test_run_stop_timeout_cuts_a_run_that_ignores_the_abort(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        assert await output(client, server, "stubborn", "starts", [], key) == 1
        started = asyncio.get_running_loop().time()
        # c.sleep(), then the next call wakes it again once the stop is done: the stop
        # waited 0.3 s for run (run_stop_timeout), not the 15 s grace period.
        await output(client, server, "stubborn", "sleep_now", [], key)
        assert await output(client, server, "stubborn", "starts", [], key) == 2
        assert asyncio.get_running_loop().time() - started < 3.0


async def test_per_event_and_per_queue_access_hooks(server: ServerProcess) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        refused = await client.post(
            gateway(server, "guarded", "queue/closed", key), json={"body": 1}
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "forbidden"
        allowed = await client.post(
            gateway(server, "guarded", "queue/inbox", key), json={"body": 1}
        )
        assert allowed.status_code == 200, allowed.text
    async with await open_socket(server, "guarded", key) as ws:  # type: ignore[arg-type]
        await init(ws)
        await ws.send(subscribe_frame("secret"))
        refusal = await receive(ws, WAIT)
        assert refusal["tag"] == "Error", refusal
        assert (refusal["val"]["group"], refusal["val"]["code"]) == ("auth", "forbidden")


async def test_on_state_change_fires_once_per_action_not_per_mutation(
    server: ServerProcess,
) -> None:
    # A deliberate difference (docs/rivetkit-client.md): rivetkit fires it 3 times here.
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        assert await output(client, server, "changes", "increment_multiple", [3], key) == 3
        assert await output(client, server, "changes", "calls", [], key) == 1

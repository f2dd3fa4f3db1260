"""One suite, every implementation of the handle API (:mod:`perdure.handles`).

Each scenario takes a client and a fresh key and is run (see ``conftest.py``) with the
async network client in JSON, CBOR and BARE against a real ``perdure serve``, with the
blocking client against the same server, with ``runtime.client()`` and with ``c.client()``
inside an actor: the same code, the same expectations.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from perdure.errors import PerdureError
from tests.scenarios.handles.conftest import Scenario
from tests.support.wait import eventually

RunScenario = Callable[[Scenario], Awaitable[None]]


async def actions_by_attribute(client: Any, key: str) -> None:
    counter = client.counter.get_or_create([key])
    assert await counter.increment(2) == 2
    assert await counter.getCount() == 2
    assert await counter.action("increment", 3) == 5
    assert await counter.action("echo", 1, "two", {"three": [3]}) == [1, "two", {"three": [3]}]


async def test_actions_by_attribute_and_by_name(run_scenario: RunScenario) -> None:
    await run_scenario(actions_by_attribute)


async def unknown_action_has_its_code(client: Any, key: str) -> None:
    counter = client.counter.get_or_create([key])
    for call in (counter.nope(), counter.action("missing", 1)):
        with pytest.raises(PerdureError) as caught:
            await call
        assert (caught.value.group, caught.value.code) == ("actor", "action_not_found")


async def test_an_unknown_action_fails_with_its_code(run_scenario: RunScenario) -> None:
    await run_scenario(unknown_action_has_its_code)


async def send_and_wait(client: Any, key: str) -> None:
    mailbox = client.mailbox.get_or_create([key])
    assert await mailbox.send("held", {"n": 1}) is None  # durable on return, nothing else
    assert await mailbox.size() == 1
    result = await mailbox.send("jobs", {"n": 21}, wait=True, timeout=10)
    assert (result.status, result.response) == ("completed", {"doubled": 42})
    assert result == {"status": "completed", "response": {"doubled": 42}}  # the wire's shape
    done = await mailbox.send("jobs", {"n": 1}, wait=True, timeout=timedelta(seconds=10))
    assert done["response"] == {"doubled": 2}


async def test_send_without_and_with_wait(run_scenario: RunScenario) -> None:
    await run_scenario(send_and_wait)


async def send_times_out_on_time(client: Any, key: str) -> None:
    mailbox = client.mailbox.get_or_create([key])
    await mailbox.resolve()  # created now: what is timed below is the wait alone
    for timeout in (0.5, timedelta(milliseconds=500)):
        started = time.monotonic()
        result = await mailbox.send("held", {"n": 1}, wait=True, timeout=timeout)
        elapsed = time.monotonic() - started
        assert (result.status, result.response) == ("timedOut", None)
        assert 0.4 <= elapsed < 3.0, elapsed
    with pytest.raises(PerdureError) as bad:  # refused at the call, nothing sent
        await mailbox.send("held", {"n": 2}, wait=True, timeout="1s")
    assert bad.value.code == "invalid_duration"
    assert await mailbox.size() == 2


async def test_a_waiting_send_times_out_after_its_timeout(run_scenario: RunScenario) -> None:
    await run_scenario(send_times_out_on_time)


async def connection_events_and_actions(client: Any, key: str) -> None:
    counter = client.counter.get_or_create([key])
    conn = counter.connect()  # returns at once; the connection opens in the background
    got: list[int] = []
    once: list[int] = []
    unsubscribe = conn.on("newCount", got.append)
    conn.once("newCount", once.append)
    await conn.wait_open(timeout=timedelta(seconds=10))
    assert conn.is_connected
    assert conn.actor_id == await counter.resolve()
    assert await counter.increment(1) == 1  # a broadcast from a call over the handle
    await eventually(lambda: got == [1], what="the first event")
    assert await conn.increment(2) == 3  # an action by attribute, over the connection
    assert await conn.action("getCount") == 3
    await eventually(lambda: got == [1, 3], what="the second event")
    assert once == [1]
    unsubscribe()
    assert await conn.increment(1) == 4  # nobody listens any more
    later: list[int] = []
    conn.on("newCount", later.append)
    assert await conn.increment(1) == 5
    await eventually(lambda: later == [5], what="the event after re-subscribing")
    assert got == [1, 3]
    await conn.dispose()
    assert not conn.is_connected
    async with counter.connect() as second:
        await second.wait_open()
        assert await second.getCount() == 5
    assert not second.is_connected


async def test_connect_on_events_and_actions_over_a_connection(run_scenario: RunScenario) -> None:
    await run_scenario(connection_events_and_actions)


async def undeclared_event_is_refused(client: Any, key: str) -> None:
    counter = client.counter.get_or_create([key])
    conn = counter.connect()
    errors: list[Exception] = []
    conn.on_error(errors.append)
    refused: Any
    try:
        conn.on("newCuont", print)  # in process the typo raises here
    except PerdureError as exc:
        refused = exc
    else:  # over the network the server refuses the subscription
        await conn.wait_open()
        await eventually(lambda: errors, what="the refusal")
        refused = errors[0]
    assert (refused.group, refused.code) == ("actor", "unknown_event")
    assert "newCuont" in refused.message
    with pytest.raises(PerdureError) as again:  # known refused: at once, everywhere
        conn.on("newCuont", print)
    assert again.value.code == "unknown_event"
    await conn.wait_open()
    assert await conn.getCount() == 0  # the connection is still open and usable
    await conn.dispose()


async def test_an_undeclared_event_is_refused_with_a_code(run_scenario: RunScenario) -> None:
    await run_scenario(undeclared_event_is_refused)


async def resolve_and_address_by_id(client: Any, key: str) -> None:
    handle = client.counter.get_or_create([key])
    actor_id = await handle.resolve()
    assert isinstance(actor_id, str)
    assert await client.counter.get_for_id(actor_id).increment(4) == 4
    assert await client.counter.get([key]).getCount() == 4
    created = await client.counter.create([f"{key}-new"])
    assert await created.resolve() != actor_id
    assert await created.getCount() == 0


async def test_resolve_get_for_id_get_and_create(run_scenario: RunScenario) -> None:
    await run_scenario(resolve_and_address_by_id)


async def workflow_status_of_a_handle(client: Any, key: str) -> None:
    flow = client.flow.get_or_create([key])
    assert await flow.ping() == "pong"

    async def completed() -> bool:
        return bool((await flow.workflow_status())["status"] == "completed")

    await eventually(completed, what="the workflow to complete")
    expected = {"status": "completed", "error": None, "output": {"done": True}}
    assert await flow.workflow_status() == expected
    assert await flow.action("$workflow") == expected  # the action behind it, by name
    waiter = client.waiter.get_or_create([key])
    assert (await waiter.workflow_status())["status"] == "running"
    await waiter.nap()  # asleep after this call; the next request wakes it
    assert (await waiter.workflow_status())["status"] == "running"
    with pytest.raises(PerdureError) as caught:  # not a workflow actor
        await client.counter.get_or_create([key]).workflow_status()
    assert caught.value.code == "action_not_found"


async def test_workflow_status_over_every_transport(run_scenario: RunScenario) -> None:
    await run_scenario(workflow_status_of_a_handle)

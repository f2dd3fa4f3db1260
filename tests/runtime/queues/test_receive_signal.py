"""``signal=`` on ``c.queue``'s waiting receives (rivetkit's ``AbortSignal``; issue 34,
item 6): an ``asyncio.Event`` or ``c.abort_signal``. A waiting ``next`` raises
``actor.aborted`` when it fires, ``iter`` ends quietly, and a message already there is
still received."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from perdure import ActionContext, actor, queue, setup
from perdure.errors import PerdureError
from perdure.testing import ActorTestEnv


async def _next_stopped(c: ActionContext, set_first: bool) -> Any:
    stop = asyncio.Event()
    if set_first:
        stop.set()
    else:
        asyncio.get_running_loop().call_soon(stop.set)  # while the receive waits
    try:
        message = await c.queue.next(names="jobs", timeout=10, signal=stop)
    except PerdureError as error:
        return [error.group, error.code]
    return None if message is None else message.body


async def _iter_stopped(c: ActionContext) -> list[Any]:
    stop = asyncio.Event()
    seen = []
    async for message in c.queue.iter(names="jobs", signal=stop):
        seen.append(message.body)
        stop.set()  # one message, then the iteration ends without an error
    return seen


async def _no_wait_stopped(c: ActionContext) -> Any:
    stop = asyncio.Event()
    stop.set()
    return await c.queue.next(names="jobs", timeout=0, signal=stop)  # no wait: None


async def _abort_signal(c: ActionContext) -> Any:
    message = await c.queue.next(names="jobs", timeout=0, signal=c.abort_signal)
    return None if message is None else message.body


async def _not_a_signal(c: ActionContext) -> Any:
    return await c.queue.next(names="jobs", timeout=0, signal={"aborted": True})


registry = setup(
    use={
        "box": actor(
            queues={"jobs": queue()},
            actions={
                "next_stopped": _next_stopped,
                "iter_stopped": _iter_stopped,
                "abort_signal": _abort_signal,
                "no_wait_stopped": _no_wait_stopped,
                "not_a_signal": _not_a_signal,
            },
        )
    }
)


@pytest.fixture
async def env() -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry) as test_env:
        yield test_env


async def test_a_signal_stops_a_waiting_next_with_actor_aborted(env: ActorTestEnv) -> None:
    box = env.client.box.get_or_create("b")
    assert await box.next_stopped(True) == ["actor", "aborted"]  # set before the call
    assert await box.next_stopped(False) == ["actor", "aborted"]  # set while it waits
    await box.send("jobs", "j1")  # a message already there is received all the same
    assert await box.next_stopped(True) == "j1"
    assert await box.no_wait_stopped() is None  # a zero timeout does not wait: no abort


async def test_a_signal_ends_iter_quietly(env: ActorTestEnv) -> None:
    box = env.client.box.get_or_create("b")
    await box.send("jobs", "j1")
    assert await box.iter_stopped() == ["j1"]
    await box.send("jobs", "j2")
    assert await box.abort_signal() == "j2"  # c.abort_signal is a signal too
    assert await box.abort_signal() is None  # not fired: the timeout ends the wait


async def test_something_else_as_a_signal_is_refused_at_the_call(env: ActorTestEnv) -> None:
    with pytest.raises(PerdureError) as refused:
        await env.client.box.get_or_create("b").not_a_signal()
    assert (refused.value.group, refused.value.code) == ("api", "invalid_signal")
    assert "asyncio.Event" in refused.value.message

"""The admin feed's stream in process: it outlives quiet periods (keep-alives between
changes) and ends when the server shuts down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from perdure import actor, event, setup
from perdure.runtime.host.actor_runtime import ActorRuntime
from perdure.server.admin import routes as admin
from perdure.server.edge.admin_access import AdminAccess
from perdure.store import MemoryStore

pytestmark = pytest.mark.timeout(20)


def _bump(c: object, by: int) -> int:
    state = c.state  # type: ignore[attr-defined]
    state["n"] += by
    return int(state["n"])


@pytest.fixture
async def runtime() -> AsyncIterator[ActorRuntime]:
    registry = setup(
        use={"counter": actor(state={"n": 0}, events={"e": event()}, actions={"bump": _bump})}
    )
    runtime = ActorRuntime(registry, MemoryStore())
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


async def _next(stream: AsyncIterator[bytes]) -> bytes:
    return await asyncio.wait_for(anext(stream), 5)


async def test_the_feed_keeps_streaming_after_a_quiet_period(
    runtime: ActorRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin, "KEEP_ALIVE", 0.2)
    handle = runtime.client().counter.get_or_create("quiet")
    await handle.bump(1)
    actor_id = await handle.resolve()
    stream = admin._AdminApi(runtime, AdminAccess())._stream(actor_id)
    assert b"event: snapshot" in await _next(stream)
    assert await _next(stream) == b": keep-alive\n\n"  # nothing happened for a while
    assert await _next(stream) == b": keep-alive\n\n"
    await handle.bump(2)
    assert b'event: state\ndata: {"state":{"n":3}}' in await _next(stream)
    runtime.feed.close_all()  # the server begins to shut down
    with pytest.raises(StopAsyncIteration):
        await _next(stream)

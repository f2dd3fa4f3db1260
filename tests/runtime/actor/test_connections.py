"""Events: broadcast reaches subscribers only, ``conn.send`` reaches one, ``c.conns`` lists."""

from __future__ import annotations

from typing import Any

import pytest

from perdure import InvalidRequest, actor, event, setup
from perdure.errors import StateNotSerializable
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from tests.support.runtimes import RuntimeFactory

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)


def _registry(**config: Any) -> Registry:
    def shout(c: ActionContext, name: str, *args: Any) -> None:
        c.broadcast(name, *args)

    def whisper(c: ActionContext, conn_id: str, text: str) -> None:
        c.conns[conn_id].send("whisper", text)

    def reply(c: ActionContext, text: str) -> None:
        assert c.conn is not None
        c.conn.send("reply", text)

    def list_conns(c: ActionContext) -> list[str]:
        return sorted(c.conns)

    actions = {"shout": shout, "whisper": whisper, "reply": reply, "conns": list_conns}
    return setup(use={"room": actor(state={}, actions=actions, **config)})


async def test_broadcast_reaches_only_subscribed_connections(
    make_runtime: RuntimeFactory,
) -> None:
    handle = (await make_runtime(_registry())).client().room.get_or_create("r")
    alice = await handle.connect()
    bob = await handle.connect()
    carol = await handle.connect()
    got: list[tuple[str, tuple[Any, ...]]] = []
    alice.on("ping", lambda *args: got.append(("alice", args)))
    bob.on("other", lambda *args: got.append(("bob", args)))

    await handle.shout("ping", 1, {"two": 2})
    assert got == [("alice", (1, {"two": 2}))]
    assert bob.events == []
    assert carol.events == []

    await handle.shout("other")
    assert got[-1] == ("bob", ())
    assert alice.events == [("ping", [1, {"two": 2}])]


async def test_unsubscribing_stops_delivery(make_runtime: RuntimeFactory) -> None:
    handle = (await make_runtime(_registry())).client().room.get_or_create("r")
    conn = await handle.connect()
    got: list[Any] = []
    off_first = conn.on("ping", got.append)
    off_second = conn.on("ping", got.append)
    await handle.shout("ping", 1)
    off_first()
    await handle.shout("ping", 2)  # one listener is left: still subscribed
    off_second()
    await handle.shout("ping", 3)
    assert got == [1, 1, 2]


async def test_send_reaches_one_connection_and_conns_lists_them(
    make_runtime: RuntimeFactory,
) -> None:
    handle = (await make_runtime(_registry())).client().room.get_or_create("r")
    first = await handle.connect()
    second = await handle.connect()
    assert first.conn is not None
    assert second.conn is not None
    assert await handle.conns() == sorted([first.conn.id, second.conn.id])

    # send() needs no subscription: it is addressed to one connection.
    await handle.whisper(second.conn.id, "psst")
    assert second.events == [("whisper", ["psst"])]
    assert first.events == []

    await first.action("reply", "hello you")  # over the connection: c.conn is the caller
    assert first.events == [("reply", ["hello you"])]
    assert second.events == [("whisper", ["psst"])]

    await second.dispose()
    assert await handle.conns() == [first.conn.id]


async def test_declared_events_are_checked(make_runtime: RuntimeFactory) -> None:
    registry = _registry(events={"count": event(int), "free": event()})
    handle = (await make_runtime(registry)).client().room.get_or_create("r")
    conn = await handle.connect()
    got: list[Any] = []
    conn.on("count", got.append)
    await handle.shout("count", 3)
    await handle.shout("free", {"any": [1, "thing"]})  # no schema: any storable value
    with pytest.raises(StateNotSerializable, match="free"):
        await handle.shout("free", object())  # events are logged, so they must be storable
    with pytest.raises(InvalidRequest, match="count"):
        await handle.shout("count", "three")
    with pytest.raises(InvalidRequest) as undeclared:
        await handle.shout("nope")
    assert undeclared.value.code == "unknown_event"
    assert got == [3]

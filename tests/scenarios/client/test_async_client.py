"""AsyncClient against a real ``perdure serve`` process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from perdure.client import (
    ActorError,
    AsyncActorConnection,
    AsyncClient,
    CloseEvent,
    ConnectionDisposed,
    TransportError,
    TransportTimeout,
    create_client,
)

from .conftest import ServerProcess, free_port

WAIT = 5.0  # seconds any single expected thing may take


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[AsyncClient]:
    async with create_client(server.url) as client:
        yield client


class Inbox:
    """Collects callback arguments; ``await inbox.get()`` waits for the next one."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[Any] = asyncio.Queue()

    def __call__(self, *args: Any) -> None:
        self.items.put_nowait(args[0] if len(args) == 1 else args)

    async def get(self) -> Any:
        return await asyncio.wait_for(self.items.get(), WAIT)

    def empty(self) -> bool:
        return self.items.empty()


async def _until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# -- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
async def test_actions_round_trip_values_in_every_encoding(
    server: ServerProcess, unique: str, encoding: str
) -> None:
    async with create_client(server.url, encoding=encoding) as client:
        counter = client.counter.get_or_create([unique, "x"])
        assert await counter.increment(2) == 2
        assert await counter.action("increment", 3) == 5
        values = [None, True, 1.5, "é", b"\x00\xff", 2**70, -(2**64), [1, {"a": [2]}]]
        assert await counter.echo(*values) == values


async def test_user_error_arrives_with_code_and_metadata(client: AsyncClient, unique: str) -> None:
    counter = client.counter.get_or_create(unique)
    with pytest.raises(ActorError) as info:
        await counter.fail("insufficient_funds")
    error = info.value
    assert (error.group, error.code) == ("user", "insufficient_funds")
    assert error.message == "It failed on purpose."
    assert error.metadata == {"code": "insufficient_funds", "n": 1}
    assert error.http_status == 500
    assert error.actor is not None
    assert error.actor.actor_id == await counter.resolve()


async def test_unknown_action(client: AsyncClient, unique: str) -> None:
    with pytest.raises(ActorError) as info:
        await client.counter.get_or_create(unique).nope()
    assert (info.value.group, info.value.code) == ("actor", "action_not_found")
    assert info.value.http_status == 404


async def test_get_of_a_missing_actor_fails_fast(client: AsyncClient, unique: str) -> None:
    started = time.monotonic()
    with pytest.raises(ActorError) as info:
        await client.counter.get(unique).getCount()
    assert (info.value.group, info.value.code) == ("actor", "not_found")
    with pytest.raises(ActorError) as resolved:
        await client.counter.get(unique).resolve()
    assert resolved.value.code == "not_found"
    assert time.monotonic() - started < 2  # no retry loop


async def test_unknown_actor_name(client: AsyncClient, unique: str) -> None:
    with pytest.raises(ActorError) as info:
        await client.nobody.get_or_create(unique).hello()
    assert (info.value.group, info.value.code) == ("actor", "unknown_name")


async def test_create_binds_to_the_id_and_refuses_a_taken_key(
    client: AsyncClient, unique: str
) -> None:
    created = await client.inputs.create([unique], input={"plan": "pro"})
    assert await created.getInput() == {"plan": "pro"}
    actor_id = await created.resolve()
    assert await client.inputs.get(unique).resolve() == actor_id
    assert await client.inputs.get_for_id(actor_id).getInput() == {"plan": "pro"}
    with pytest.raises(ActorError) as info:
        await client.inputs.create([unique])
    assert (info.value.group, info.value.code) == ("actor", "duplicate_key")


async def test_get_or_create_passes_input_once(client: AsyncClient, unique: str) -> None:
    first = client.inputs.get_or_create(unique, input={"n": 1, "blob": b"\x01"})
    assert await first.getInput() == {"n": 1, "blob": b"\x01"}
    again = client.inputs.get_or_create(unique, input={"n": 2})
    assert await again.getInput() == {"n": 1, "blob": b"\x01"}
    assert await again.resolve() == await first.resolve()


async def test_queue_send(client: AsyncClient, unique: str) -> None:
    mailbox = client.mailbox.get_or_create(unique)
    assert cast(object, await mailbox.send("jobs", {"value": 5})) is None
    assert cast(object, await mailbox.send("jobs", [1, 2])) is None
    await mailbox.send(queue="jobs", body=[3])  # by name, as the handle API names them
    assert await mailbox.drain() == [{"value": 5}, [1, 2], [3]]


async def test_queue_send_and_wait(client: AsyncClient, unique: str) -> None:
    mailbox = client.mailbox.get_or_create(unique)
    timed_out = await mailbox.send("jobs", {"n": 1}, wait=True, timeout=0.2)
    assert timed_out == {"status": "timedOut", "response": None}
    assert await mailbox.drain() == [{"n": 1}]

    waiting = asyncio.ensure_future(mailbox.send("jobs", {"n": 2}, wait=True, timeout=WAIT))
    body = None
    deadline = time.monotonic() + WAIT
    while body is None and time.monotonic() < deadline:
        body = await mailbox.completeNext({"ok": True})
    assert body == {"n": 2}
    assert await asyncio.wait_for(waiting, WAIT) == {
        "status": "completed",
        "response": {"ok": True},
    }


async def test_unknown_queue(client: AsyncClient, unique: str) -> None:
    with pytest.raises(ActorError) as info:
        await client.mailbox.get_or_create(unique).send("nope", 1)
    assert (info.value.group, info.value.http_status) == ("queue", 400)


async def test_unreachable_server_is_a_transport_error() -> None:
    async with create_client(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(TransportError, match="failed"):
            await client.counter.get_or_create("k").getCount()


async def test_closed_client_refuses_calls(server: ServerProcess, unique: str) -> None:
    client = create_client(server.url)
    await client.close()
    await client.close()  # idempotent
    with pytest.raises(ConnectionDisposed):
        await client.counter.get_or_create(unique).getCount()


# -- connections ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
async def test_connection_actions_and_events(
    server: ServerProcess, unique: str, encoding: str
) -> None:
    async with create_client(server.url, encoding=encoding) as client:
        handle = client.counter.get_or_create(unique)
        conn = handle.connect()
        counts = Inbox()
        conn.on("newCount", counts)
        await conn.wait_open()
        assert conn.status == "connected"
        assert conn.actor_id == await handle.resolve()
        assert conn.connection_id
        assert await conn.increment(1) == 1
        assert await counts.get() == 1
        assert await handle.increment(2) == 3  # over HTTP; the event reaches the socket
        assert await counts.get() == 3
        assert await conn.echo(b"\x01", 2**70) == [b"\x01", 2**70]


async def test_only_subscribers_receive_events(client: AsyncClient, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    alice, bob = handle.connect(), handle.connect()
    alice_pings, bob_others = Inbox(), Inbox()
    alice.on("ping", alice_pings)
    bob.on("other", bob_others)
    # An action on the same socket is answered after the subscription was applied.
    await alice.getCount()
    await bob.getCount()
    await handle.shout("ping", 1, {"two": 2})
    await handle.shout("other", "x")
    assert await alice_pings.get() == (1, {"two": 2})
    assert await bob_others.get() == "x"  # bob got `other` and, before it, no `ping`
    assert bob_others.empty()
    assert alice_pings.empty()


async def test_once_and_off(client: AsyncClient, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    conn = handle.connect()
    once, kept, sentinel = Inbox(), Inbox(), Inbox()
    conn.once("ping", once)
    unsubscribe = conn.on("ping", kept)
    conn.on("other", sentinel)
    await conn.getCount()
    await handle.shout("ping", 1)
    await handle.shout("ping", 2)
    assert [await kept.get(), await kept.get()] == [1, 2]
    assert await once.get() == 1
    unsubscribe()
    unsubscribe()  # idempotent
    await conn.getCount()
    await handle.shout("ping", 3)
    await handle.shout("other", "done")
    assert await sentinel.get() == "done"
    assert kept.empty()
    assert once.empty()
    conn.off("other", sentinel)
    conn.on("ping", kept)
    conn.off("ping")
    await conn.getCount()
    await handle.shout("ping", 4)
    assert await conn.getCount() == 0
    assert kept.empty()


async def test_async_callbacks(client: AsyncClient, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    conn = handle.connect()
    seen = Inbox()

    async def listener(count: int) -> None:
        await asyncio.sleep(0)
        seen(count)

    conn.on("newCount", listener)
    await conn.increment(7)
    assert await seen.get() == 7


async def test_connection_errors_over_the_socket(client: AsyncClient, unique: str) -> None:
    conn = client.counter.get_or_create(unique).connect()
    with pytest.raises(ActorError) as info:
        await conn.fail("nope")
    assert (info.value.group, info.value.code, info.value.metadata) == (
        "user",
        "nope",
        {"code": "nope", "n": 1},
    )
    with pytest.raises(ActorError) as missing:
        await conn.action("missing")
    assert missing.value.code == "action_not_found"
    assert await conn.getCount() == 0  # the connection survives action errors


async def test_params_reach_the_actor(client: AsyncClient, unique: str) -> None:
    handle = client.counter.get_or_create(unique, params={"user": "ada"})
    assert await handle.params() == {"user": "ada"}  # x-rivet-conn-params over HTTP
    assert await handle.connect().params() == {"user": "ada"}
    assert await handle.connect({"user": "bob"}).params() == {"user": "bob"}


async def test_refused_connection(client: AsyncClient, unique: str) -> None:
    conn = client.guarded.get_or_create(unique).connect()
    errors = Inbox()
    conn.on_error(errors)
    with pytest.raises(ActorError) as info:
        await conn.wait_open()
    assert (info.value.group, info.value.code) == ("user", "forbidden")
    assert (await errors.get()).code == "forbidden"
    allowed = client.guarded.get_or_create(unique).connect({"token": "secret"})
    assert await allowed.hello() == "hello"


async def test_connection_to_a_missing_actor_reports_not_found(
    client: AsyncClient, unique: str
) -> None:
    conn = client.counter.get(unique).connect()
    with pytest.raises(ActorError) as info:
        await conn.wait_open()
    assert info.value.code == "not_found"
    with pytest.raises(ActorError):
        await conn.getCount()


async def test_status_and_lifecycle_callbacks(client: AsyncClient, unique: str) -> None:
    conn = client.counter.get_or_create(unique).connect()
    statuses: list[str] = []
    opens, closes = Inbox(), Inbox()
    conn.on_status_change(statuses.append)
    conn.on_open(lambda: opens(True))
    conn.on_close(closes)
    assert conn.status in ("idle", "connecting")
    await conn.wait_open()
    assert await opens.get() is True
    await conn.dispose()
    await conn.dispose()  # idempotent
    status: str = conn.status  # a fresh read (mypy keeps the narrowing above)
    assert status == "disconnected"
    assert await closes.get() == CloseEvent(1000, "Disposed")
    assert statuses[-2:] == ["connected", "disconnected"]
    assert "connecting" in statuses


async def test_dispose_fails_pending_actions(client: AsyncClient, unique: str) -> None:
    conn = client.counter.get_or_create(unique).connect()
    await conn.wait_open()
    slow = asyncio.ensure_future(conn.slow(WAIT))
    await asyncio.sleep(0.1)
    await conn.dispose()
    with pytest.raises(ConnectionDisposed):
        await asyncio.wait_for(slow, WAIT)
    with pytest.raises(ConnectionDisposed):
        await conn.getCount()


async def test_client_close_disposes_connections(server: ServerProcess, unique: str) -> None:
    client = create_client(server.url)
    conn = client.counter.get_or_create(unique).connect()
    await conn.wait_open()
    await client.close()
    assert conn.status == "disconnected"


async def test_unreachable_server_connection_keeps_trying() -> None:
    async with create_client(f"http://127.0.0.1:{free_port()}") as client:
        conn = client.counter.get_or_create("k").connect()
        errors = Inbox()
        conn.on_error(errors)
        assert isinstance(await errors.get(), TransportError)
        with pytest.raises(TransportTimeout):
            await conn.wait_open(timeout=0.3)
        assert conn.status in ("connecting", "disconnected")


# -- restarts ------------------------------------------------------------------------------


async def test_reconnects_after_a_server_crash(fresh_server: ServerProcess) -> None:
    async with create_client(fresh_server.url) as client:
        handle = client.counter.get_or_create("restart")
        conn: AsyncActorConnection = handle.connect()
        counts, opens, closes = Inbox(), Inbox(), Inbox()
        conn.on("newCount", counts)
        conn.on_open(lambda: opens("open"))
        conn.on_close(closes)
        await conn.wait_open()
        await opens.get()
        assert await conn.increment(5) == 5
        assert await counts.get() == 5
        first_connection = conn.connection_id

        in_flight = asyncio.ensure_future(conn.slow(WAIT))
        await asyncio.sleep(0.2)
        fresh_server.kill()
        assert isinstance(await closes.get(), CloseEvent)
        with pytest.raises(TransportError):
            await asyncio.wait_for(in_flight, WAIT)  # it may or may not have run
        await _until(lambda: conn.status != "connected", "the disconnect")

        waiting = asyncio.ensure_future(conn.increment(1))  # waits for the reconnect
        await asyncio.sleep(0.3)
        assert not waiting.done()
        fresh_server.start()
        assert await opens.get() == "open"
        assert conn.connection_id != first_connection
        assert await asyncio.wait_for(waiting, WAIT) == 6  # state survived the crash
        assert await counts.get() == 6  # re-subscribed by itself
        assert await handle.increment(1) == 7
        assert await counts.get() == 7


async def test_reconnects_after_a_graceful_restart(fresh_server: ServerProcess) -> None:
    async with create_client(fresh_server.url, encoding="cbor") as client:
        handle = client.counter.get_or_create(["graceful", "restart"])
        conn = handle.connect()
        counts, opens, errors = Inbox(), Inbox(), Inbox()
        conn.on("newCount", counts)
        conn.on_open(lambda: opens("open"))
        conn.on_error(errors)
        assert await conn.increment(2) == 2
        assert await counts.get() == 2
        await opens.get()
        fresh_server.stop()  # SIGTERM: the server puts its actors to sleep and exits
        await _until(lambda: conn.status != "connected", "the disconnect")
        fresh_server.start()
        assert await opens.get() == "open"
        assert await conn.increment(1) == 3
        assert await counts.get() == 3

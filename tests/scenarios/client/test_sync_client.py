"""The blocking Client against a real ``perdure serve`` process."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest

from perdure.client import (
    ActorConnection,
    ActorError,
    Client,
    CloseEvent,
    ConnectionDisposed,
    TransportError,
    TransportTimeout,
)

from .conftest import ServerProcess, free_port

WAIT = 5.0  # seconds any single expected thing may take


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url) as client:
        yield client


class Inbox:
    """Collects callback arguments (from any thread); ``get()`` waits for the next one."""

    def __init__(self) -> None:
        self.items: queue.Queue[Any] = queue.Queue()
        self.threads: set[str] = set()

    def __call__(self, *args: Any) -> None:
        self.threads.add(threading.current_thread().name)
        self.items.put(args[0] if len(args) == 1 else args)

    def get(self) -> Any:
        return self.items.get(timeout=WAIT)

    def empty(self) -> bool:
        return self.items.empty()


def _until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# -- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
def test_actions_round_trip_values_in_every_encoding(
    server: ServerProcess, unique: str, encoding: str
) -> None:
    with Client(server.url, encoding=encoding) as client:
        counter = client.counter.get_or_create([unique, "x"])
        assert counter.increment(2) == 2
        assert counter.action("increment", 3) == 5
        values = [None, False, 2.5, "ü", b"\xff", 2**70, [1, {"a": [2]}]]
        assert counter.echo(*values) == values


def test_errors(client: Client, unique: str) -> None:
    counter = client.counter.get_or_create(unique)
    with pytest.raises(ActorError) as info:
        counter.fail("insufficient_funds")
    assert (info.value.group, info.value.code) == ("user", "insufficient_funds")
    assert info.value.metadata == {"code": "insufficient_funds", "n": 1}
    with pytest.raises(ActorError) as unknown:
        counter.nope()
    assert unknown.value.code == "action_not_found"
    started = time.monotonic()
    with pytest.raises(ActorError) as missing:
        client.counter.get(unique + "-missing").getCount()
    assert (missing.value.group, missing.value.code) == ("actor", "not_found")
    assert time.monotonic() - started < 2


def test_create_and_resolve(client: Client, unique: str) -> None:
    created = client.inputs.create(unique, input=[1, 2])
    assert created.getInput() == [1, 2]
    actor_id = created.resolve()
    assert client.inputs.get(unique).resolve() == actor_id
    assert client.inputs.get_or_create(unique).resolve() == actor_id
    assert client.inputs.get_for_id(actor_id).getInput() == [1, 2]
    with pytest.raises(ActorError) as info:
        client.inputs.create(unique)
    assert info.value.code == "duplicate_key"


def test_queue_send(client: Client, unique: str) -> None:
    mailbox = client.mailbox.get_or_create(unique)
    assert cast(object, mailbox.send("jobs", {"value": 1})) is None
    mailbox.send(queue="jobs", body=[3])  # by name, as the handle API names them
    assert mailbox.drain() == [{"value": 1}, [3]]
    assert mailbox.send("jobs", 2, wait=True, timeout=0.2) == {
        "status": "timedOut",
        "response": None,
    }
    assert mailbox.drain() == [2]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(mailbox.send, "jobs", 3, wait=True, timeout=WAIT)
        body = None
        deadline = time.monotonic() + WAIT
        while body is None and time.monotonic() < deadline:
            body = mailbox.completeNext("thanks")
        assert body == 3
        assert waiting.result(WAIT) == {"status": "completed", "response": "thanks"}


def test_unreachable_server_is_a_transport_error() -> None:
    with Client(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(TransportError):
            client.counter.get_or_create("k").getCount()
        conn = client.counter.get_or_create("k").connect()
        errors = Inbox()
        conn.on_error(errors)
        assert isinstance(errors.get(), TransportError)
        with pytest.raises(TransportTimeout):
            conn.wait_open(timeout=0.3)


# -- connections ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
def test_connection_actions_and_events(server: ServerProcess, unique: str, encoding: str) -> None:
    with Client(server.url, encoding=encoding) as client:
        handle = client.counter.get_or_create(unique)
        conn = handle.connect()
        counts = Inbox()
        conn.on("newCount", counts)
        conn.wait_open()
        assert conn.is_connected
        assert conn.actor_id == handle.resolve()
        assert conn.increment(1) == 1
        assert counts.get() == 1
        assert handle.increment(2) == 3
        assert counts.get() == 3
        assert all(name.startswith("perdure-callbacks-") for name in counts.threads)
        with pytest.raises(ActorError) as info:
            conn.fail("nope")
        assert info.value.metadata == {"code": "nope", "n": 1}


def test_only_subscribers_receive_events(client: Client, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    alice, bob = handle.connect(), handle.connect()
    alice_pings, bob_others = Inbox(), Inbox()
    alice.on("ping", alice_pings)
    bob.on("other", bob_others)
    alice.getCount()
    bob.getCount()
    handle.shout("ping", 1)
    handle.shout("other", 2)
    assert alice_pings.get() == 1
    assert bob_others.get() == 2
    assert bob_others.empty()


def test_once_and_off(client: Client, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    conn = handle.connect()
    once, kept, sentinel = Inbox(), Inbox(), Inbox()
    conn.once("ping", once)
    unsubscribe = conn.on("ping", kept)
    conn.on("other", sentinel)
    conn.getCount()
    handle.shout("ping", 1)
    handle.shout("ping", 2)
    assert [kept.get(), kept.get()] == [1, 2]
    assert once.get() == 1
    unsubscribe()
    conn.getCount()
    handle.shout("ping", 3)
    handle.shout("other", "done")
    assert sentinel.get() == "done"
    assert kept.empty()
    assert once.empty()


def test_callbacks_may_call_actions_and_be_async(client: Client, unique: str) -> None:
    handle = client.counter.get_or_create(unique)
    conn = handle.connect()
    seen = Inbox()

    def reentrant(count: int) -> None:
        # Runs on the callback thread: a blocking call on the same connection is fine.
        seen(("sync", count, conn.getCount()))

    async def coroutine(count: int) -> None:
        seen(("async", count))

    conn.on("newCount", reentrant)
    conn.on("newCount", coroutine)
    conn.increment(4)
    assert {seen.get(), seen.get()} == {("sync", 4, 4), ("async", 4)}


def test_refused_connection(client: Client, unique: str) -> None:
    conn = client.guarded.get_or_create(unique).connect()
    errors = Inbox()
    conn.on_error(errors)
    with pytest.raises(ActorError) as info:
        conn.wait_open()
    assert info.value.code == "forbidden"
    assert errors.get().code == "forbidden"
    allowed = client.guarded.get_or_create(unique, params={"token": "secret"}).connect()
    assert allowed.hello() == "hello"


def test_lifecycle_and_dispose(client: Client, unique: str) -> None:
    conn = client.counter.get_or_create(unique).connect()
    statuses, opens, closes = Inbox(), Inbox(), Inbox()
    conn.on_status_change(statuses)
    conn.on_open(lambda: opens(True))
    conn.on_close(closes)
    conn.wait_open()
    assert opens.get() is True
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(conn.slow, WAIT)
        time.sleep(0.1)
        conn.dispose()
        with pytest.raises(ConnectionDisposed):
            slow.result(WAIT)
    conn.dispose()  # idempotent
    assert conn.status == "disconnected"
    assert closes.get() == CloseEvent(1000, "Disposed")
    seen = []
    while not statuses.empty():
        seen.append(statuses.get())
    # The socket may have opened before on_status_change was registered.
    assert seen[-1] == "disconnected"
    with pytest.raises(ConnectionDisposed):
        conn.getCount()


def test_reconnects_after_a_server_crash(fresh_server: ServerProcess) -> None:
    with Client(fresh_server.url) as client:
        handle = client.counter.get_or_create("restart")
        conn: ActorConnection = handle.connect()
        counts, opens = Inbox(), Inbox()
        conn.on("newCount", counts)
        conn.on_open(lambda: opens("open"))
        conn.wait_open()
        opens.get()
        assert conn.increment(5) == 5
        assert counts.get() == 5

        fresh_server.kill()
        _until(lambda: conn.status != "connected", "the disconnect")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(conn.increment, 1)  # waits for the reconnect
            time.sleep(0.3)
            assert not waiting.done()
            fresh_server.start()
            assert opens.get() == "open"
            assert waiting.result(WAIT) == 6
        assert counts.get() == 6
        assert handle.increment(1) == 7
        assert counts.get() == 7

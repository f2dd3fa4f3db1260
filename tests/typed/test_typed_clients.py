"""The typed clients call the actors for real: in process (``ActorTestEnv``, and an
actor calling another with a typed ``c.client()``) and over the network against a real
``perdure serve`` of the sample app, with the asyncio and the blocking client.

What the types promise, the calls keep: arguments given by name reach their position, a
result annotated with a model comes back as that model (actions send models out in their
plain form), a workflow's output as its ``run`` returns it.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from perdure.client import Client, create_client
from perdure.errors import InvalidRequest
from perdure.testing import ActorTestEnv
from tests.support.server import ServerProcess
from tests.typing_sample.app import Item, Job, Owner, registry
from tests.typing_sample.app_types import AppClient, CounterHandle, SyncAppClient

WAIT = 5.0


@pytest.fixture
async def client() -> AsyncIterator[AppClient]:
    async with ActorTestEnv(registry) as env:
        yield AppClient(env.client)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(
        "tests.typing_sample.app:registry",
        tmp_path_factory.mktemp("typed-data"),
        extra_args=["--log-level", "warning"],
    )
    process.start()
    try:
        yield process
    finally:
        process.terminate()


async def _heard(events: asyncio.Queue[Any], expected: Any) -> None:
    # A network connection may also hear events from up to a second before connect()
    # (docs/events.md, "Python clients"): skip those.
    while await asyncio.wait_for(events.get(), WAIT) != expected:
        pass


async def _counter_round(counter: CounterHandle) -> None:
    """What every asyncio client must do alike."""
    assert await counter.increment(5) == 5
    assert await counter.increment(by=2) == 7  # by name: sent at its position
    assert await counter.increment() == 8
    items = await counter.add(Item(name="bolt", qty=3))
    assert items == [Item(name="bolt", qty=3)]  # models again, not dicts
    assert await counter.owner() is None
    assert await counter.profile.rename("ada", loud=True) == "ADA"
    assert await counter.owner() == Owner(name="ADA")
    assert await counter.count() == 8  # a lambda: untyped, as ever
    assert await counter.untyped.action("send", "x") == "sent x"


async def test_in_process_calls_go_through(client: AppClient) -> None:
    await _counter_round(client.counter.get_or_create("main"))


async def test_an_actor_calls_another_through_a_typed_client(client: AppClient) -> None:
    assert await client.relayer.get_or_create("r").relay("target", 4) == 4
    assert await client.counter.get("target").count() == 4


async def test_connections_call_actions_and_hear_typed_event_names(client: AppClient) -> None:
    counter = client.counter.get_or_create("conn")
    heard: asyncio.Queue[Any] = asyncio.Queue()
    async with counter.connect() as conn:
        conn.on("changed", heard.put_nowait)
        await conn.wait_open()
        assert conn.is_connected
        assert conn.actor_id == await counter.resolve()
        assert await conn.increment(3) == 3
        assert await conn.profile.rename("bob") == "bob"
        await _heard(heard, 3)


async def test_a_workflow_takes_typed_input_and_bodies_and_returns_its_output(
    client: AppClient,
) -> None:
    jobs = client.jobs.get_or_create("j", input=Owner(name="ada"))
    await jobs.send("jobs", Job(value=3))
    result = await jobs.with_idempotency_key("second").send("jobs", Job(value=4), wait=False)
    assert result is None
    assert await jobs.workflow_result(timeout=WAIT) == 7
    assert (await jobs.workflow_status())["status"] == "completed"
    assert await jobs.state() == {"owner": "ada"}


async def test_keyword_only_and_unknown_keywords_fail_at_the_call(client: AppClient) -> None:
    counter = client.counter.get_or_create("kw")
    with pytest.raises(TypeError, match="unexpected keyword"):
        await counter.increment(step=2)  # type: ignore[call-arg]  # what mypy refuses
    assert await counter.increment() == 1  # nothing was sent


def test_a_result_that_does_not_fit_its_annotation_is_refused() -> None:
    from perdure.typed import SyncTypedHandle, action

    def answer(c: object) -> int:
        return 0

    class Handle(SyncTypedHandle[Any, Any]):
        answer = action("answer", lambda: answer)

    class Untyped:
        def action(self, name: str, *args: Any) -> Any:
            return "not a number"

    with pytest.raises(InvalidRequest) as info:
        Handle(Untyped()).answer()  # type: ignore[arg-type]
    assert info.value.code == "invalid_result"
    assert "result of `answer`" in info.value.message


async def test_the_asyncio_network_client(server: ServerProcess) -> None:
    async with AppClient(create_client(server.url)) as client:
        await _counter_round(client.counter.get_or_create("net"))
        counter = client.counter.get("net")
        heard: asyncio.Queue[Any] = asyncio.Queue()
        conn = counter.connect()
        conn.on("changed", heard.put_nowait)
        await conn.wait_open()
        assert await conn.increment(1) == 9
        await _heard(heard, 9)
        jobs = client.jobs.get_or_create("net", input=Owner(name="ada"))
        await jobs.send("jobs", Job(value=1))
        await jobs.send("jobs", Job(value=2))
        assert await jobs.workflow_result(timeout=WAIT) == 3
        assert await client.relayer.get_or_create("net").relay("net-target", 2) == 2


def test_the_blocking_network_client(server: ServerProcess) -> None:
    with SyncAppClient(Client(server.url)) as client:
        counter = client.counter.get_or_create("sync")
        assert counter.increment(by=4) == 4
        assert counter.add(Item(name="nut", qty=1)) == [Item(name="nut", qty=1)]
        assert counter.profile.rename("cy") == "cy"
        assert counter.owner() == Owner(name="cy")
        heard: queue.Queue[Any] = queue.Queue()
        with counter.connect() as conn:
            conn.on("changed", heard.put)
            conn.wait_open()
            assert conn.increment(1) == 5
            while heard.get(timeout=WAIT) != 5:  # earlier events may come first
                pass
        jobs = client.jobs.get_or_create("sync", input=Owner(name="ada"))
        jobs.send("jobs", Job(value=5))
        assert jobs.send("jobs", Job(value=6), wait=True, timeout=0.1).status == "timedOut"
        assert jobs.workflow_result(timeout=WAIT) == 11

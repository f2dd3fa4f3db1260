"""The dispatch seam: every request reaches an actor through ``runtime.dispatch``.

The seam is the same whatever the store, so these tests run on the memory store; the
gateway's use of it is covered by the server tests, with real processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from perdure import ActorRuntime, actor, event, queue, setup
from perdure.errors import ActionNotFound, InvalidRequest, PerdureError, QueueError
from perdure.runtime.actor.operations import ActorAddress, CallAction, SendMessage
from perdure.store import MemoryStore

VALIDATIONS: list[int] = []


def _counted(value: int) -> int:
    VALIDATIONS.append(value)
    return value


# A message body whose validation is counted (coerced: "4" becomes 4).
Job = Annotated[int, AfterValidator(_counted)]


async def _work(c: Any) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["sum"] += message.body
        await message.complete(c.state["sum"])


async def _forward(c: Any, value: int) -> None:
    await c.queue.send("jobs", value)


DISCONNECTS: list[str] = []

worker = actor(
    state={"sum": 0},
    queues={"jobs": queue(Job)},
    events={"ping": event()},
    run=_work,
    actions={
        "sum": lambda c: c.state["sum"],
        "add": lambda c, a, b: a + b,
        "forward": _forward,
        "ping": lambda c: c.broadcast("ping", 1),
    },
    on_disconnect=lambda c, conn: DISCONNECTS.append(conn.id),
)
plain = actor(state={}, actions={"hi": lambda c: "hi"})
registry = setup(use={"worker": worker, "plain": plain})


@pytest.fixture
async def runtime() -> AsyncIterator[ActorRuntime]:
    VALIDATIONS.clear()
    DISCONNECTS.clear()
    async with ActorRuntime(registry, MemoryStore()) as started:
        yield started


async def test_a_message_is_validated_once_per_way_in(runtime: ActorRuntime) -> None:
    handle = runtime.client().worker.get_or_create("once")
    result = await handle.send("jobs", "4", wait=True, timeout=5)
    assert (result.status, result.response) == ("completed", 4)
    assert VALIDATIONS == [4]  # checked before creating the actor, not again in the queue

    VALIDATIONS.clear()
    await handle.forward(3)  # actor code sending to its own queue: validated there
    assert VALIDATIONS == [3]

    VALIDATIONS.clear()
    ref = runtime.dispatch.ref(await handle.resolve())  # by id: the actor validates it
    await ref.send("jobs", 2, wait=True, timeout=5)
    assert VALIDATIONS == [2]


async def test_bad_requests_are_refused_before_an_actor_is_created(
    runtime: ActorRuntime,
) -> None:
    client = runtime.client()
    with pytest.raises(InvalidRequest) as invalid:
        await client.worker.get_or_create("bad").send("jobs", "x")
    assert invalid.value.code == "invalid_message"
    with pytest.raises(QueueError) as unknown_queue:
        await client.worker.get_or_create("bad").send("nope", 1)
    assert unknown_queue.value.code == "invalid_name"
    with pytest.raises(QueueError) as no_queues:
        await client.plain.get_or_create("bad").send("jobs", 1)
    assert no_queues.value.code == "not_configured"
    with pytest.raises(ActionNotFound):
        await client.worker.get_or_create("bad").nope()
    with pytest.raises(InvalidRequest) as arity:
        await client.worker.get_or_create("bad").add(1)
    assert arity.value.metadata == {"action": "add"}
    assert await runtime.store.count_actors() == 0


def test_check_returns_the_coerced_body_marked_validated(runtime: ActorRuntime) -> None:
    checked = runtime.dispatch.check("worker", SendMessage("jobs", "1"))
    assert isinstance(checked, SendMessage)
    assert checked.validated
    assert checked.body == 1
    call = CallAction("add", [1, 2])
    assert runtime.dispatch.check("worker", call) is call
    with pytest.raises(InvalidRequest) as unknown:
        runtime.dispatch.check("ghost", call)
    assert unknown.value.code == "unknown_name"


async def test_refs_resolve_by_name_and_key_and_carry_the_identity(runtime: ActorRuntime) -> None:
    address = ActorAddress(name="worker", key=("a", "b"), method="getOrCreate")
    ref = await runtime.dispatch.resolve(address)
    assert ref.identity is None  # not reached yet
    assert await ref.call("add", [2, 3]) == 5
    assert ref.identity is not None
    assert ref.identity.actor_id == ref.actor_id
    assert ref.identity.key == ("a", "b")
    found = await runtime.dispatch.find("worker", ["a", "b"])
    assert found is not None
    assert found.actor_id == ref.actor_id
    again = await runtime.dispatch.resolve(ActorAddress(name="worker", key=("a", "b")))
    assert again.actor_id == ref.actor_id
    with pytest.raises(PerdureError) as missing:
        await runtime.dispatch.resolve(ActorAddress(name="worker", key=("zzz",)))
    assert missing.value.code == "not_found"


async def test_connections_subscribe_call_and_close_once(runtime: ActorRuntime) -> None:
    conn = await runtime.client().worker.get_or_create("c").connect({"who": "me"})
    assert conn.conn is not None
    ref = conn.conn
    assert ref.params == {"who": "me"}
    received: list[int] = []
    conn.on("ping", received.append)
    assert ref.is_subscribed("ping")
    assert ref.subscription_count == 1
    await conn.action("ping")
    assert received == [1]
    await ref.close()
    await ref.close()
    assert [ref.id] == DISCONNECTS


async def test_destroy_through_a_ref(runtime: ActorRuntime) -> None:
    handle = runtime.client().plain.get_or_create("gone")
    actor_id = await handle.resolve()
    await runtime.dispatch.ref(actor_id).destroy()
    assert await runtime.dispatch.get(actor_id) is None

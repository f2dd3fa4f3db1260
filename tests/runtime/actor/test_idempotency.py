"""Idempotency keys in process (docs/idempotency.md): a keyed send or action call is
applied once per key and every retry gets the first answer (an output, an error, a
send's result), a retry while the first still runs waits for it, a key reused for other
arguments is refused (409), keys are per actor, an oversize key is refused, a refused
send records nothing, the retention window forgets old keys and prunes them, and the
records survive a restart of the runtime."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from perdure import ActionContext, UserError, actor, queue, setup
from perdure.errors import IdempotencyError, PerdureError, StoreUnavailable
from perdure.store import ActorCommit, MemoryStore, SQLiteStore
from perdure.testing import ActorTestEnv

START = datetime(2026, 1, 1, tzinfo=UTC)
GATE: dict[str, asyncio.Event] = {}


async def add(c: ActionContext, amount: int) -> int:
    if "gate" in GATE:
        await GATE["gate"].wait()
    c.state["total"] += amount
    return int(c.state["total"])


def refuse(c: ActionContext, amount: int) -> None:
    c.state["total"] += amount  # applied, then refused: the change is kept with the error
    raise UserError("no more", code="refused", metadata={"amount": amount})


def total(c: ActionContext) -> int:
    return int(c.state["total"])


def size(c: ActionContext) -> int:
    return c.queue.size()


counter = actor(
    state={"total": 0},
    queues={"jobs": queue()},
    actions={"add": add, "refuse": refuse, "total": total, "size": size},
    options={"idempotency_retention": 60.0, "max_queue_size": 3},
)
registry = setup(use={"counter": counter})


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    GATE.clear()
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def test_a_keyed_action_is_applied_once_and_answered_alike(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    keyed = handle.with_idempotency_key("order-1")
    assert await keyed.add(5) == 5
    assert await keyed.add(5) == 5  # the first answer, not applied again
    assert await handle.total() == 5
    assert await handle.with_idempotency_key("order-2").add(5) == 10
    assert await handle.add(1) == 11  # no key: applied every time
    assert await handle.add(1) == 12


async def test_an_error_is_the_first_answer_too(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    keyed = handle.with_idempotency_key("r")
    for _ in range(2):
        with pytest.raises(PerdureError) as raised:
            await keyed.refuse(3)
        assert (raised.value.group, raised.value.code) == ("user", "refused")
        assert raised.value.metadata == {"amount": 3}
    assert await handle.total() == 3


async def test_a_keyed_send_is_enqueued_once(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    keyed = handle.with_idempotency_key("send-1")
    await keyed.send("jobs", {"n": 1})
    await keyed.send("jobs", {"n": 1})
    assert await handle.size() == 1
    stored = await env.store.load_queue(await handle.resolve())
    assert len(stored) == 1


async def test_a_handle_s_first_send_keeps_its_key(env: ActorTestEnv) -> None:
    # A handle not yet resolved checks its first send before it creates the actor: the
    # key given to send() must survive that check.
    for _ in range(2):
        await env.client.counter.get_or_create("c").send("jobs", 1, idempotency_key="first")
    handle = env.client.counter.get_or_create("c")
    assert await handle.size() == 1
    with pytest.raises(IdempotencyError):
        await env.client.counter.get_or_create("c").send("jobs", 2, idempotency_key="first")


async def test_a_refused_send_records_nothing(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    for index in range(3):
        await handle.send("jobs", index)
    keyed = handle.with_idempotency_key("late")
    with pytest.raises(PerdureError) as full:
        await keyed.send("jobs", 9)
    assert full.value.code == "full"
    assert await env.store.load_idempotency(await handle.resolve(), "late") is None


class _KeysRefused(MemoryStore):
    """A store whose commits that carry an idempotency key fail while ``refuse`` is set."""

    refuse = False

    def _apply(self, commit: ActorCommit) -> None:
        if self.refuse and commit.key_put:
            raise StoreUnavailable("memory", timeout=1.0)
        super()._apply(commit)


async def test_an_error_whose_record_failed_is_not_the_first_answer() -> None:
    store = _KeysRefused()
    async with ActorTestEnv(registry, store=store, start=START) as env:
        handle = env.client.counter.get_or_create("c")
        await handle.total()
        store.refuse = True
        # The action raised, but its record (and its change) could not be written: the
        # caller learns of the failed write, not of an error a retry would not repeat.
        with pytest.raises(StoreUnavailable):
            await handle.with_idempotency_key("r").refuse(3)
        store.refuse = False
        await env.settle()
        with pytest.raises(PerdureError) as raised:
            await handle.with_idempotency_key("r").refuse(3)  # runs: nothing was kept
        assert raised.value.code == "refused"
        assert await handle.total() == 3
        # A send's failed write is its answer as it was (in a cluster, the dispatch
        # sends the request on to the actor's new owner when that is a fence's refusal).
        store.refuse = True
        with pytest.raises(StoreUnavailable):
            await handle.send("jobs", 1, idempotency_key="s")
        store.refuse = False
        await env.settle()
        await handle.send("jobs", 1, idempotency_key="s")
        assert await handle.size() == 1


async def test_a_retry_while_the_first_runs_waits_for_it(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    await handle.total()
    GATE["gate"] = asyncio.Event()
    keyed = handle.with_idempotency_key("slow")
    first = asyncio.ensure_future(keyed.add(2))
    second = asyncio.ensure_future(keyed.add(2))
    await asyncio.sleep(0.05)
    assert not first.done()
    assert not second.done()
    GATE["gate"].set()
    assert await asyncio.wait_for(asyncio.gather(first, second), 5) == [2, 2]
    assert await handle.total() == 2


async def test_a_key_reused_for_other_arguments_is_refused(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    keyed = handle.with_idempotency_key("k")
    await keyed.add(1)
    for call in (keyed.add(2), keyed.send("jobs", 1)):
        with pytest.raises(IdempotencyError) as reused:
            await call
        assert (reused.value.code, reused.value.status) == ("key_reused", 409)
    assert await handle.total() == 1


async def test_keys_are_per_actor(env: ActorTestEnv) -> None:
    one = env.client.counter.get_or_create("one").with_idempotency_key("k")
    two = env.client.counter.get_or_create("two").with_idempotency_key("k")
    assert await one.add(1) == 1
    assert await two.add(1) == 1


def test_a_bad_key_is_refused(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    for key in ("", "x" * 257, "caf\u00e9", "a\nb"):
        with pytest.raises(IdempotencyError) as bad:
            handle.with_idempotency_key(key)
        assert (bad.value.group, bad.value.code, bad.value.status) == (
            "idempotency",
            "key_invalid",
            400,
        )
    handle.with_idempotency_key("x" * 256)


async def test_retention_forgets_and_prunes_old_keys(env: ActorTestEnv) -> None:
    handle = env.client.counter.get_or_create("c")
    actor_id = await handle.resolve()
    assert await handle.with_idempotency_key("old").add(1) == 1
    await env.advance(61)
    # Past the 60 s window the key counts no more: applied again.
    assert await handle.with_idempotency_key("old").add(1) == 2
    await env.advance(61)
    await handle.with_idempotency_key("new").add(1)  # this commit prunes what is older
    assert await env.store.load_idempotency(actor_id, "old") is None
    assert await env.store.load_idempotency(actor_id, "new") is not None


async def test_keys_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    answers: list[Any] = []
    for _ in range(2):
        async with ActorTestEnv(registry, store=SQLiteStore(path), start=START) as env:
            answers.append(
                await env.client.counter.get_or_create("c").with_idempotency_key("k").add(7)
            )
            answers.append(await env.client.counter.get_or_create("c").total())
    assert answers == [7, 7, 7, 7]

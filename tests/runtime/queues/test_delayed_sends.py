"""Delayed sends on the test kit's manual clock (docs/queues.md, "Delayed sends").

A message sent with ``delay=`` or ``at=`` is stored at once (answered ``queued``),
hidden from every receiver until due, then delivered in its place; it wakes a sleeping
actor when due, survives a restart, and shows its due time to the admin view. Sent from
the in-process client, from actor code (``c.queue.send``) and from a workflow step.
Bad values get ``queue.*`` codes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from perdure._time import MAX_SEND_DELAY
from perdure.errors import PerdureError
from perdure.runtime.admin.inspector import ActorInspector
from perdure.store import SQLiteStore
from perdure.testing import ActorTestEnv
from tests.support.apps.later import SLEEP_S, registry
from tests.support.early_clock import EarlyOnce

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def test_a_delayed_message_is_hidden_until_due(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", "later", delay=timedelta(seconds=30))
    await worker.send("jobs", "now")
    assert await worker.size() == 2  # both stored
    assert await worker.take() == "now"
    assert await worker.take() is None
    await env.advance(29.9)
    assert await worker.take() is None
    await env.advance(0.2)
    assert await worker.take() == "later"
    stored = await env.store.load_queue(await worker.resolve())
    assert stored == []


async def test_at_takes_an_aware_datetime_or_epoch_ms(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    await worker.send("jobs", "dt", at=START + timedelta(minutes=1))
    due_ms = int((START + timedelta(minutes=2)).timestamp() * 1000)
    await worker.send("jobs", "ms", at=due_ms)
    await worker.send("jobs", "past", at=START - timedelta(days=1))  # due: at once
    assert await worker.take() == "past"
    assert await worker.take() is None
    await env.advance(60)
    assert await worker.take() == "dt"
    assert await worker.take() is None
    await env.advance(60)
    assert await worker.take() == "ms"


async def test_a_sleeping_workflow_is_woken_when_it_is_due(env: ActorTestEnv) -> None:
    inbox = env.client.inbox.get_or_create("i")
    await inbox.send("jobs", "a day later", delay=timedelta(days=1))
    actor_id = await inbox.resolve()
    await env.advance(SLEEP_S + 1)
    assert not env.runtime.is_live(actor_id)  # asleep, waiting for its message
    stored = await env.store.get_actor(actor_id)
    assert stored is not None
    assert stored.wake_at == _ms(START + timedelta(days=1))
    await env.advance(timedelta(days=1) - timedelta(seconds=SLEEP_S + 2))
    assert not env.runtime.is_live(actor_id)
    await env.advance(0.8)  # its alarm wakes it a little early: not delivered yet
    assert await inbox.got() == []
    await env.advance(0.3)  # due: the workflow takes it
    assert env.runtime.is_live(actor_id)
    assert await inbox.got() == ["a day later"]


async def test_sends_from_actor_code_and_from_a_step(env: ActorTestEnv) -> None:
    inbox = env.client.inbox.get_or_create("code")
    await inbox.send_later("from an action", 10)
    await env.settle()
    assert await inbox.got() == []
    await env.advance(10.1)
    assert await inbox.got() == ["from an action"]
    stepper = env.client.stepper.get_or_create("s")
    await env.settle()
    assert await stepper.got() == []
    await env.advance(5.1)
    assert await stepper.got() == ["later"]


async def test_the_send_answer_and_the_admin_view(env: ActorTestEnv) -> None:
    worker = env.client.worker.get_or_create("w")
    actor_id = await worker.resolve()
    ref = env.runtime.dispatch.ref(actor_id)
    assert (await ref.send("jobs", "x", delay=5.0)).status == "queued"
    assert (await ref.send("jobs", "y")).status == "completed"
    view = await ActorInspector(env.runtime).details(actor_id)
    due = {message["body"]: message["due_at"] for message in view["queue"]}
    assert due == {"x": _ms(START) + 5000, "y": None}


async def test_a_delayed_message_survives_a_restart(tmp_path: Path) -> None:
    async with ActorTestEnv(registry, store=SQLiteStore(tmp_path / "db"), start=START) as env:
        inbox = env.client.inbox.get_or_create("r")
        await inbox.send("jobs", "after the restart", delay=3600)
        await env.settle()
    later = START + timedelta(minutes=30)
    async with ActorTestEnv(registry, store=SQLiteStore(tmp_path / "db"), start=later) as env:
        inbox = env.client.inbox.get_or_create("r")
        actor_id = await inbox.resolve()
        await env.advance(SLEEP_S + 1)
        assert not env.runtime.is_live(actor_id)
        await env.advance(timedelta(minutes=30) - timedelta(seconds=SLEEP_S + 1.1))
        assert await env.store.load_queue(actor_id) != []
        await env.advance(0.2)
        assert await inbox.got() == ["after the restart"]


async def test_a_timer_run_just_before_the_due_time_still_delivers(env: ActorTestEnv) -> None:
    """The queue's timer once read the clock twice: a millisecond before the message
    was due to wake its receivers (none), then in the due millisecond to arm the next
    timer (none: the message was visible). The waiting workflow never got it."""
    inbox = env.client.inbox.get_or_create("edge")
    actor_id = await inbox.resolve()
    await env.settle()
    instance = env.runtime.live_instance(actor_id)
    assert instance is not None
    assert instance.queue is not None
    await inbox.send("jobs", "due", delay=0.5)  # within its sleep_timeout: it stays awake
    leases = instance.queue.leases
    clock = EarlyOnce(leases._clock)
    leases._clock = clock
    clock.early = True
    await env.advance(0.5)
    await env.advance(0.01)
    assert env.runtime.live_instance(actor_id) is instance  # the timer's work, not a wake
    assert await inbox.got() == ["due"]


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"delay": 5, "at": 1}, "queue.delay_and_at"),
        ({"delay": -1}, "queue.invalid_delay"),
        ({"delay": "soon"}, "queue.invalid_delay"),
        ({"delay": MAX_SEND_DELAY + 1}, "queue.invalid_delay"),
        ({"at": datetime(2030, 1, 1)}, "queue.invalid_delay"),  # naive
        ({"at": -5}, "queue.invalid_delay"),
        ({"at": START + timedelta(days=400)}, "queue.invalid_delay"),
        ({"delay": 5, "wait": True, "timeout": 10}, "queue.delayed_wait"),
    ],
)
async def test_bad_values_get_codes(
    env: ActorTestEnv, kwargs: dict[str, object], code: str
) -> None:
    worker = env.client.worker.get_or_create("w")
    with pytest.raises(PerdureError) as caught:
        await worker.send("jobs", "x", **kwargs)  # type: ignore[call-overload]
    assert caught.value.identifier == code
    assert await worker.size() == 0


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)

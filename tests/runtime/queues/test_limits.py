"""Concurrency and rate limits per key, on the test kit's manual clock (the logic,
without a server; tests/scenarios/leases/test_tenant_limits.py runs it over a real
server with kill -9).

The newcomer's queue (tests/support/apps/tenant_limits.py): at most 2 jobs in progress
and 10 started per second per tenant. A receive passes over a tenant at its limit and
takes the next tenant's job; a waiting receiver is woken when a slot frees (complete,
a lease running out, a dead letter) or the rate window reopens; in progress is what the
store says (leases) or workflow history rebuilds (held messages), and the rate windows
are stored, so a restart of the runtime keeps both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from perdure import actor, queue, setup, workflow
from perdure.errors import ArgumentError, PerdureError
from perdure.observe.metrics import MetricsObserver
from perdure.runtime.admin.inspector import ActorInspector
from perdure.runtime.queues.limits import RATE_PREFIX
from perdure.store.kv import prefix_end
from perdure.testing import ActorTestEnv
from tests.support.apps.tenant_limits import LEASE, registry
from tests.support.docs import python_blocks
from tests.support.early_clock import EarlyOnce
from tests.support.runtimes import StoreFactory
from tests.support.scrape import Samples

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry, store=request.param, start=START) as test_env:
        yield test_env


async def _send(handle: Any, *tenants: str) -> None:
    for tenant in tenants:
        await handle.send("jobs", {"tenant": tenant})


async def _start_ten(jobs: Any) -> list[int]:
    """Take ten messages two at a time (the concurrency), each completed at once:
    their tenant's rate for this second. Returns their ids."""
    started = []
    for _ in range(5):
        for message_id, _ in await jobs.take(2):
            started.append(message_id)
            await jobs.complete(message_id)
    return started


async def test_a_tenant_at_its_limit_is_passed_over_not_waited_for(env: ActorTestEnv) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, "a", "a", "a", "b", "a", "c")
    # Two of a's, then b's and c's: a's third and fourth wait behind no one.
    assert await jobs.take(6) == [[1, "a"], [2, "a"], [4, "b"], [6, "c"]]
    assert await jobs.take(6) == []
    await jobs.complete(1)
    assert await jobs.take(6) == [[3, "a"]]
    await jobs.complete(2)
    await jobs.complete(3)
    assert await jobs.take(6) == [[5, "a"]]


async def test_at_most_ten_starts_per_second_per_tenant(env: ActorTestEnv) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, *["a"] * 12, "b")
    assert await _start_ten(jobs) == list(range(1, 11))
    assert await jobs.take(2) == [[13, "b"]]  # a is at its rate, b is not
    await env.advance(0.99)
    assert await jobs.take(2) == []
    await env.advance(0.02)  # a second after the first start: the window reopens
    assert await jobs.take(2) == [[11, "a"], [12, "a"]]


async def test_a_waiting_receiver_is_woken_when_a_slot_frees(env: ActorTestEnv) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, "a", "a", "a")
    assert await jobs.take(3) == [[1, "a"], [2, "a"]]
    waiting = asyncio.ensure_future(jobs.take(1, 30.0))
    await env.settle()
    assert not waiting.done()
    await jobs.complete(2)
    assert await asyncio.wait_for(waiting, 5) == [[3, "a"]]


@pytest.mark.parametrize("early", [False, True])
async def test_a_waiting_receiver_is_woken_when_the_rate_window_reopens(
    env: ActorTestEnv, early: bool
) -> None:
    """``early``: the rate timer reads the clock a millisecond short once, as the loop's
    timer may run before the wall clock's due time (uvloop); the window is then still
    closed, and the receiver must still get its message when it opens."""
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, *["a"] * 11)
    await _start_ten(jobs)
    instance = env.runtime.live_instance(await jobs.resolve())
    assert instance is not None
    assert instance.queue is not None
    limiter = instance.queue.limiter
    assert limiter is not None
    clock = limiter._clock = EarlyOnce(limiter._clock)
    waiting = asyncio.ensure_future(jobs.take(1, 30.0))
    await env.settle()
    assert not waiting.done()
    await env.advance(0.99)
    assert not waiting.done()
    clock.early = early
    await env.advance(0.01)
    await env.advance(0.005)
    assert await asyncio.wait_for(waiting, 5) == [[11, "a"]]


async def test_a_lease_running_out_frees_its_slot_and_a_delayed_nack_keeps_it(
    env: ActorTestEnv,
) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, "a", "a", "a")
    assert await jobs.take(3) == [[1, "a"], [2, "a"]]
    await jobs.nack(1, 0.5)  # given back for later: still the tenant's, backing off
    assert await jobs.take(3) == []
    await env.advance(0.6)
    assert await jobs.take(3) == [[1, "a"]]  # its delay ended: visible, and first
    waiting = asyncio.ensure_future(jobs.take(1, 30.0))
    await env.advance(LEASE - 0.5)  # message 2's lease ran out: a slot is free
    assert await asyncio.wait_for(waiting, 5) == [[2, "a"]]


async def test_a_plain_receive_of_a_concurrency_limited_queue_is_refused(
    env: ActorTestEnv,
) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, "a")
    with pytest.raises(PerdureError) as refused:
        await jobs.take_plain()
    assert refused.value.code == "concurrency_needs_completable"
    assert await jobs.size() == 1  # nothing taken


async def test_a_message_without_a_key_is_refused_at_send(env: ActorTestEnv) -> None:
    jobs = env.client.jobs.get_or_create("j")
    for body in ({"job": 1}, {"tenant": ["a"]}, {"tenant": "x" * 300}, "text"):
        with pytest.raises(PerdureError) as refused:
            await jobs.send("jobs", body)
        assert refused.value.code == "invalid_limit_key"
    await jobs.send("jobs", {"tenant": 7})  # an integer key is a key too
    await jobs.send("other", {"job": 1})  # a queue without limits takes anything
    assert await jobs.size() == 2


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"concurrency": 0}, "invalid_concurrency"),
        ({"concurrency": True}, "invalid_concurrency"),
        ({"concurrency": 1.5}, "invalid_concurrency"),
        ({"rate": (10, 0)}, "invalid_rate"),
        ({"rate": (10, -1.0)}, "invalid_rate"),
        ({"rate": (0, 1.0)}, "invalid_rate"),
        ({"rate": 10}, "invalid_rate"),
        ({"rate": (10, "1s")}, "invalid_rate"),
        ({"concurrency": 2, "key": "t" * 257}, "invalid_limit_key"),
        ({"concurrency": 2, "key": ""}, "invalid_limit_key"),
        ({"concurrency": 2, "key": 5}, "invalid_limit_key"),
        ({"key": "tenant"}, "limit_key_without_limit"),
    ],
)
def test_bad_declarations_fail_at_definition_time(options: dict[str, Any], code: str) -> None:
    with pytest.raises(ArgumentError) as bad:
        queue(**options)
    assert bad.value.code == code


def test_a_declaration_reads_like_the_newcomer_wrote_it() -> None:
    spec = queue(concurrency=2, rate=(10, timedelta(seconds=1)), key="tenant")
    assert spec.limits is not None
    assert (spec.limits.concurrency, spec.limits.rate, spec.limits.key) == (2, (10, 1.0), "tenant")
    assert queue().limits is None
    by_function = queue(concurrency=1, key=lambda body: body["org"]["id"])
    assert by_function.limits is not None
    assert by_function.limits.key_of({"org": {"id": 42}}) == "42"


async def test_a_workflow_holding_a_message_counts_it_in_progress(env: ActorTestEnv) -> None:
    flow = env.client.flow.get_or_create("f")
    await _send(flow, "a", "a", "a")
    await env.settle()
    assert await flow.seen() == ["a"]  # the workflow holds message 1 for 5 s
    assert await flow.take(3) == [[2, "a"]]  # one slot left of a's two
    await flow.complete(2)
    await env.advance(5.1)  # the workflow completes message 1 and takes message 3
    assert await flow.seen() == ["a", "a"]
    assert await flow.take(3) == []  # 3 is the workflow's now: nothing left


async def test_both_limits_survive_a_restart(stores: StoreFactory) -> None:
    """In progress comes from the stored leases and the rate windows from stored
    records: a new runtime on the same store (memory forgotten) keeps both."""
    async with ActorTestEnv(registry, store=stores(), start=START) as env:
        jobs = env.client.jobs.get_or_create("j")
        await _send(jobs, *["a"] * 8, "b", "b", "b", *["c"] * 12)
        assert await jobs.take(4) == [[1, "a"], [2, "a"], [9, "b"], [10, "b"]]
        assert await _start_ten(jobs) == list(range(12, 22))  # c's ten
        actor_id = await jobs.resolve()
    later = START + timedelta(seconds=0.5)  # both the leases and c's window still hold
    async with ActorTestEnv(registry, store=stores(), start=later) as env:
        jobs = env.client.jobs.get_or_create("j")
        assert await jobs.take(10) == []
        await env.advance(0.51)  # c's window reopens; a's and b's leases still hold
        assert await jobs.take(10) == [[22, "c"], [23, "c"]]
        await jobs.complete(22)
        await jobs.complete(23)
        await env.advance(LEASE)  # the leases ran out: a and b are redelivered
        taken = await jobs.take(10)
        assert [tenant for _, tenant in taken] == ["a", "a", "b", "b"]
        rows = await env.store.kv_list(actor_id, start=RATE_PREFIX, end=prefix_end(RATE_PREFIX))
        assert len(rows) == 2  # the windows of a and b: c's ran out and was swept
        assert await env.store.kv_list(actor_id, end=b"~") == []  # the user's KV is empty


async def test_a_queue_without_limits_has_no_limiter() -> None:
    plain = setup(use={"box": actor(state={}, queues={"jobs": queue()})})
    async with ActorTestEnv(plain, start=START) as env:
        box = env.client.box.get_or_create("b")
        await box.send("jobs", 1)
        instance = env.runtime.live_instance(await box.resolve())
        assert instance is not None
        assert instance.queue is not None
        assert instance.queue.limiter is None


async def test_the_admin_view_and_the_metrics_count_per_queue_and_key(
    env: ActorTestEnv,
) -> None:
    jobs = env.client.jobs.get_or_create("j")
    await _send(jobs, "a", "a", "a", "a", "b", "b", "c")
    assert len(await jobs.take(7)) == 5  # a, a, b, b, c; two of a's wait
    actor_id = await jobs.resolve()
    view = (await ActorInspector(env.runtime).details(actor_id))["limits"]
    assert set(view) == {"jobs"}  # `other` has no limits
    jobs_view = view["jobs"]
    assert jobs_view["concurrency"] == 2
    assert jobs_view["rate"] == {"limit": 10, "period": 1.0}
    assert jobs_view["key"] == "tenant"
    assert (jobs_view["in_progress"], jobs_view["keys_total"]) == (5, 3)
    assert jobs_view["keys"] == [
        {"key": "a", "in_progress": 2, "started": 2},
        {"key": "b", "in_progress": 2, "started": 2},
        {"key": "c", "in_progress": 1, "started": 1},
    ]
    observer = MetricsObserver(["jobs"])
    await observer.refresh(env.runtime)
    samples = Samples(observer.exposition().decode())
    assert samples.get("perdure_queue_in_progress", actor="jobs", queue="jobs") == 5
    assert samples.get("perdure_queue_waiting_for_slot", actor="jobs", queue="jobs") == 2
    assert "tenant" not in observer.exposition().decode()  # no series per key
    # The rate windows are records of the actor's KV space, but not the user's.
    assert await env.store.kv_list(actor_id, start=RATE_PREFIX, end=prefix_end(RATE_PREFIX))
    listing = await ActorInspector(env.runtime).kv(actor_id, prefix=None, after=None, limit=10)
    assert listing == {"records": [], "next": None}


async def test_the_example_of_the_docs_runs() -> None:
    """docs/queues.md's declaration, as written, with a ``process`` that records."""
    text = (Path(__file__).parents[3] / "docs" / "queues.md").read_text()
    block = next(b for b in python_blocks(text) if "concurrency=2" in b)
    processed: list[Any] = []

    async def process(body: Any) -> None:
        processed.append(body)

    namespace: dict[str, Any] = {"process": process}
    exec(block, namespace)  # the page's own example
    limits = namespace["jobs"].queues["jobs"].limits
    assert (limits.concurrency, limits.rate, limits.key) == (2, (10, 1.0), "tenant")
    async with ActorTestEnv(setup(use={"jobs": namespace["jobs"]}), start=START) as env:
        handle = env.client.jobs.get_or_create("j")
        await handle.send("jobs", {"tenant": "acme", "document": 42})
        assert await handle.work() == "done"
        assert processed == [{"tenant": "acme", "document": 42}]


async def _consume(c: Any) -> None:
    async for message in c.queue.iter(names="jobs", completable=True):
        c.state["got"].append(message.id)
        await message.complete()


async def test_a_sleeping_actor_is_woken_when_a_rate_window_reopens() -> None:
    """A ``run`` loop held back by a rate lets its actor sleep; the actor's alarm
    wakes it when the window reopens, with no request."""
    looper = actor(
        state={"got": []},
        queues={"jobs": queue(rate=(2, 10.0), key="tenant")},
        run=_consume,
        actions={"got": lambda c: c.state["got"]},
        options={"sleep_timeout": 0.5},
    )
    async with ActorTestEnv(setup(use={"looper": looper}), start=START) as env:
        handle = env.client.looper.get_or_create("l")
        await _send(handle, "a", "a", "a")
        await env.settle()
        assert await handle.got() == [1, 2]
        actor_id = await handle.resolve()
        await env.advance(1.0)
        assert not env.runtime.is_live(actor_id)  # asleep, its third job held back
        await env.advance(9.1)  # ten seconds after the first starts: its alarm
        assert env.runtime.is_live(actor_id)
        assert await handle.got() == [1, 2, 3]


async def _plain_receive(ctx: Any) -> None:
    await ctx.queue.next("job", names="jobs")


async def test_a_workflow_plain_receive_of_a_concurrency_limited_queue_is_refused() -> None:
    flow = workflow(
        state={}, queues={"jobs": queue(concurrency=1, key="tenant")}, run=_plain_receive
    )
    async with ActorTestEnv(setup(use={"flow": flow}), start=START) as env:
        handle = env.client.flow.get_or_create("f")
        await handle.send("jobs", {"tenant": "a"})
        await env.settle()
        status = await handle.workflow_status()
        assert status["status"] == "failed"
        assert "concurrency_needs_completable" in str(status["error"])

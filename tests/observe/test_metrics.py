"""``/metrics`` in process: known workloads on a real SQLite store, then the numbers.

The app runs on ``httpx.ASGITransport`` (from a loopback client address, so the admin
access rule lets it scrape); the runtime is started by the test (the transport runs no
lifespan). ``test_metrics_server.py`` checks the same route on a real ``perdure serve``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure import ActorRuntime, UserError
from perdure.errors import ActionTimedOut
from perdure.observe.metrics import MetricsObserver, error_code
from perdure.server import create_app
from perdure.server.edge.admin_access import AdminAccess
from perdure.store import SQLiteStore
from tests.support.apps.metrics import registry
from tests.support.scrape import Samples, scrape
from tests.support.wait import eventually

LOOPBACK = ("127.0.0.1", 123)


@dataclass
class Rig:
    runtime: ActorRuntime
    http: httpx.AsyncClient

    async def scrape(self) -> Samples:
        return await scrape(self.http)

    async def action(self, name: str, key: str, action: str, *args: Any) -> httpx.Response:
        url = f"/gateway/{name}/action/{action}?rvt-method=getOrCreate&rvt-key={key}"
        return await self.http.post(url, json={"args": list(args)})

    async def send(self, name: str, key: str, queue: str, body: Any) -> None:
        url = f"/gateway/{name}/queue/{queue}?rvt-method=getOrCreate&rvt-key={key}"
        response = await self.http.post(url, json={"name": queue, "body": body, "wait": False})
        assert response.status_code == 200, response.text

    async def until(self, what: str, name: str, value: float, **labels: str) -> Samples:
        """Scrape until ``name{labels}`` reaches ``value``; the last scrape."""
        last: list[Samples] = []

        async def reached() -> bool:
            last[:] = [await self.scrape()]
            return last[0].get(name, **labels) >= value

        await eventually(reached, timeout=15, interval=0.02, what=what)
        return last[0]


def _client(app: Any, address: tuple[str, int] = LOOPBACK) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=address)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    runtime = ActorRuntime(registry, SQLiteStore(tmp_path / "metrics.db"))
    app = create_app(runtime)
    async with runtime, _client(app) as http:
        yield Rig(runtime, http)


@pytest.fixture
def key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


async def test_actions_counted_and_timed_with_error_codes(rig: Rig, key: str) -> None:
    for _ in range(5):
        assert (await rig.action("counter", key, "inc")).status_code == 200
    for _ in range(2):
        assert (await rig.action("counter", key, "refuse")).status_code == 500
    assert (await rig.action("counter", key, "crash")).status_code == 500
    samples = await rig.scrape()
    assert samples.get("perdure_actions_total", actor="counter", action="inc") == 5
    assert samples.get("perdure_actions_total", actor="counter", action="refuse") == 2
    assert samples.get("perdure_actions_total", actor="counter", action="crash") == 1
    inc = {"actor": "counter", "action": "inc"}
    assert samples.get("perdure_action_duration_seconds_count", **inc) == 5
    assert samples.get("perdure_action_duration_seconds_bucket", **inc, le="+Inf") == 5
    assert samples.get("perdure_action_duration_seconds_sum", **inc) > 0
    errors = "perdure_action_errors_total"
    assert samples.get(errors, actor="counter", action="refuse", code="user.refused") == 2
    assert samples.get(errors, actor="counter", action="crash", code="actor.internal_error") == 1
    assert samples.total(errors, action="inc") == 0
    # Bounded cardinality: labels name types and actions, never an actor's key or id.
    assert key not in samples.text


async def test_queue_messages_sent_consumed_and_waiting(rig: Rig, key: str) -> None:
    for value in range(7):
        await rig.send("jobs", key, "jobs", {"value": value})
    for _ in range(3):
        await rig.send("jobs", key, "later", {"value": 0})
    queue = {"actor": "jobs", "queue": "jobs"}
    samples = await rig.until(
        "7 jobs consumed", "perdure_queue_messages_consumed_total", 7, **queue
    )
    assert samples.get("perdure_queue_messages_sent_total", **queue) == 7
    assert samples.get("perdure_queue_messages_sent_total", actor="jobs", queue="later") == 3
    assert samples.get("perdure_queue_messages_consumed_total", actor="jobs", queue="later") == 0
    # The workflow's step ran once per job; the `later` messages still wait.
    samples = await rig.until("7 steps", "perdure_workflow_steps_total", 7, actor="jobs")
    assert samples.get("perdure_workflow_steps_total", actor="jobs") == 7
    assert samples.get("perdure_workflow_step_duration_seconds_count", actor="jobs") == 7
    assert samples.get("perdure_queue_depth", actor="jobs") == 3
    assert samples.get("perdure_workflow_step_retries_total", actor="jobs") == 0


@pytest.mark.parametrize(
    ("name", "outcome", "failures"),
    [("flaky", "completed", 0), ("doomed", "failed", 1)],
    ids=["fails-once-then-succeeds", "exhausts-its-retries"],
)
async def test_step_retries_and_failures(
    rig: Rig, key: str, name: str, outcome: str, failures: int
) -> None:
    """Both steps fail once and retry once; the doomed one fails again, for good."""
    await getattr(rig.runtime.client(), name).get_or_create(key).resolve()
    total = f"perdure_workflows_{outcome}_total"
    samples = await rig.until(f"the {name} workflow {outcome}", total, 1, actor=name)
    assert samples.get("perdure_workflow_step_retries_total", actor=name) == 1
    assert samples.get("perdure_workflow_step_failures_total", actor=name) == failures
    assert samples.get("perdure_workflow_steps_total", actor=name) == 2
    assert samples.get("perdure_workflow_step_duration_seconds_count", actor=name) == 2
    other = "failed" if outcome == "completed" else "completed"
    assert samples.get(f"perdure_workflows_{other}_total", actor=name) == 0
    # The retry waited out its backoff on the actor's alarm.
    assert samples.get("perdure_alarms_fired_total", actor=name, kind="workflow") == 1


async def test_store_commits_with_their_batch_sizes(rig: Rig, key: str) -> None:
    for _ in range(3):
        await rig.action("counter", key, "inc")
    samples = await rig.scrape()
    commits = samples.get("perdure_store_commits_total")
    assert commits >= 3  # the creation, then one per state-changing action
    assert samples.get("perdure_store_commit_duration_seconds_count") == commits
    assert samples.get("perdure_store_commit_batch_size_count") == commits
    assert samples.get("perdure_store_commit_batch_size_sum") >= commits
    assert samples.get("perdure_store_commit_batch_size_bucket", le="1.0") <= commits
    assert samples.get("perdure_store_errors_total", operation="commit") == 0


async def test_awake_and_sleeping_actors(rig: Rig, key: str) -> None:
    await rig.action("counter", f"{key}-a", "inc")
    await rig.action("counter", f"{key}-b", "inc")
    samples = await rig.scrape()
    assert samples.get("perdure_actors_awake", actor="counter") == 2
    assert samples.get("perdure_actors_sleeping", actor="counter") == 0
    # A type with nothing stored still has its series, at zero.
    assert ("perdure_actors_awake", frozenset({("actor", "doomed")})) in samples.values
    actor_id = await rig.runtime.client().counter.get(f"{key}-a").resolve()
    await rig.runtime.sleep_actor(actor_id)
    samples = await rig.scrape()
    assert samples.get("perdure_actors_awake", actor="counter") == 1
    assert samples.get("perdure_actors_stored", actor="counter") == 2
    assert samples.get("perdure_actors_sleeping", actor="counter") == 1
    assert samples.get("perdure_actor_sleeps_total", actor="counter", reason="sleep") == 1
    assert samples.get("perdure_actor_wakes_total", actor="counter") == 2


async def test_connections_and_events(rig: Rig, key: str) -> None:
    handle = rig.runtime.client().counter.get_or_create(key)
    connection = await handle.connect()
    received: list[Any] = []
    connection.on("pinged", received.append)
    try:
        await connection.action("ping", "hello")
        await eventually(lambda: received, what="the event")
        samples = await rig.scrape()
        assert samples.get("perdure_connections", actor="counter") == 1
        pinged = {"actor": "counter", "event": "pinged"}
        assert samples.get("perdure_events_sent_total", **pinged) >= 1
        assert samples.get("perdure_event_recipients_total", **pinged) >= 1
    finally:
        await connection.dispose()
    samples = await rig.scrape()
    assert samples.get("perdure_connections", actor="counter") == 0


async def test_a_schedule_firing(rig: Rig, key: str) -> None:
    assert (await rig.action("counter", key, "pingLater", 0.05)).status_code == 200
    fired = {"actor": "counter", "kind": "schedule"}
    samples = await rig.until("the schedule fired", "perdure_alarms_fired_total", 1, **fired)
    assert samples.get("perdure_alarm_lateness_seconds_count", kind="schedule") == 1
    await rig.until("its action ran", "perdure_actions_total", 1, actor="counter", action="fired")


async def test_each_runtime_has_its_own_registry(tmp_path: Path, rig: Rig, key: str) -> None:
    await rig.action("counter", key, "inc")
    other = ActorRuntime(registry, SQLiteStore(tmp_path / "other.db"))
    async with other, _client(create_app(other)) as http:
        samples = await scrape(http)
    assert samples.get("perdure_actions_total", actor="counter", action="inc") == 0
    assert samples.get("perdure_actors_awake", actor="counter") == 0


async def test_metrics_off(tmp_path: Path) -> None:
    runtime = ActorRuntime(registry, SQLiteStore(tmp_path / "off.db"))
    app = create_app(runtime, metrics=False)
    assert not any(isinstance(o, MetricsObserver) for o in runtime.observers.observers)
    async with runtime, _client(app) as http:
        response = await http.get("/metrics")
    assert response.status_code == 404
    assert response.json()["code"] == "route_not_found"


async def test_only_loopback_may_scrape_without_a_token(tmp_path: Path) -> None:
    runtime = ActorRuntime(registry, SQLiteStore(tmp_path / "far.db"))
    async with runtime, _client(create_app(runtime), ("192.0.2.7", 4000)) as http:
        response = await http.get("/metrics")
    assert response.status_code == 403
    body = response.json()
    assert (body["group"], body["code"]) == ("admin", "forbidden")
    assert "loopback" in body["message"]
    assert response.headers["x-rivet-error"] == "admin.forbidden"


def test_error_codes() -> None:
    assert error_code(UserError("Refused.", code="refused")) == "user.refused"
    assert error_code(ActionTimedOut("slow", 1.0)) == "actor.action_timed_out"
    assert error_code(RuntimeError("a bug")) == "actor.internal_error"


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    """A value equal to a bound falls in that bound's bucket (Prometheus' ``le``); one
    above every bound only in ``+Inf``; ``_count`` is the ``+Inf`` bucket."""
    observer = MetricsObserver()
    series = observer.commit_seconds.get(())
    for value in (0.0001, 0.0002, 100.0):
        series.observe(value)
    samples = Samples(observer.exposition().decode())
    bucket = "perdure_store_commit_duration_seconds_bucket"
    assert samples.get(bucket, le="0.0001") == 1
    assert samples.get(bucket, le="0.00025") == 2
    assert samples.get(bucket, le="60.0") == 2
    assert samples.get(bucket, le="+Inf") == 3
    assert samples.get("perdure_store_commit_duration_seconds_count") == 3
    assert samples.get("perdure_store_commits_total") == 3
    assert samples.get("perdure_store_commit_duration_seconds_sum") == pytest.approx(100.0003)


async def test_no_admin_turns_metrics_off_too(tmp_path: Path) -> None:
    runtime = ActorRuntime(registry, SQLiteStore(tmp_path / "closed.db"))
    app = create_app(runtime, admin=AdminAccess(enabled=False))
    async with runtime, _client(app) as http:
        response = await http.get("/metrics")
    assert response.status_code == 403
    assert (response.json()["group"], response.json()["code"]) == ("admin", "disabled")

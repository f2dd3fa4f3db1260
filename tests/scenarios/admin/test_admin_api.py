"""The admin API against a real server: reads, the live feed, and the operations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.keys import serialize_key
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(60)


async def _create(client: httpx.AsyncClient, name: str, key: str) -> str:
    answer = await client.put("/actors", json={"name": name, "key": serialize_key([key])})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["actor"]["actor_id"])


_JSON = {"content-type": "application/json"}


async def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def _error(response: httpx.Response, status: int, identifier: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert f"{body['group']}.{body['code']}" == identifier, body
    return dict(body)


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        yield http


async def _workflow(client: httpx.AsyncClient, actor_id: str) -> dict[str, Any]:
    details = await _ok(await client.get(f"/admin/actors/{actor_id}"))
    workflow: dict[str, Any] = details["workflow"]
    return workflow


async def test_overview_search_and_details(client: httpx.AsyncClient, key: str) -> None:
    counter = await _create(client, "counter", key)
    await _create(client, "counter", key + "-other")
    assert (
        await _ok(await client.post(f"/admin/actors/{counter}/actions/bump", json={"args": [4]}))
    )["output"] == 4
    schedule_id = (
        await _ok(await client.post(f"/admin/actors/{counter}/actions/plan", json={"args": [3600]}))
    )["output"]
    await _ok(await client.post(f"/admin/actors/{counter}/actions/cron", json={}))

    overview = await _ok(await client.get("/admin/overview"))
    types = {t["name"]: t for t in overview["types"]}
    assert types["counter"]["kind"] == "actor"
    assert types["counter"]["actors"] >= 2
    assert types["counter"]["actions"] == ["bump", "cron", "plan"]
    assert types["jobs"]["kind"] == "workflow"
    assert types["jobs"]["queues"] == ["jobs"]

    found = await _ok(await client.get("/admin/actors", params={"name": "counter", "q": key}))
    assert sorted(row["key"][0] for row in found["actors"]) == [key, key + "-other"]
    awake = await _ok(await client.get("/admin/actors", params={"q": key, "status": "awake"}))
    assert counter in [row["actor_id"] for row in awake["actors"]]
    asleep = await _ok(await client.get("/admin/actors", params={"q": key, "status": "asleep"}))
    assert counter not in [row["actor_id"] for row in asleep["actors"]]
    by_id = await _ok(await client.get("/admin/actors", params={"q": counter[:12]}))
    assert counter in [row["actor_id"] for row in by_id["actors"]]

    details = await _ok(await client.get(f"/admin/actors/{counter}"))
    assert details["actor"]["awake"] is True
    assert details["actor"]["key"] == [key]
    assert details["state"] == {"n": 4}
    assert details["workflow"] is None
    schedules = {s["id"]: s for s in details["schedules"]}
    assert schedules[schedule_id]["kind"] == "at"
    assert schedules[schedule_id]["action"] == "bump"
    assert schedules["cron:tick"]["interval_ms"] == 60000
    assert details["actor"]["wake_at"] is not None

    await _ok(await client.delete(f"/admin/actors/{counter}/schedules/{schedule_id}"))
    _error(
        await client.delete(f"/admin/actors/{counter}/schedules/{schedule_id}"),
        404,
        "actor.schedule_not_found",
    )
    details = await _ok(await client.get(f"/admin/actors/{counter}"))
    assert [s["id"] for s in details["schedules"]] == ["cron:tick"]


async def test_queue_and_workflow_history_are_shown(client: httpx.AsyncClient, key: str) -> None:
    jobs = await _create(client, "jobs", key)
    for value in (1, 2):
        sent = await client.post(
            f"/admin/actors/{jobs}/queues/jobs", json={"body": {"value": value}}
        )
        assert (await _ok(sent))["status"] == "completed"

    async def two_applied() -> bool:
        return (await _ok(await client.get(f"/admin/actors/{jobs}")))["state"]["applied"] == [1, 2]

    await eventually(two_applied, timeout=10)
    workflow = await _workflow(client, jobs)
    assert workflow["status"] == "running"
    by_location = {entry["location"]: entry for entry in workflow["history"]}
    assert by_location["jobs"]["kind"] == "loop"
    apply = by_location["jobs/~1/apply"]
    assert apply["status"] == "completed"
    assert apply["attempts"] == 1
    assert apply["output"] == 2
    assert apply["iteration"] == 1
    assert apply["depth"] == 1
    take = by_location["jobs/~1/take"]
    assert take["kind"] == "message"
    assert take["messages"][0]["body"] == {"value": 2}
    seqs = [entry["seq"] for entry in workflow["history"]]
    assert seqs == sorted(seqs)


async def test_bad_requests_get_error_bodies_and_change_nothing(
    client: httpx.AsyncClient, key: str
) -> None:
    counter = await _create(client, "counter", key)
    missing = "0" * len(counter)
    _error(await client.get(f"/admin/actors/{missing}"), 404, "actor.not_found")
    _error(
        await client.post(f"/admin/actors/{missing}/actions/bump", json={"args": [1]}),
        404,
        "actor.not_found",
    )
    _error(
        await client.post(f"/admin/actors/{counter}/actions/nope", json={}),
        404,
        "actor.action_not_found",
    )
    _error(
        await client.post(f"/admin/actors/{counter}/actions/bump", content=b"{", headers=_JSON),
        400,
        "actor.invalid_request",
    )
    _error(  # a body a form could send
        await client.post(
            f"/admin/actors/{counter}/actions/bump",
            content=b'{"args": [1]}',
            headers={"content-type": "text/plain"},
        ),
        415,
        "request.unsupported_media_type",
    )
    _error(
        await client.post(f"/admin/actors/{counter}/actions/bump", json={"args": 3}),
        400,
        "actor.invalid_args",
    )
    _error(
        await client.post(f"/admin/actors/{counter}/workflow/retry"), 409, "workflow.not_a_workflow"
    )
    _error(
        await client.get("/admin/actors", params={"status": "sideways"}),
        400,
        "actor.invalid_filter",
    )
    _error(await client.get("/admin/actors", params={"name": "ghost"}), 400, "actor.unknown_name")
    assert (await _ok(await client.get(f"/admin/actors/{counter}")))["state"] == {"n": 0}
    document = await _ok(await client.get("/admin/openapi.json"))
    assert document["openapi"].startswith("3.1")
    assert "/admin/actors/{actor_id}/workflow/replay" in document["paths"]


async def test_retry_after_the_cause_is_fixed(
    client: httpx.AsyncClient, key: str, causes: Path
) -> None:
    cause = causes / f"fail-{key}"
    cause.write_text("broken")
    jobs = await _create(client, "jobs", key)
    await _ok(await client.post(f"/admin/actors/{jobs}/queues/jobs", json={"body": {"value": 7}}))

    async def failed() -> bool:
        return (await _workflow(client, jobs))["status"] == "failed"

    await eventually(failed, timeout=10)
    workflow = await _workflow(client, jobs)
    apply = next(e for e in workflow["history"] if e["name"] == "apply")
    assert apply["status"] == "exhausted"
    assert apply["attempts"] == 2
    assert "cause file" in apply["error"]["message"]
    _error(
        await client.post(f"/admin/actors/{jobs}/workflow/replay", json={"from": "nowhere"}),
        404,
        "workflow.unknown_step",
    )

    # A retry with the cause still there fails again, and keeps the earlier errors.
    retried = await _ok(await client.post(f"/admin/actors/{jobs}/workflow/retry"))
    assert retried["workflow"]["status"] == "running"
    await eventually(failed, timeout=10)
    apply = next(e for e in (await _workflow(client, jobs))["history"] if e["name"] == "apply")
    assert len(apply["errors"]) == 1
    assert apply["errors"][0]["attempts"] == 2

    cause.unlink()
    await _ok(await client.post(f"/admin/actors/{jobs}/workflow/retry"))

    async def applied() -> bool:
        return (await _ok(await client.get(f"/admin/actors/{jobs}")))["state"]["applied"] == [7]

    await eventually(applied, timeout=10)
    workflow = await _workflow(client, jobs)
    assert workflow["status"] == "running"
    assert workflow["error"] is None
    apply = next(e for e in workflow["history"] if e["name"] == "apply")
    assert apply["status"] == "completed"
    assert [error["attempts"] for error in apply["errors"]] == [2, 2]  # both failed rounds
    _error(await client.post(f"/admin/actors/{jobs}/workflow/retry"), 409, "workflow.not_failed")


async def test_replay_from_a_step_reruns_it_and_what_follows(
    client: httpx.AsyncClient, key: str
) -> None:
    once = await _create(client, "once", key)
    await _ok(await client.post(f"/admin/actors/{once}/actions/$workflow", json={}))

    async def completed() -> bool:
        return (await _workflow(client, once))["status"] == "completed"

    await eventually(completed, timeout=10)
    replayed = await _ok(
        await client.post(f"/admin/actors/{once}/workflow/replay", json={"from": "charge"})
    )
    assert replayed["workflow"]["status"] == "running"
    await eventually(completed, timeout=10)
    runs = (await _ok(await client.get(f"/admin/actors/{once}")))["state"]["runs"]
    assert runs == {"reserve": 1, "charge": 2, "ship": 2}
    assert (await _workflow(client, once))["output"] == "shipped"


async def test_replay_of_a_loop_gives_its_messages_back(
    client: httpx.AsyncClient, key: str
) -> None:
    jobs = await _create(client, "jobs", key)
    for value in (5, 6):
        await _ok(
            await client.post(f"/admin/actors/{jobs}/queues/jobs", json={"body": {"value": value}})
        )

    async def state() -> dict[str, Any]:
        details: dict[str, Any] = (await _ok(await client.get(f"/admin/actors/{jobs}")))["state"]
        return details

    async def applied_twice() -> bool:
        return (await state())["applied"] == [5, 6]

    await eventually(applied_twice, timeout=10)
    _error(
        await client.post(f"/admin/actors/{jobs}/workflow/replay", json={"from": "jobs/~0/apply"}),
        409,
        "workflow.replay_unsupported",
    )
    await _ok(await client.post(f"/admin/actors/{jobs}/workflow/replay", json={"from": "jobs"}))

    async def applied_again() -> bool:
        return (await state())["applied"] == [5, 6, 5, 6]

    await eventually(applied_again, timeout=10)
    assert (await _ok(await client.get(f"/admin/actors/{jobs}")))["queue"] == []


async def _sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    kind = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            assert kind is not None
            yield kind, json.loads(line[len("data: ") :])


async def test_the_feed_streams_state_events_and_history(
    server: ServerProcess, client: httpx.AsyncClient, key: str
) -> None:
    counter = await _create(client, "counter", key)
    jobs = await _create(client, "jobs", key)
    seen: list[tuple[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(10, read=20)) as stream,
        stream.stream("GET", f"/admin/actors/{counter}/feed") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse_events(response)
        kind, snapshot = await anext(events)
        assert kind == "snapshot"
        assert snapshot["actor"]["actor_id"] == counter
        await _ok(await client.post(f"/admin/actors/{counter}/actions/bump", json={"args": [3]}))
        while not any(k == "state" for k, _ in seen):
            seen.append(await anext(events))
    assert ("event", {"name": "bumped", "args": [3]}) in seen
    assert ("state", {"state": {"n": 3}}) in seen

    async with (
        httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(10, read=20)) as stream,
        stream.stream("GET", f"/admin/actors/{jobs}/feed") as response,
    ):
        events = _sse_events(response)
        assert (await anext(events))[0] == "snapshot"
        await _ok(
            await client.post(f"/admin/actors/{jobs}/queues/jobs", json={"body": {"value": 9}})
        )
        locations: set[str] = set()
        while "jobs/~0/apply" not in locations:
            kind, data = await anext(events)
            if kind == "workflow":
                locations |= {entry["location"] for entry in data["history"]}
        assert "jobs/~0/take" in locations
